// Reads CPUs, memory, NUMA nodes and PCI locality with hwloc, from the live machine or from a
// fake sysfs tree. Internal to host discovery.
// Thread-safe: concurrent calls serialize on one process-wide mutex (see hwloc_reader.cc).
#pragma once

#include "absl/status/statusor.h"
#include "hardware/host/host_topology.h"
#include "hardware/sysroot.h"

namespace tessera {

// Fills sockets, cores, pus, memory_bytes, numa_nodes, cpu_model and pci_numa_locality (nics and
// source are left to the caller).
absl::StatusOr<HostTopology> ReadHwlocTopology(const Sysroot& sysroot);

}  // namespace tessera

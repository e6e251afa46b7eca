// Finds the physical network interfaces of a host in /sys/class/net and the PCI function behind
// each. Internal to host discovery. Thread-safe: a pure function of its inputs.
#pragma once

#include <string>
#include <vector>

#include "hardware/host/host_topology.h"
#include "hardware/pci.h"
#include "hardware/sysroot.h"

namespace tessera {

// Every interface backed by a PCI function, sorted by name. Virtual interfaces (lo, docker0,
// veth*, bridges, ifb*: anything under /sys/devices/virtual or without a PCI ancestor) are
// skipped. numa_node is the PCI function's, or -1 (the caller refines it with hwloc locality).
std::vector<Nic> DiscoverNics(const Sysroot& sysroot, const PciInventory& pci,
                              std::vector<std::string>& warnings);

}  // namespace tessera

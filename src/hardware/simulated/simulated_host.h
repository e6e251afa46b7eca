// The HostTopology of a simulated machine: the CPU/NUMA layout a Linux kernel would show for the
// given shape, so simulated and probed hosts look alike to everything downstream.
// Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hardware/host/host_topology.h"

namespace tessera::simulated {

struct HostShape {
  int sockets = 1;
  int cores_per_socket = 1;
  int threads_per_core = 1;
  int numa_nodes = 1;  // a multiple of sockets that divides each socket's cores evenly
  uint64_t memory_bytes = 0;
  std::string cpu_model;
};

// CPUs numbered the Linux way (first thread of every core across sockets, then the siblings);
// NUMA nodes split sockets evenly; memory is split evenly (the remainder on node 0); distances
// 10 local, 12 within a socket, 21 across sockets. source = "simulated"; `nics` is copied in,
// sorted by name.
HostTopology MakeSimulatedHost(const HostShape& shape, std::vector<Nic> nics);

}  // namespace tessera::simulated

#include "hardware/simulated/simulated_host.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tessera::simulated {
namespace {

// "0-3,8-11" for a sorted list of CPUs.
std::string CpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    absl::StrAppend(&out, out.empty() ? "" : ",", cpus[i]);
    if (j > i) absl::StrAppend(&out, "-", cpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace

HostTopology MakeSimulatedHost(const HostShape& shape, std::vector<Nic> nics) {
  HostTopology host;
  host.source = "simulated";
  host.sockets = shape.sockets;
  host.cores = shape.sockets * shape.cores_per_socket;
  host.pus = host.cores * shape.threads_per_core;
  host.memory_bytes = shape.memory_bytes;
  host.cpu_model = shape.cpu_model;

  const int nodes_per_socket = std::max(1, shape.numa_nodes / shape.sockets);
  const int cores_per_node = std::max(1, shape.cores_per_socket / nodes_per_socket);
  std::vector<std::vector<int>> node_cpus(shape.numa_nodes);
  for (int cpu = 0; cpu < host.pus; ++cpu) {
    const int node = std::min((cpu % host.cores) / cores_per_node, shape.numa_nodes - 1);
    node_cpus[node].push_back(cpu);
  }
  const uint64_t per_node = shape.memory_bytes / shape.numa_nodes;
  for (int n = 0; n < shape.numa_nodes; ++n) {
    NumaNode node;
    node.os_index = n;
    node.memory_bytes = per_node + (n == 0 ? shape.memory_bytes % shape.numa_nodes : 0);
    std::sort(node_cpus[n].begin(), node_cpus[n].end());
    node.cpulist = CpuList(node_cpus[n]);
    if (shape.numa_nodes > 1) {  // like hwloc, no matrix for a single node
      for (int other = 0; other < shape.numa_nodes; ++other) {
        node.distances.push_back(other == n                                         ? 10
                                 : other / nodes_per_socket == n / nodes_per_socket ? 12
                                                                                    : 21);
      }
    }
    host.numa_nodes.push_back(std::move(node));
  }
  std::sort(nics.begin(), nics.end(), [](const Nic& a, const Nic& b) { return a.name < b.name; });
  host.nics = std::move(nics);
  return host;
}

}  // namespace tessera::simulated

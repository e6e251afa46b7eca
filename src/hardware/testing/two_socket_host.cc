#include "hardware/testing/two_socket_host.h"

namespace tessera::testing {

void BuildTwoSocketHost(FakeTree& t) {
  t.Host({.sockets = 2,
          .cores_per_socket = 4,
          .threads_per_core = 2,
          .numa_nodes = 2,
          .memory_gib = 64,
          .cpu_model = "Intel(R) Xeon(R) Platinum 8480+"});
  const std::string node0 = FakeTree::CpuMask({0, 1, 2, 3, 8, 9, 10, 11}, 16);
  const std::string node1 = FakeTree::CpuMask({4, 5, 6, 7, 12, 13, 14, 15}, 16);
  const auto h100 = [&](const std::string& bdf, int numa, std::vector<std::string> parents,
                        const std::string& local_cpus) {
    t.PciFunction({.bdf = bdf,
                   .vendor = 0x10de,
                   .device = 0x2330,
                   .pci_class = 0x030200,
                   .numa_node = numa,
                   .parents = std::move(parents),
                   .driver = "nvidia",
                   .local_cpus = local_cpus});
  };
  t.Bridge("0000:15:01.0", {}, 0);
  t.Bridge("0000:16:00.0", {"0000:15:01.0"}, 0);
  t.Bridge("0000:17:00.0", {"0000:15:01.0", "0000:16:00.0"}, 0);
  t.Bridge("0000:17:01.0", {"0000:15:01.0", "0000:16:00.0"}, 0);
  h100("0000:18:00.0", 0, {"0000:15:01.0", "0000:16:00.0", "0000:17:00.0"}, node0);
  t.Nic({.ifname = "ibp1",
         .bdf = "0000:19:00.0",
         .numa_node = 0,
         .parents = {"0000:15:01.0", "0000:16:00.0", "0000:17:01.0"},
         .speed_mbps = 400000,
         .local_cpus = node0});
  t.Bridge("0000:1a:00.0", {"0000:15:01.0"}, 0);
  t.Bridge("0000:1b:00.0", {"0000:15:01.0", "0000:1a:00.0"}, 0);
  h100("0000:1c:00.0", 0, {"0000:15:01.0", "0000:1a:00.0", "0000:1b:00.0"}, node0);
  t.Nic({.ifname = "ibp0",
         .bdf = "0000:2b:00.0",
         .numa_node = 0,
         .speed_mbps = 200000,
         .local_cpus = node0});
  h100("0000:3c:00.0", 0, {}, node0);
  t.Bridge("0000:9a:01.0", {}, 1);
  h100("0000:9b:00.0", 1, {"0000:9a:01.0"}, node1);
  t.Nic({.ifname = "ibp2",
         .bdf = "0000:ac:00.0",
         .numa_node = 1,
         .speed_mbps = 400000,
         .local_cpus = node1});
  t.Nic({.ifname = "ibp4",
         .bdf = "0000:ae:00.0",
         .numa_node = 1,
         .speed_mbps = 400000,
         .local_cpus = node1});
  t.Nic({.ifname = "eth1",
         .bdf = "0000:c1:00.0",
         .numa_node = -1,
         .speed_mbps = 25000,
         .local_cpus = node1});
  h100("0000:c2:00.0", -1, {}, "");
  t.VirtualNic("lo");
  t.VirtualNic("veth1a2b");
}

}  // namespace tessera::testing

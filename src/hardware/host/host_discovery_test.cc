#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hardware/host/host_topology.h"
#include "hardware/testing/fake_tree.h"
#include "hardware/testing/two_socket_host.h"

namespace tessera {
namespace {

using testing::BuildTwoSocketHost;
using ::testing::ElementsAre;
using testing::FakeTree;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr uint64_t kGiB = uint64_t{1} << 30;

std::string FixturePath(const std::string& machine) {
  return std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/hardware/" + machine;
}

std::vector<std::string> NicNames(const HostTopology& host) {
  std::vector<std::string> names;
  for (const Nic& n : host.nics) names.push_back(n.name);
  return names;
}

const Nic* FindNic(const HostTopology& host, const std::string& name) {
  for (const Nic& n : host.nics) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

TEST(HostDiscoveryTest, CpuOnlyVmCountsCpusMemoryAndNuma) {
  auto host = DiscoverHostTopology(Sysroot(FixturePath("cpu-only-vm")));
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(host->source, "hwloc");
  EXPECT_EQ(host->sockets, 1);
  EXPECT_EQ(host->cores, 4);
  EXPECT_EQ(host->pus, 8);
  EXPECT_EQ(host->memory_bytes, 16 * kGiB);
  EXPECT_EQ(host->cpu_model, "Intel Xeon Processor (Icelake)");
  ASSERT_EQ(host->numa_nodes.size(), 1u);
  EXPECT_EQ(host->numa_nodes[0].os_index, 0);
  EXPECT_EQ(host->numa_nodes[0].cpulist, "0-7");
  EXPECT_EQ(host->numa_nodes[0].memory_bytes, 16 * kGiB);
  // hwloc keeps no distance matrix for a single node.
  EXPECT_THAT(host->numa_nodes[0].distances, IsEmpty());
}

TEST(HostDiscoveryTest, CpuOnlyVmHasOneVirtioNicAndSkipsSoftwareInterfaces) {
  auto host = DiscoverHostTopology(Sysroot(FixturePath("cpu-only-vm")));
  ASSERT_TRUE(host.ok()) << host.status();
  // lo and docker0 live under /sys/devices/virtual/net.
  ASSERT_THAT(NicNames(*host), ElementsAre("eth0"));
  const Nic& eth0 = host->nics[0];
  // The interface sits under virtio0, a child of the PCI function.
  EXPECT_EQ(eth0.pci_bus_id, "0000:00:02.0");
  EXPECT_EQ(eth0.sysfs_path, "/sys/devices/pci0000:00/0000:00:02.0");
  EXPECT_EQ(eth0.speed_mbps, 0);  // virtio reports -1
  // sysfs says -1; hwloc's locality (local_cpus) places it on node 0.
  EXPECT_EQ(eth0.numa_node, 0);
}

TEST(HostDiscoveryTest, TwoSocketTreeCountsSocketsCoresThreadsAndMemory) {
  FakeTree tree;
  BuildTwoSocketHost(tree);
  auto host = DiscoverHostTopology(Sysroot(tree.root()));
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(host->sockets, 2);
  EXPECT_EQ(host->cores, 8);
  EXPECT_EQ(host->pus, 16);
  EXPECT_EQ(host->memory_bytes, 64 * kGiB);
  // The model comes from the tree's /proc/cpuinfo, not from this machine's cpuid.
  EXPECT_EQ(host->cpu_model, "Intel(R) Xeon(R) Platinum 8480+");
  ASSERT_EQ(host->numa_nodes.size(), 2u);
  EXPECT_EQ(host->numa_nodes[0].cpulist, "0-3,8-11");
  EXPECT_EQ(host->numa_nodes[1].cpulist, "4-7,12-15");
  EXPECT_EQ(host->numa_nodes[0].memory_bytes, 32 * kGiB);
  EXPECT_EQ(host->numa_nodes[1].memory_bytes, 32 * kGiB);
  EXPECT_THAT(host->numa_nodes[0].distances, ElementsAre(10, 21));
  EXPECT_THAT(host->numa_nodes[1].distances, ElementsAre(21, 10));
}

TEST(HostDiscoveryTest, TwoSocketTreeNics) {
  FakeTree tree;
  BuildTwoSocketHost(tree);
  auto host = DiscoverHostTopology(Sysroot(tree.root()));
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_THAT(NicNames(*host), ElementsAre("eth1", "ibp0", "ibp1", "ibp2", "ibp4"));
  const Nic* ibp1 = FindNic(*host, "ibp1");
  ASSERT_NE(ibp1, nullptr);
  EXPECT_EQ(ibp1->pci_bus_id, "0000:19:00.0");
  EXPECT_EQ(ibp1->numa_node, 0);
  EXPECT_EQ(ibp1->speed_mbps, 400000);
  EXPECT_EQ(ibp1->sysfs_path,
            "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0");
  EXPECT_EQ(FindNic(*host, "ibp2")->numa_node, 1);
  // eth1's numa_node file says -1: the node comes from hwloc's PCI locality (local_cpus).
  EXPECT_EQ(FindNic(*host, "eth1")->numa_node, 1);
  EXPECT_EQ(FindNic(*host, "eth1")->speed_mbps, 25000);
  EXPECT_EQ(host->pci_numa_locality.at("0000:9b:00.0"), 1);
  EXPECT_EQ(host->pci_numa_locality.count("0000:c2:00.0"), 0u);
}

TEST(HostDiscoveryTest, FakeTreeLoadRestoresHwlocFsroot) {
  FakeTree tree;
  BuildTwoSocketHost(tree);
  unsetenv("HWLOC_FSROOT");
  ASSERT_TRUE(DiscoverHostTopology(Sysroot(tree.root())).ok());
  EXPECT_EQ(std::getenv("HWLOC_FSROOT"), nullptr);
  setenv("HWLOC_FSROOT", "/", 1);
  ASSERT_TRUE(DiscoverHostTopology(Sysroot(tree.root())).ok());
  ASSERT_NE(std::getenv("HWLOC_FSROOT"), nullptr);
  EXPECT_STREQ(std::getenv("HWLOC_FSROOT"), "/");
  unsetenv("HWLOC_FSROOT");
}

TEST(HostDiscoveryTest, LiveMachineReportsCoresAndMemory) {
  auto host = DiscoverHostTopology(Sysroot("/"));
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(host->source, "hwloc");
  EXPECT_GE(host->sockets, 1);
  EXPECT_GE(host->cores, 1);
  EXPECT_GE(host->pus, host->cores);
  EXPECT_GT(host->memory_bytes, 0u);
  // At least the kernel's MemTotal, even where the NUMA nodes under-report it.
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  meminfo >> key >> kib;
  ASSERT_EQ(key, "MemTotal:");
  EXPECT_GE(host->memory_bytes, kib * 1024);
  EXPECT_THAT(host->numa_nodes, Not(IsEmpty()));
  for (const Nic& n : host->nics) {
    EXPECT_NE(n.name, "lo");
    EXPECT_FALSE(n.pci_bus_id.empty()) << n.name;
  }
}

TEST(HostDiscoveryTest, FakeAndLiveLoadsInParallelDoNotMix) {
  FakeTree tree;
  BuildTwoSocketHost(tree);
  auto live = DiscoverHostTopology(Sysroot("/"));
  ASSERT_TRUE(live.ok()) << live.status();
  std::vector<std::thread> threads;
  std::vector<int> fake_pus(4, 0), live_pus(4, 0);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int round = 0; round < 3; ++round) {
        auto fake = DiscoverHostTopology(Sysroot(tree.root()));
        auto real = DiscoverHostTopology(Sysroot("/"));
        fake_pus[i] = fake.ok() ? fake->pus : -1;
        live_pus[i] = real.ok() ? real->pus : -1;
        if (fake_pus[i] != 16 || live_pus[i] != live->pus) return;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(fake_pus[i], 16);
    EXPECT_EQ(live_pus[i], live->pus);
  }
}

TEST(HostDiscoveryTest, TreeWithoutCpusIsNotFound) {
  FakeTree tree;
  tree.Write("/sys/bus/pci/devices/.keep", "");
  auto host = DiscoverHostTopology(Sysroot(tree.root()));
  ASSERT_FALSE(host.ok());
  EXPECT_EQ(host.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(host.status().message()),
              ::testing::HasSubstr("no /sys/devices/system/cpu under"));
}

TEST(HostDiscoveryTest, TreeWithoutTopologyFilesIsNotFound) {
  FakeTree tree;
  tree.Write("/sys/devices/system/cpu/online", "0-3\n");
  auto host = DiscoverHostTopology(Sysroot(tree.root()));
  ASSERT_FALSE(host.ok());
  EXPECT_EQ(host.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(host.status().message()),
              ::testing::HasSubstr("hwloc found no CPU topology under"));
}

}  // namespace
}  // namespace tessera

#include <string>

#include "gtest/gtest.h"
#include "hardware/host/host_topology.h"
#include "hardware/testing/fake_tree.h"
#include "hardware/testing/two_socket_host.h"

namespace tessera {
namespace {

using testing::BuildTwoSocketHost;
using testing::FakeTree;

class TwoSocketAffinityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeTree tree;
    BuildTwoSocketHost(tree);
    const Sysroot sysroot(tree.root());
    auto host = DiscoverHostTopology(sysroot);
    ASSERT_TRUE(host.ok()) << host.status();
    host_ = *std::move(host);
    pci_ = PciInventory::Scan(sysroot, nullptr);
  }

  HostTopology host_;
  PciInventory pci_;
};

TEST_F(TwoSocketAffinityTest, SamePcieSwitchWins) {
  EXPECT_EQ(NearestNic(host_, pci_, "0000:18:00.0"), "ibp1");
}

TEST_F(TwoSocketAffinityTest, SameRootPortBeatsSameNumaNodeAndName) {
  // GPU1 is behind another switch on ibp1's root port; ibp0 is on the same NUMA node with a
  // smaller name but under another host bridge.
  EXPECT_EQ(NearestNic(host_, pci_, "0000:1c:00.0"), "ibp1");
}

TEST_F(TwoSocketAffinityTest, SameNumaNodeBeatsName) {
  // GPU4 shares no PCI path with any NIC: the NUMA 0 NICs win over eth1 (NUMA 1).
  EXPECT_EQ(NearestNic(host_, pci_, "0000:3c:00.0"), "ibp0");
}

TEST_F(TwoSocketAffinityTest, NameBreaksTiesOnTheSameNumaNode) {
  // GPU2 on NUMA 1: eth1 (placed on NUMA 1 by hwloc), ibp2 and ibp4 tie; the smallest name wins.
  EXPECT_EQ(NearestNic(host_, pci_, "0000:9b:00.0"), "eth1");
}

TEST_F(TwoSocketAffinityTest, UnknownLocalityFallsBackToName) {
  EXPECT_EQ(NearestNumaNode(host_, pci_, "0000:c2:00.0"), -1);
  EXPECT_EQ(NearestNic(host_, pci_, "0000:c2:00.0"), "eth1");
  EXPECT_EQ(NearestNic(host_, pci_, "0000:ff:00.0"), "eth1");
}

TEST_F(TwoSocketAffinityTest, NearestNumaNodeUsesSysfsThenHwlocLocality) {
  EXPECT_EQ(NearestNumaNode(host_, pci_, "0000:9b:00.0"), 1);  // numa_node file
  EXPECT_EQ(NearestNumaNode(host_, pci_, "0000:c1:00.0"), 1);  // -1 in sysfs, local_cpus node 1
}

TEST(NicAffinityTest, NoNicsMeansEmptyName) {
  HostTopology host;
  EXPECT_EQ(NearestNic(host, PciInventory(), "0000:18:00.0"), "");
  EXPECT_EQ(NearestNicOnNumaNode(host, 0), "");
}

TEST(NicAffinityTest, SingleNumaNodeHostPlacesEveryDeviceOnIt) {
  HostTopology host;
  host.numa_nodes.push_back({.os_index = 0});
  PciFunction gpu;
  gpu.bus_id = "0000:00:04.0";
  gpu.numa_node = -1;
  const PciInventory pci({gpu});
  EXPECT_EQ(NearestNumaNode(host, pci, "0000:00:04.0"), 0);
  host.numa_nodes.push_back({.os_index = 1});
  EXPECT_EQ(NearestNumaNode(host, pci, "0000:00:04.0"), -1);
}

TEST(NicAffinityTest, NearestNicOnNumaNodePrefersTheNodeThenTheName) {
  HostTopology host;
  host.nics = {{.name = "a0", .numa_node = 0},
               {.name = "b1", .numa_node = 1},
               {.name = "c1", .numa_node = 1}};
  EXPECT_EQ(NearestNicOnNumaNode(host, 1), "b1");
  EXPECT_EQ(NearestNicOnNumaNode(host, 0), "a0");
  EXPECT_EQ(NearestNicOnNumaNode(host, 2), "a0");
  EXPECT_EQ(NearestNicOnNumaNode(host, -1), "a0");
}

}  // namespace
}  // namespace tessera

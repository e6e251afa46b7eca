#include "scheduling/device_topology.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera {
namespace {

using ::testing::ElementsAre;

Device Gpu(int index, int numa, std::string nic) {
  Device d;
  d.family = "nvidia";
  d.index = index;
  d.numa_node = numa;
  d.nearest_nic = std::move(nic);
  return d;
}

DeviceLink Link(int a, int b, BandwidthClass c) {
  DeviceLink l;
  l.a = a;
  l.b = b;
  l.kind = LinkKind::kNvLink;
  l.bandwidth_class = c;
  return l;
}

TEST(DeviceTopologyTest, AllVisibleKeepsIndicesAndFacts) {
  const DeviceTopology t = DeviceTopology::FromVisibleDevices(
      {Gpu(0, 0, "mlx5_0"), Gpu(1, 1, "mlx5_1")}, {Link(0, 1, BandwidthClass::kHigh)});
  EXPECT_EQ(t.count, 2);
  EXPECT_THAT(t.numa_node, ElementsAre(0, 1));
  EXPECT_THAT(t.nearest_nic, ElementsAre("mlx5_0", "mlx5_1"));
  ASSERT_EQ(t.links.size(), 1u);
  EXPECT_EQ(t.links[0].a, 0);
  EXPECT_EQ(t.links[0].b, 1);
  EXPECT_EQ(t.links[0].bandwidth_class, BandwidthClass::kHigh);
}

// A mask (e.g. CUDA_VISIBLE_DEVICES=2,5,6) leaves physical devices 2, 5 and 6 as instances
// 0, 1 and 2; links to hidden devices disappear.
TEST(DeviceTopologyTest, MaskedSubsetMapsPhysicalToInstanceIndices) {
  const DeviceTopology t = DeviceTopology::FromVisibleDevices(
      {Gpu(2, 0, "a"), Gpu(5, 1, "b"), Gpu(6, 1, "c")},
      {Link(0, 2, BandwidthClass::kMedium), Link(2, 5, BandwidthClass::kLow),
       Link(5, 6, BandwidthClass::kMedium), Link(6, 7, BandwidthClass::kMedium),
       Link(1, 3, BandwidthClass::kMedium)});
  EXPECT_EQ(t.count, 3);
  EXPECT_THAT(t.numa_node, ElementsAre(0, 1, 1));
  EXPECT_THAT(t.nearest_nic, ElementsAre("a", "b", "c"));
  ASSERT_EQ(t.links.size(), 2u);
  EXPECT_EQ(t.links[0].a, 0);  // 2-5
  EXPECT_EQ(t.links[0].b, 1);
  EXPECT_EQ(t.links[0].bandwidth_class, BandwidthClass::kLow);
  EXPECT_EQ(t.links[1].a, 1);  // 5-6
  EXPECT_EQ(t.links[1].b, 2);
  EXPECT_EQ(t.links[1].bandwidth_class, BandwidthClass::kMedium);
}

// Visible order, not physical order, defines instances (a mask may list devices out of order).
TEST(DeviceTopologyTest, ReorderedVisibleDevices) {
  const DeviceTopology t = DeviceTopology::FromVisibleDevices({Gpu(3, 1, "x"), Gpu(0, 0, "y")},
                                                              {Link(0, 3, BandwidthClass::kHigh)});
  EXPECT_THAT(t.numa_node, ElementsAre(1, 0));
  EXPECT_THAT(t.nearest_nic, ElementsAre("x", "y"));
  ASSERT_EQ(t.links.size(), 1u);
  EXPECT_EQ(t.links[0].a, 1);
  EXPECT_EQ(t.links[0].b, 0);
}

TEST(DeviceTopologyTest, SelfLinksAndDuplicateIndicesAreHarmless) {
  const DeviceTopology t = DeviceTopology::FromVisibleDevices({Gpu(4, 0, ""), Gpu(4, 1, "")},
                                                              {Link(4, 4, BandwidthClass::kHigh)});
  EXPECT_EQ(t.count, 2);
  EXPECT_TRUE(t.links.empty());
}

TEST(DeviceTopologyTest, NoDevices) {
  const DeviceTopology t =
      DeviceTopology::FromVisibleDevices({}, {Link(0, 1, BandwidthClass::kHigh)});
  EXPECT_EQ(t.count, 0);
  EXPECT_TRUE(t.numa_node.empty());
  EXPECT_TRUE(t.links.empty());
}

}  // namespace
}  // namespace tessera

#include "hardware/simulated/interconnect.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::simulated {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

std::vector<std::pair<int, int>> Pairs(const std::vector<DeviceLink>& links) {
  std::vector<std::pair<int, int>> out;
  for (const DeviceLink& l : links) out.emplace_back(l.a, l.b);
  return out;
}

TEST(InterconnectTest, NamesRoundTrip) {
  for (const char* name : {"none", "nvswitch", "nvlink-pairs", "xgmi-mesh", "ici-grid",
                           "neuron-ring", "gaudi-all-to-all"}) {
    auto kind = ParseInterconnect(name);
    ASSERT_TRUE(kind.has_value()) << name;
    EXPECT_EQ(InterconnectName(*kind), name);
  }
  EXPECT_FALSE(ParseInterconnect("NVSwitch").has_value());
}

TEST(InterconnectTest, AllPairFabricsLinkEveryPairOnce) {
  EXPECT_EQ(BuildLinks(Interconnect::kNvSwitch, 0, 8, 18, 450).size(), 28u);
  EXPECT_EQ(BuildLinks(Interconnect::kGaudiAllToAll, 0, 8, 3, 37.5).size(), 28u);
  EXPECT_THAT(Pairs(BuildLinks(Interconnect::kXgmiMesh, 4, 3, 1, 64)),
              ElementsAre(Pair(4, 5), Pair(4, 6), Pair(5, 6)));
  EXPECT_TRUE(BuildLinks(Interconnect::kNone, 0, 8, 0, 0).empty());
}

TEST(InterconnectTest, PairsRingAndGrid) {
  EXPECT_THAT(Pairs(BuildLinks(Interconnect::kNvLinkPairs, 0, 5, 12, 300)),
              ElementsAre(Pair(0, 1), Pair(2, 3)));
  EXPECT_THAT(Pairs(BuildLinks(Interconnect::kNeuronRing, 0, 4, 1, 96)),
              ElementsAre(Pair(0, 1), Pair(1, 2), Pair(2, 3), Pair(0, 3)));
  EXPECT_THAT(Pairs(BuildLinks(Interconnect::kNeuronRing, 0, 2, 1, 96)), ElementsAre(Pair(0, 1)));
  // 8 chips form a 2x4 block: 10 neighbour pairs.
  EXPECT_EQ(BuildLinks(Interconnect::kIciGrid, 0, 8, 1, 90).size(), 10u);
  EXPECT_TRUE(IciGridSupports(4));
  EXPECT_FALSE(IciGridSupports(2));
}

TEST(InterconnectTest, LinksCarryLanesAndBandwidthClass) {
  const auto links = BuildLinks(Interconnect::kNvSwitch, 0, 2, 18, 450);
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0].lanes, 18);
  EXPECT_EQ(links[0].gigabytes_per_second, 450);
  EXPECT_EQ(links[0].bandwidth_class, BandwidthClass::kHigh);
  EXPECT_EQ(DefaultsFor(Interconnect::kNvSwitch).lanes, 18);
  EXPECT_TRUE(IsNvLink(Interconnect::kNvLinkPairs));
  EXPECT_FALSE(IsNvLink(Interconnect::kIciGrid));
}

}  // namespace
}  // namespace tessera::simulated

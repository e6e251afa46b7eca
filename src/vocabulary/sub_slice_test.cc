#include "vocabulary/sub_slice.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

SliceShape Shape(TpuGeneration g, const char* topology, int chips_per_host) {
  return *MakeSliceShape(g, *ParseTpuTopology(topology), chips_per_host);
}

TEST(SubSliceTest, A2x4InsideA4x4IsTwoColumnsOfHosts) {
  // v6e 4x4 on 4-chip hosts: a 2x2 grid of hosts, workers 0 1 / 2 3. A 2x4 is a 1x2 host grid.
  const SliceShape parent = Shape(TpuGeneration::kV6e, "4x4", 4);
  const SliceShape sub = Shape(TpuGeneration::kV6e, "2x4", 4);
  auto blocks = SubSliceBlocks(parent, sub);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_THAT(*blocks, ElementsAre(ElementsAre(0, 2), ElementsAre(1, 3)));
}

TEST(SubSliceTest, OneHostBlocksAndWholeSlices) {
  const SliceShape parent = Shape(TpuGeneration::kV6e, "4x8", 4);  // 2x4 hosts
  auto single = SubSliceBlocks(parent, Shape(TpuGeneration::kV6e, "2x2", 4));
  ASSERT_TRUE(single.ok()) << single.status();
  ASSERT_EQ(single->size(), 8u);
  for (int b = 0; b < 8; ++b) EXPECT_THAT((*single)[b], ElementsAre(b));
  auto whole = SubSliceBlocks(parent, parent);
  ASSERT_TRUE(whole.ok());
  EXPECT_THAT(*whole, ElementsAre(ElementsAre(0, 1, 2, 3, 4, 5, 6, 7)));
  // 4x4 inside 4x8: the two halves along y.
  auto halves = SubSliceBlocks(parent, Shape(TpuGeneration::kV6e, "4x4", 4));
  ASSERT_TRUE(halves.ok());
  EXPECT_THAT(*halves, ElementsAre(ElementsAre(0, 1, 2, 3), ElementsAre(4, 5, 6, 7)));
}

TEST(SubSliceTest, ThreeDimensionalBlocks) {
  // v4 4x4x4: 2x2x1-chip hosts, a 2x2x4 host grid; a 2x2x2 sub-slice is one host column of two.
  const SliceShape parent = Shape(TpuGeneration::kV4, "4x4x4", 4);
  const SliceShape sub = Shape(TpuGeneration::kV4, "2x2x2", 4);
  auto blocks = SubSliceBlocks(parent, sub);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  ASSERT_EQ(blocks->size(), 8u);
  EXPECT_THAT((*blocks)[0], ElementsAre(0, 4));
  EXPECT_THAT((*blocks)[1], ElementsAre(1, 5));
  EXPECT_THAT((*blocks)[4], ElementsAre(8, 12));
}

TEST(SubSliceTest, ShapesThatDoNotTileAreRefusedByName) {
  const SliceShape parent = Shape(TpuGeneration::kV6e, "4x4", 4);
  auto bigger = SubSliceBlocks(parent, Shape(TpuGeneration::kV6e, "4x8", 4));
  ASSERT_FALSE(bigger.ok());
  EXPECT_THAT(std::string(bigger.status().message()),
              HasSubstr("v6e-32 4x8 is not a block of v6e-16 4x4: a host grid of 2,4,1 does not "
                        "divide 2,2,1"));
  auto other = SubSliceBlocks(parent, Shape(TpuGeneration::kV5litepod, "2x4", 4));
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(std::string(other.status().message()), HasSubstr("another generation"));
  auto one_host = SubSliceBlocks(parent, Shape(TpuGeneration::kV6e, "2x4", 8));
  ASSERT_FALSE(one_host.ok());
  EXPECT_THAT(std::string(one_host.status().message()), HasSubstr("their hosts hold"));
}

}  // namespace
}  // namespace tessera

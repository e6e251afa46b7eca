#include "vocabulary/chip_grid.h"

#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(ChipGridTest, HostBlocks) {
  EXPECT_EQ(HostChipBlock(1), (ChipCoord{1, 1, 1}));
  EXPECT_EQ(HostChipBlock(4), (ChipCoord{2, 2, 1}));
  EXPECT_EQ(HostChipBlock(8), (ChipCoord{2, 4, 1}));
  EXPECT_FALSE(HostChipBlock(2).has_value());
  EXPECT_FALSE(HostChipBlock(0).has_value());
}

TEST(ChipGridTest, IndexOrderIsXFastest) {
  const ChipCoord block{2, 4, 1};
  EXPECT_EQ(CoordOfIndex(0, block), (ChipCoord{0, 0, 0}));
  EXPECT_EQ(CoordOfIndex(1, block), (ChipCoord{1, 0, 0}));
  EXPECT_EQ(CoordOfIndex(2, block), (ChipCoord{0, 1, 0}));
  EXPECT_EQ(CoordOfIndex(7, block), (ChipCoord{1, 3, 0}));
  EXPECT_EQ(CoordOfIndex(5, ChipCoord{1, 1, 8}), (ChipCoord{0, 0, 5}));
}

TEST(ChipGridTest, Adjacency) {
  EXPECT_TRUE(AreAdjacent({0, 0, 0}, {1, 0, 0}));
  EXPECT_TRUE(AreAdjacent({0, 1, 0}, {0, 2, 0}));
  EXPECT_FALSE(AreAdjacent({0, 0, 0}, {1, 1, 0}));
  EXPECT_FALSE(AreAdjacent({0, 0, 0}, {0, 0, 0}));
}

TEST(ChipGridTest, RectangleExtent) {
  const ChipCoord one[] = {{1, 1, 0}};
  EXPECT_EQ(RectangleExtent(one), (ChipCoord{1, 1, 1}));
  const ChipCoord row[] = {{0, 0, 0}, {1, 0, 0}};
  EXPECT_EQ(RectangleExtent(row), (ChipCoord{2, 1, 1}));
  const ChipCoord column[] = {{1, 2, 0}, {1, 3, 0}};
  EXPECT_EQ(RectangleExtent(column), (ChipCoord{1, 2, 1}));
  const ChipCoord square[] = {{0, 2, 0}, {1, 2, 0}, {0, 3, 0}, {1, 3, 0}};
  EXPECT_EQ(RectangleExtent(square), (ChipCoord{2, 2, 1}));
  const ChipCoord diagonal[] = {{0, 0, 0}, {1, 1, 0}};
  EXPECT_FALSE(RectangleExtent(diagonal).has_value());
  const ChipCoord ell[] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}};
  EXPECT_FALSE(RectangleExtent(ell).has_value());
  const ChipCoord duplicate[] = {{0, 0, 0}, {0, 0, 0}};
  EXPECT_FALSE(RectangleExtent(duplicate).has_value());
  EXPECT_FALSE(RectangleExtent({}).has_value());
}

TEST(ChipGridTest, Strings) {
  EXPECT_EQ(BoundsString({2, 4, 1}), "2,4,1");
  EXPECT_EQ(PadExtent({4, 4}), (ChipCoord{4, 4, 1}));
  EXPECT_EQ(PadExtent({2, 2, 4}), (ChipCoord{2, 2, 4}));
  EXPECT_EQ(ParseCoord(CoordString({1, 3, 0})), (ChipCoord{1, 3, 0}));
  EXPECT_FALSE(ParseCoord("1,2").has_value());
  EXPECT_FALSE(ParseCoord("1,-2,0").has_value());
  EXPECT_FALSE(ParseCoord("a,b,c").has_value());
}

}  // namespace
}  // namespace tessera

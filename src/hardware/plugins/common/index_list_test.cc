#include "hardware/plugins/common/index_list.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(IndexListTest, CommaList) {
  EXPECT_THAT(*ParseIndexList("0,3, 2", {}), ElementsAre(0, 3, 2));
  EXPECT_THAT(*ParseIndexList("", {}), IsEmpty());
  EXPECT_FALSE(ParseIndexList("0,,1", {}).ok());
  EXPECT_FALSE(ParseIndexList("0,-1", {}).ok());
  EXPECT_FALSE(ParseIndexList("x", {}).ok());
}

TEST(IndexListTest, RangesOnlyWhenAllowed) {
  EXPECT_THAT(*ParseIndexList("0-3,6", {.allow_ranges = true}), ElementsAre(0, 1, 2, 3, 6));
  EXPECT_FALSE(ParseIndexList("0-3", {}).ok());
  EXPECT_FALSE(ParseIndexList("3-1", {.allow_ranges = true}).ok());
  EXPECT_FALSE(ParseIndexList("0-99999999", {.allow_ranges = true}).ok());
}

TEST(IndexListTest, WhitespaceSeparatedSysfsList) {
  EXPECT_THAT(*ParseIndexList("12, 3, 4, 1", {.extra_separators = " \t"}),
              ElementsAre(12, 3, 4, 1));
  EXPECT_THAT(*ParseIndexList("1 2", {.extra_separators = " "}), ElementsAre(1, 2));
}

TEST(IndexListTest, NumberedEntry) {
  EXPECT_EQ(NumberedEntry("accel3", "accel"), 3);
  EXPECT_EQ(NumberedEntry("renderD128", "renderD"), 128);
  EXPECT_FALSE(NumberedEntry("accel", "accel").has_value());
  EXPECT_FALSE(NumberedEntry("accel_controlD3", "accel").has_value());
  EXPECT_FALSE(NumberedEntry("accel3x", "accel").has_value());
}

}  // namespace
}  // namespace tessera

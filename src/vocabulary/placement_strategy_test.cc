#include "vocabulary/placement_strategy.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(PlacementStrategyTest, NamesRoundTrip) {
  for (PlacementStrategy s : {PlacementStrategy::kPack, PlacementStrategy::kSpread,
                              PlacementStrategy::kStrictPack, PlacementStrategy::kStrictSpread}) {
    EXPECT_EQ(*ParsePlacementStrategy(PlacementStrategyName(s)), s);
  }
  EXPECT_EQ(PlacementStrategyName(PlacementStrategy::kStrictSpread), "STRICT_SPREAD");
}

TEST(PlacementStrategyTest, AnUnknownWordIsRefusedInOneLine) {
  EXPECT_EQ(ParsePlacementStrategy("PACKED").status().message(),
            "unknown placement strategy \"PACKED\"; expected PACK, SPREAD, STRICT_PACK or "
            "STRICT_SPREAD");
  // Ray's words only: no lower case, no padding.
  EXPECT_FALSE(ParsePlacementStrategy("pack").ok());
  EXPECT_FALSE(ParsePlacementStrategy(" PACK").ok());
}

}  // namespace
}  // namespace tessera

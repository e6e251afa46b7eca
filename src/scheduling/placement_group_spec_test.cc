#include "scheduling/placement_group_spec.h"

#include "gtest/gtest.h"
#include "scheduling/scheduling_test_util.h"

namespace tessera {
namespace {

using testing_util::Res;

PlacementGroupSpec Bundles(std::vector<std::string> bundles) {
  PlacementGroupSpec spec;
  for (const std::string& b : bundles) spec.primary.bundles.push_back(Res(b));
  return spec;
}

TEST(PlacementGroupSpecTest, AcceptsAValidSpec) {
  PlacementGroupSpec spec = Bundles({"CPU=1,GPU=2", "GPU=0.5"});
  spec.primary.selectors = {*ParseLabelSelector("zone=a"), LabelSelector()};
  spec.fallbacks.push_back(BundleOption{{Res("GPU=1")}, {}});
  EXPECT_TRUE(ValidatePlacementGroupSpec(spec).ok());
}

TEST(PlacementGroupSpecTest, RefusalsNameTheBundleAndTheRule) {
  EXPECT_EQ(ValidatePlacementGroupSpec(Bundles({})).message(),
            "no bundles (a placement group reserves at least one bundle)");
  EXPECT_EQ(ValidatePlacementGroupSpec(Bundles({"CPU=1", "CPU=0"})).message(),
            "bundle 1: empty or all-zero bundle (a bundle reserves at least one resource)");
  EXPECT_EQ(ValidatePlacementGroupSpec(Bundles({"CPU=1,bundle=1"})).message(),
            "bundle 0: the resource name \"bundle\" is reserved");
  EXPECT_EQ(ValidatePlacementGroupSpec(Bundles({"CPU=1", "GPU=1.5"})).message(),
            "bundle 1: GPU: 1.5 must be a whole number of devices or a fraction below 1 (one "
            "shared device)");
  PlacementGroupSpec selectors = Bundles({"CPU=1", "CPU=1"});
  selectors.primary.selectors = {LabelSelector()};
  EXPECT_EQ(ValidatePlacementGroupSpec(selectors).message(),
            "1 bundle selectors for 2 bundles (give one per bundle, or none)");
  PlacementGroupSpec fallback = Bundles({"CPU=1"});
  fallback.fallbacks.push_back(BundleOption{{Res("CPU=1")}, {}});
  fallback.fallbacks.push_back(BundleOption{{Res("CPU=1"), ResourceSet()}, {}});
  EXPECT_EQ(ValidatePlacementGroupSpec(fallback).message(),
            "fallback 2: bundle 1: empty or all-zero bundle (a bundle reserves at least one "
            "resource)");
}

TEST(PlacementGroupSpecTest, StrategyNamesRoundTrip) {
  for (PlacementStrategy s : {PlacementStrategy::kPack, PlacementStrategy::kSpread,
                              PlacementStrategy::kStrictPack, PlacementStrategy::kStrictSpread}) {
    EXPECT_EQ(*ParsePlacementStrategy(PlacementStrategyName(s)), s);
  }
  EXPECT_EQ(ParsePlacementStrategy("PACKED").status().message(),
            "unknown placement strategy \"PACKED\"; expected PACK, SPREAD, STRICT_PACK or "
            "STRICT_SPREAD");
}

}  // namespace
}  // namespace tessera

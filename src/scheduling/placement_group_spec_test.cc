#include "scheduling/placement_group_spec.h"

#include "absl/strings/match.h"
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

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST(ParseBundleOptionTest, ParsesBundlesAndSelectorsInOrder) {
  auto option = ParseBundleOption("bundles", {"CPU=1,GPU=2", "CPU=1"}, {"zone=a", ""});
  ASSERT_TRUE(option.ok()) << option.status();
  ASSERT_EQ(option->bundles.size(), 2u);
  EXPECT_EQ(option->bundles[0], testing_util::Res("CPU=1,GPU=2"));
  ASSERT_EQ(option->selectors.size(), 2u);
  EXPECT_EQ(option->selectors[0].ToString(), "zone=a");
  EXPECT_TRUE(option->selectors[1].empty());
}

TEST(ParseBundleOptionTest, ErrorsNameWhatAndTheIndex) {
  EXPECT_EQ(ParseBundleOption("--bundles", {}, {}).status().message(),
            "--bundles: no bundles given");
  auto bad = ParseBundleOption("fallback 1", {"CPU=1", "GPU=x"}, {});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(bad.status().message(), "fallback 1: bundle 1: ")) << bad.status();
  auto selector = ParseBundleOption("bundles", {"CPU=1"}, {"zone=="});
  EXPECT_TRUE(absl::StartsWith(selector.status().message(), "bundles: bundle selector 0: "))
      << selector.status();
}

}  // namespace
}  // namespace tessera

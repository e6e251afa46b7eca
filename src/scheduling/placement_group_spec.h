// PlacementGroupSpec: a gang of resource bundles reserved together under one strategy (PACK,
// SPREAD, STRICT_PACK, STRICT_SPREAD: vocabulary/placement_strategy.h), each bundle with an
// optional label selector, plus an ordered list of alternative bundle shapes tried when the
// primary cannot be placed.
// Thread-safe: plain values and pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "labels/label_selector.h"
#include "resources/resource_set.h"
#include "vocabulary/placement_strategy.h"

namespace tessera {

// One shape of the group: its bundles and, optionally, one selector per bundle (empty: every
// bundle matches every node).
struct BundleOption {
  std::vector<ResourceSet> bundles;
  std::vector<LabelSelector> selectors;
  friend bool operator==(const BundleOption&, const BundleOption&) = default;
};

// One option from texts: each bundle like "CPU=1,GPU=2", and none or one selector per bundle
// like "zone=a". InvalidArgument naming `what` and the index: "--bundles: bundle 1: ...".
absl::StatusOr<BundleOption> ParseBundleOption(std::string_view what,
                                               const std::vector<std::string>& bundles,
                                               const std::vector<std::string>& selectors);

// The selector of bundle `i` of `option` (the empty selector when the option gives none).
const LabelSelector& BundleSelector(const BundleOption& option, size_t i);

struct PlacementGroupSpec {
  std::string name;  // "" = anonymous
  PlacementStrategy strategy = PlacementStrategy::kPack;
  BundleOption primary;
  std::vector<BundleOption> fallbacks;  // tried in order after the primary
  // Set: every bundle lands on nodes that share one value of this label key (one rack, one
  // NVLink domain, one zone), nodes without the label taking none; the value is chosen at
  // creation and kept while any bundle is placed.
  std::string same_label;
};

// The options in the order they are tried: option 0 is the primary, then the fallbacks.
std::vector<const BundleOption*> OptionsInOrder(const PlacementGroupSpec& spec);

// The resource name every bundle must leave alone (it names bundles in routing).
inline constexpr std::string_view kReservedBundleResource = "bundle";

// InvalidArgument, one line naming the option and bundle index and the rule, e.g.
//   bundle 2: empty or all-zero bundle (a bundle reserves at least one resource)
//   fallback 1: 3 bundle selectors for 2 bundles (give one per bundle, or none)
// Rules: at least one bundle; no empty or all-zero bundle; no `bundle` resource; negative
// amounts refused; unit-instance amounts follow the task rules (whole devices or a fraction);
// `same_label`, when set, is a valid label key.
absl::Status ValidatePlacementGroupSpec(const PlacementGroupSpec& spec);

}  // namespace tessera

#include "scheduling/placement_group_spec.h"

#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "labels/label.h"
#include "scheduling/scheduling_request.h"

namespace tessera {
namespace {

absl::Status ValidateOption(const BundleOption& option, std::string_view where) {
  const std::string prefix = where.empty() ? "" : absl::StrCat(ToAbsl(where), ": ");
  if (option.bundles.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "no bundles (a placement group reserves at least one bundle)"));
  }
  if (!option.selectors.empty() && option.selectors.size() != option.bundles.size()) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, option.selectors.size(),
                                                   " bundle selectors for ", option.bundles.size(),
                                                   " bundles (give one per bundle, or none)"));
  }
  for (size_t i = 0; i < option.bundles.size(); ++i) {
    const ResourceSet& bundle = option.bundles[i];
    // ResourceSet drops zero amounts, so an all-zero bundle arrives empty.
    if (bundle.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "bundle ", i,
                       ": empty or all-zero bundle (a bundle reserves at least one resource)"));
    }
    for (const auto& [name, quantity] : bundle) {
      if (name == kReservedBundleResource) {
        return absl::InvalidArgumentError(
            absl::StrCat(prefix, "bundle ", i, ": the resource name \"bundle\" is reserved"));
      }
      if (quantity.IsNegative()) {
        return absl::InvalidArgumentError(absl::StrCat(prefix, "bundle ", i, ": ", name, "=",
                                                       quantity.ToString(), " is negative"));
      }
    }
    SchedulingRequest as_request;
    as_request.resources = bundle;
    if (absl::Status s = ValidateSchedulingRequest(as_request); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, "bundle ", i, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

const LabelSelector& BundleSelector(const BundleOption& option, size_t i) {
  static const LabelSelector kAny;
  return i < option.selectors.size() ? option.selectors[i] : kAny;
}

std::vector<const BundleOption*> OptionsInOrder(const PlacementGroupSpec& spec) {
  std::vector<const BundleOption*> options = {&spec.primary};
  for (const BundleOption& f : spec.fallbacks) options.push_back(&f);
  return options;
}

absl::StatusOr<BundleOption> ParseBundleOption(std::string_view what,
                                               const std::vector<std::string>& bundles,
                                               const std::vector<std::string>& selectors) {
  BundleOption option;
  if (bundles.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(ToAbsl(what), ": no bundles given"));
  }
  for (size_t i = 0; i < bundles.size(); ++i) {
    auto set = ParseResourceSet(bundles[i]);
    if (!set.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(ToAbsl(what), ": bundle ", i, ": ", set.status().message()));
    }
    option.bundles.push_back(*std::move(set));
  }
  for (size_t i = 0; i < selectors.size(); ++i) {
    auto selector = ParseLabelSelector(selectors[i]);
    if (!selector.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(ToAbsl(what), ": bundle selector ", i, ": ", selector.status().message()));
    }
    option.selectors.push_back(*std::move(selector));
  }
  return option;
}

absl::Status ValidatePlacementGroupSpec(const PlacementGroupSpec& spec) {
  if (absl::Status s = ValidateOption(spec.primary, ""); !s.ok()) return s;
  for (size_t i = 0; i < spec.fallbacks.size(); ++i) {
    if (absl::Status s = ValidateOption(spec.fallbacks[i], absl::StrCat("fallback ", i + 1));
        !s.ok()) {
      return s;
    }
  }
  if (!spec.same_label.empty()) {
    if (absl::Status s = ValidateLabelKey(spec.same_label); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("same_label: ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera

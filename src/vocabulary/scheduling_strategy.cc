#include "vocabulary/scheduling_strategy.h"

#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "labels/label.h"

namespace tessera {
namespace {

template <typename... Visitors>
struct Overloaded : Visitors... {
  using Visitors::operator()...;
};
// Spelled out: clang 14 does not deduce an aggregate's template arguments by itself.
template <typename... Visitors>
Overloaded(Visitors...) -> Overloaded<Visitors...>;

}  // namespace

absl::Status ValidateSchedulingStrategy(const SchedulingStrategy& strategy) {
  return std::visit(
      Overloaded{
          [](const DefaultScheduling&) { return absl::OkStatus(); },
          [](const SpreadScheduling&) { return absl::OkStatus(); },
          [](const NodeAffinityScheduling& affinity) {
            if (absl::Status valid = ValidateLabelValue(affinity.node.value());
                !valid.ok() || affinity.node.value().empty()) {
              return absl::InvalidArgumentError(
                  absl::StrCat("node affinity ", Quote(affinity.node.value()),
                               ": not a node id: ", valid.ok() ? "empty" : valid.message()));
            }
            return absl::OkStatus();
          },
          [](const PlacementGroupScheduling& group) {
            if (group.placement_group.value().empty()) {
              return absl::InvalidArgumentError("placement group strategy: the group has no name");
            }
            if (group.bundle_index < -1) {
              return absl::InvalidArgumentError(absl::StrCat(
                  "placement group ", Quote(group.placement_group.value()), ": bundle index ",
                  group.bundle_index, " is below -1 (-1: any bundle)"));
            }
            return absl::OkStatus();
          },
      },
      strategy);
}

std::string DescribeSchedulingStrategy(const SchedulingStrategy& strategy) {
  return std::visit(Overloaded{
                        [](const DefaultScheduling&) -> std::string { return "DEFAULT"; },
                        [](const SpreadScheduling&) -> std::string { return "SPREAD"; },
                        [](const NodeAffinityScheduling& affinity) {
                          return absl::StrCat("node affinity ", affinity.node.value(),
                                              affinity.soft ? " (soft)" : "");
                        },
                        [](const PlacementGroupScheduling& group) {
                          return group.bundle_index < 0
                                     ? absl::StrCat("placement group ",
                                                    group.placement_group.value(), " any bundle")
                                     : absl::StrCat("placement group ",
                                                    group.placement_group.value(), " bundle ",
                                                    group.bundle_index);
                        },
                    },
                    strategy);
}

}  // namespace tessera

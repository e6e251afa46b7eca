// The chained setters tasks (TaskCaller) and actors (ActorCreator) share: what they hold and
// where they may run, as the vocabulary's types (vocabulary/task_options.h).
//
//   tessera::Task(Add).Resources({{"CPU", 1}, {"GPU", 0.5}}).Spread().Remote(1, 2);
//   tessera::Actor(Make).Resources(tpu4).PlacementGroup(slice->name, 0).Remote();
//   tessera::Task(Step).PlacementGroup(tessera::PlacementGroupName("train"), 1).Remote();
//
// Threading: a value; not thread-safe.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "vocabulary/ids.h"
#include "vocabulary/task_options.h"

namespace tessera::internal {

template <typename Self, typename OptionsType>
class DemandSetters {
 public:
  Self& Resources(ResourceSet resources) {
    options_.resources = std::move(resources);
    return self();
  }
  // Amounts by name, as Ray's C++ SetResources takes them: {{"CPU", 1}, {"GPU", 0.5}} (bytes for
  // "memory"). An invalid name or amount fails Remote with its one-line error.
  Self& Resources(const std::map<std::string, double>& amounts) {
    auto resources = ResourceSet::FromAmounts(amounts);
    if (resources.ok()) {
      options_.resources = *std::move(resources);
    } else {
      invalid_ = resources.status();
    }
    return self();
  }
  // The first call sets the selector, each further call adds a fallback.
  Self& LabelSelector(::tessera::LabelSelector selector) {
    options_.label_selectors.push_back(std::move(selector));
    return self();
  }
  // Inside this placement group's bundle; -1 any bundle.
  Self& PlacementGroup(PlacementGroupName group, int bundle_index = -1,
                       bool capture_child_tasks = false) {
    options_.strategy =
        PlacementGroupScheduling{std::move(group), bundle_index, capture_child_tasks};
    return self();
  }
  // Inside this reserved slice's bundle (bundle i: host i of the reservation; -1 any): a slice
  // group's bundles are those of the placement group of its name.
  Self& PlacementGroup(const SliceGroupName& slice, int bundle_index = -1,
                       bool capture_child_tasks = false) {
    return PlacementGroup(PlacementGroupName(slice.value()), bundle_index, capture_child_tasks);
  }
  // Hard (soft false): only on `node`; soft: prefer it, else anywhere.
  Self& NodeAffinity(NodeId node, bool soft = false) {
    options_.strategy = NodeAffinityScheduling{std::move(node), soft};
    return self();
  }
  // Ray's "SPREAD": each new worker on the least used node that fits.
  Self& Spread() {
    options_.strategy = SpreadScheduling{};
    return self();
  }
  Self& Strategy(SchedulingStrategy strategy) {
    options_.strategy = std::move(strategy);
    return self();
  }
  Self& Options(OptionsType options) {
    options_ = std::move(options);
    return self();
  }

 protected:
  OptionsType options_;
  // What Remote fails with, when a setter was given something invalid.
  absl::Status invalid_;

 private:
  Self& self() { return static_cast<Self&>(*this); }
};

}  // namespace tessera::internal

// SchedulingStrategy: where a task's or an actor's worker may run (Ray's scheduling_strategy),
// one of four kinds, each with exactly the fields it needs.
//
//   DefaultScheduling          pack: the first node that fits (the submitter's own first)
//   SpreadScheduling           Ray's "SPREAD": each new worker on the least used node that fits
//   NodeAffinityScheduling     Ray's NodeAffinitySchedulingStrategy: on that node only (hard),
//                              or there when it fits now, else anywhere (soft)
//   PlacementGroupScheduling   Ray's PlacementGroupSchedulingStrategy: inside a placement
//                              group's (or reserved slice's) bundle
//
// Label selectors and their fallbacks (TaskOptions::label_selectors) narrow the nodes of any of
// them. Values; not thread-safe.
#pragma once

#include <string>
#include <variant>

#include "absl/status/status.h"
#include "vocabulary/ids.h"

namespace tessera {

struct DefaultScheduling {
  friend auto operator<=>(const DefaultScheduling&, const DefaultScheduling&) = default;
};

struct SpreadScheduling {
  friend auto operator<=>(const SpreadScheduling&, const SpreadScheduling&) = default;
};

struct NodeAffinityScheduling {
  NodeId node;  // as `tessera list nodes` shows it
  bool soft = false;
  friend auto operator<=>(const NodeAffinityScheduling&, const NodeAffinityScheduling&) = default;
};

struct PlacementGroupScheduling {
  // A reserved slice's bundles are a placement group's of its name.
  PlacementGroupName placement_group;
  int bundle_index = -1;  // -1: any bundle of the group
  // Ray's placement_group_capture_child_tasks: what the task (or the actor's methods) submits
  // goes into the same group by default.
  bool capture_child_tasks = false;
  friend auto operator<=>(const PlacementGroupScheduling&,
                          const PlacementGroupScheduling&) = default;
};

using SchedulingStrategy = std::variant<DefaultScheduling, SpreadScheduling, NodeAffinityScheduling,
                                        PlacementGroupScheduling>;

// OK, or InvalidArgument in one line naming the field: a node id that cannot be one (not a
// label value), an empty placement group name, a bundle index below -1.
absl::Status ValidateSchedulingStrategy(const SchedulingStrategy& strategy);

// "DEFAULT", "SPREAD", "node affinity cpu2" ("... (soft)"), "placement group g bundle 1" ("...
// any bundle"): for messages.
std::string DescribeSchedulingStrategy(const SchedulingStrategy& strategy);

}  // namespace tessera

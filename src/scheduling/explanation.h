// Why a request cannot be placed: one short line aggregated over the nodes considered, naming the
// selector, the resource and the counts, e.g.
//   no node has tessera.io/accelerator-type in (TPU-V6E)
//   no node has 16 GPU (largest: 8)
//   2 nodes match the selector; none has GPU >= 9
//   3 nodes could fit GPU=4; all are busy (available GPU: 2, 1, 0; held by task a, lease l-1)
// and who holds what blocks it: up to five holders by name, more as a count by kind
// ("held by 12 tasks, 2 placement groups, other work"). Tasks, placement groups and slice
// groups all explain themselves with these functions.
// Thread-safe: pure functions of their inputs.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "labels/label_selector.h"
#include "resources/resource_set.h"
#include "scheduling/cluster_view.h"

namespace tessera {

struct Diagnosis {
  bool feasible = false;  // some considered node could fit the request (it is only busy)
  std::string text;
};

// `nodes`: the schedulable (alive) nodes to consider, ascending. Assumes none fits now.
Diagnosis Diagnose(const ClusterView& cluster, const LabelSelector& selector,
                   const ResourceSet& demand, std::span<const NodeIndex> nodes);

// The holders of the allocations on `nodes` that take any of `resources` (every allocation when
// `resources` is empty), distinct and sorted.
std::vector<Holder> HoldersOn(const ClusterView& cluster, std::span<const NodeIndex> nodes,
                              std::span<const std::string> resources = {});

// "task a, placement group g, other work" (up to five holders, by name); more as a count by
// kind: "12 tasks, 2 placement groups, other work". "nothing" when there are none.
std::string DescribeHolders(std::span<const Holder> holders);

}  // namespace tessera

// Why a request cannot be placed: one short line aggregated over the nodes considered, naming the
// selector, the resource and the counts, e.g.
//   no node has tessera.io/accelerator-type in (TPU-V6E)
//   no node has 16 GPU (largest: 8)
//   2 nodes match the selector; none has GPU >= 9
//   3 nodes could fit GPU=4; all are busy (available GPU: 2, 1, 0)
// Thread-safe: pure functions of their inputs.
#pragma once

#include <span>
#include <string>

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

}  // namespace tessera

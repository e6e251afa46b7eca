// BundleSearch: finds nodes for the bundles of a placement group on a ClusterView when a single
// greedy pass cannot — a bounded search that finds an assignment whenever one exists for groups
// of up to kCompleteSearchBundles bundles, and proves, for the explanations, when none can exist
// even on an idle cluster.
//
//   STRICT_SPREAD   a bipartite matching of bundles to distinct nodes (augmenting paths).
//   PACK, SPREAD    backtracking over nodes, most-constrained bundle first (fewest candidate
//                   nodes, then scarcest demand), after a bound (the bundles' summed demand
//                   within what their candidates have free in all); forward checking (a bundle
//                   whose every candidate is full ends the branch), identical bundles tried in
//                   one order only; PACK tries the group's nodes first, SPREAD the others first.
//   STRICT_PACK     every node that matches all selectors, the bundles allocated together on it
//                   whole devices first (device by device, so GPU=1 and GPU=0.5 share a 2-GPU
//                   node).
//
// Why a bounded candidate list is enough: each bundle considers only the first n nodes that fit
// it alone (n = bundles to place). In any assignment the other n-1 bundles use at most n-1 nodes,
// so a bundle sitting elsewhere can always move to one of its n candidates the assignment leaves
// free; an assignment exists iff one exists over the candidates.
//
// Cost: candidates cost what the greedy pass costs per bundle (a walk of the utilization order
// that stops after n fits); the backtracking tries at most kMaxSearchSteps allocations (every
// assignment of a group of up to kCompleteSearchBundles bundles fits in that), then gives up.
// Not thread-safe: it changes the view it is given (Allocate, Release), like its callers.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "scheduling/cluster_view.h"
#include "scheduling/placement_group_spec.h"

namespace tessera {

inline constexpr int kCompleteSearchBundles = 6;
inline constexpr int64_t kMaxSearchSteps = 100'000;

// Bundle indices of `todo`, scarcest first: larger accelerator demand, then custom resources,
// then memory, then CPU; ties keep the caller's order.
std::vector<int> ScarcestFirst(const BundleOption& option, const std::vector<int>& todo);

// Up to `limit` nodes for which `accept` holds, in the pack order (utilization, index), among
// the alive nodes that carry every resource of `demand` (through the label index when the
// selector's candidates are few). `accept` must check the selector itself.
std::vector<NodeIndex> FirstAcceptedNodes(const ClusterView& cluster, const LabelSelector& selector,
                                          const ResourceSet& demand, size_t limit,
                                          absl::FunctionRef<bool(NodeIndex)> accept);

struct BundleSearchRequest {
  const BundleOption* option = nullptr;
  PlacementStrategy strategy = PlacementStrategy::kPack;
  std::vector<int> todo;     // bundle indices to place
  std::set<NodeIndex> used;  // nodes holding the group's other bundles (re-placement)
  int64_t max_steps = kMaxSearchSteps;
};

enum class SearchOutcome {
  kFound,   // every bundle of `todo` is allocated on the view
  kNone,    // no assignment exists on the view as it is now
  kGaveUp,  // the step budget ran out first (nothing is held)
};

struct BundleSearchResult {
  SearchOutcome outcome = SearchOutcome::kNone;
  std::vector<std::pair<int, Allocation>> taken;  // kFound: (bundle, allocation) per bundle
  int failed_bundle = -1;  // kNone: a bundle no node can take now, when that is why; else -1
  int64_t steps = 0;       // allocations tried
};

// Places the bundles of request.todo on the view as it is now, or takes nothing.
BundleSearchResult SearchBundles(ClusterView& cluster, const BundleSearchRequest& request);

// Whether the bundles could ever be placed together: the same search on an idle copy of the
// nodes that could hold them (the group's held bundles on `used` are not counted). For the
// explanation of a group that cannot be placed; `why` gets one line when the answer is no.
struct IdleFeasibility {
  SearchOutcome outcome = SearchOutcome::kNone;  // kFound: feasible; kGaveUp: unknown
  std::string why;  // kNone: e.g. "bundles 0 (CPU=2 with selector zone=a), 1 (...) can only go
                    // on n0, which cannot hold them together"
};
IdleFeasibility CheckIdleFeasibility(const ClusterView& cluster,
                                     const BundleSearchRequest& request);

// "GPU=1 with selector zone=a", or "GPU=1" for a bundle without a selector.
std::string DescribeBundle(const BundleOption& option, int bundle);

}  // namespace tessera

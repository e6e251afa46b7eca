// A request to place one task or actor: what it needs, where it may run (label selector with
// ordered fallbacks, node affinity), and how to choose among the nodes that fit (strategy).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/strong_id.h"
#include "labels/fallback.h"
#include "resources/resource_set.h"
#include "scheduling/holder.h"

namespace tessera {

using RequestId = StrongId<struct RequestIdTag, int64_t>;

// How the task scheduler ranks the nodes that fit a request (the vocabulary's SchedulingStrategy
// of a task becomes one of these and the request's affinity).
enum class NodeRanking {
  // Prefer the local node when it fits now; else pack onto the most utilized node below the
  // utilization threshold; else spread onto the least utilized node.
  kDefault,
  // The least utilized node; ties go round-robin in node order.
  kSpread,
};

enum class AffinityKind {
  kHard,  // only this node; infeasible when it is missing, dead or draining
  kSoft,  // this node when it fits now, else the strategy decides
};

struct NodeAffinity {
  NodeId node;
  AffinityKind kind = AffinityKind::kHard;
};

// A request served from a placement group's reservation instead of the free nodes.
struct BundleTarget {
  std::string group;  // the group's name (the simulator) or id (the runtime)
  // Which bundle: 0..n-1, or -1 for the first bundle (in index order) that can hold the whole
  // demand now. A demand never spans bundles.
  int bundle = -1;
  friend bool operator==(const BundleTarget&, const BundleTarget&) = default;
};

// Not thread-safe; copyable value.
struct SchedulingRequest {
  RequestId id;
  // How other requests' explanations name it once placed ("held by task t1"); an unknown kind
  // names it as a task by its id.
  Holder holder;
  // Unit-instance resources (GPU, TPU, ...): a whole number takes that many fully free devices of
  // one node; 0 < q < 1 best-fits onto one device; anything else is refused.
  ResourceSet resources;
  // Option 0 is the primary selector, then the fallbacks in order; the first option with a node
  // that fits now wins. Empty: every node matches.
  FallbackList selectors;
  std::optional<NodeAffinity> affinity;
  std::optional<NodeId> local_node;  // where the submitter runs (kDefault prefers it)
  NodeRanking strategy = NodeRanking::kDefault;
  // Nodes that must not take it this time (already tried by a spillback chain); the explanation
  // counts them apart. Meant to be short.
  std::vector<NodeId> excluded_nodes;
  // Set: the request runs inside this placement group bundle (BundleLedger serves it); the
  // selectors, affinity and strategy do not apply, the bundle's node is fixed.
  std::optional<BundleTarget> bundle_target;
};

// InvalidArgument, one line naming the resource and rule: bad resource names, and for a
// unit-instance resource a non-integer above 1 or what its family's ValidateQuantity refuses; a
// bundle target with an empty group or an index below -1.
absl::Status ValidateSchedulingRequest(const SchedulingRequest& request);

}  // namespace tessera

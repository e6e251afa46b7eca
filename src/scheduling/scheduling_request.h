// A request to place one task or actor: what it needs, where it may run (label selector with
// ordered fallbacks, node affinity), and how to choose among the nodes that fit (strategy).
#pragma once

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "base/strong_id.h"
#include "labels/fallback.h"
#include "resources/resource_set.h"

namespace tessera {

using RequestId = StrongId<struct RequestIdTag, int64_t>;

enum class SchedulingStrategy {
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

// Not thread-safe; copyable value.
struct SchedulingRequest {
  RequestId id;
  // Unit-instance resources (GPU, TPU, ...): a whole number takes that many fully free devices of
  // one node; 0 < q < 1 best-fits onto one device; anything else is refused.
  ResourceSet resources;
  // Option 0 is the primary selector, then the fallbacks in order; the first option with a node
  // that fits now wins. Empty: every node matches.
  FallbackList selectors;
  std::optional<NodeAffinity> affinity;
  std::optional<NodeId> local_node;  // where the submitter runs (kDefault prefers it)
  SchedulingStrategy strategy = SchedulingStrategy::kDefault;
  // Extension point: placement-group targets (a bundle, or any bundle of a group) are added here
  // by the placement-group piece; until then a request always targets plain nodes.
};

// InvalidArgument, one line naming the resource and rule: bad resource names, and for a
// unit-instance resource a non-integer above 1 or what its family's ValidateQuantity refuses.
absl::Status ValidateSchedulingRequest(const SchedulingRequest& request);

}  // namespace tessera

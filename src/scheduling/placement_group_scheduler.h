// PlacementGroupScheduler: reserves every bundle of a placement group on the nodes of a
// ClusterView, all or nothing, with the strategy rules of PACK / SPREAD / STRICT_PACK /
// STRICT_SPREAD, trying the primary bundle shape and then each fallback in order. A group that
// loses bundles with a failed node has ONLY those bundles re-placed (STRICT_PACK excepted: the
// whole group moves to one node); one that cannot be re-placed stays RESCHEDULING, explained, and
// is retried by OnClusterChanged.
//
// Cost: per bundle, a scan of the anchored utilization order that stops at the first node that
// fits (O(log n) on a cluster with room); explanations (the failure path) scan the alive nodes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "scheduling/cluster_view.h"
#include "scheduling/explanation.h"
#include "scheduling/placement_group_spec.h"
#include "scheduling/task_scheduler.h"

namespace tessera {

using PlacementGroupId = StrongId<struct PlacementGroupIdTag, int64_t>;

enum class PlacementGroupState { kCreated, kRescheduling };
std::string_view PlacementGroupStateName(PlacementGroupState state);

// Where one bundle is reserved: its node and the Allocation (with the device instance ids).
struct BundlePlacement {
  NodeId node;
  Allocation allocation;
  friend bool operator==(const BundlePlacement&, const BundlePlacement&) = default;
};

struct PlacementGroupResult {
  ScheduleStatus status = ScheduleStatus::kPlaced;
  std::optional<PlacementGroupId> id;    // set when kPlaced
  size_t option = 0;                     // 0 primary, then fallbacks in order (when kPlaced)
  std::vector<BundlePlacement> bundles;  // by bundle index of the chosen option (when kPlaced)
  std::string explanation;               // one line, otherwise; nothing is held then
};

struct PlacementGroup {
  PlacementGroupId id;
  PlacementGroupSpec spec;
  size_t option = 0;
  PlacementGroupState state = PlacementGroupState::kCreated;
  // By bundle index of the chosen option; nullopt while a lost bundle waits for a node.
  std::vector<std::optional<BundlePlacement>> bundles;
  std::string explanation;  // why it is still RESCHEDULING
};

// What a re-placement attempt did to one group.
struct RescheduleReport {
  PlacementGroupId id;
  std::string name;
  std::vector<int> bundles;  // the bundle indices it (re)placed, or that are still unplaced
  bool placed = false;
  std::string explanation;  // when not placed
};

// Not thread-safe: one owner calls it; it changes the cluster view (which must outlive it) only
// through Allocate and Release.
class PlacementGroupScheduler {
 public:
  explicit PlacementGroupScheduler(ClusterView* cluster) : cluster_(cluster) {}

  // InvalidArgument for a spec ValidatePlacementGroupSpec refuses; AlreadyExists for a name in
  // use. Otherwise every bundle is reserved (kPlaced) or nothing is (kPending / kInfeasible, with
  // an explanation); a group that is not placed is not kept (the caller retries).
  absl::StatusOr<PlacementGroupResult> Create(const PlacementGroupSpec& spec);

  // Releases every reserved bundle and forgets the group; returns exactly what was released.
  absl::StatusOr<std::vector<Allocation>> Remove(PlacementGroupId id);

  // `lost`: the allocations ClusterView::FailNode (or RemoveNode) returned for the node. Clears
  // the lost bundles of the affected groups and re-places them (ascending group ids).
  std::vector<RescheduleReport> OnNodeFailed(const NodeId& node, std::span<const Allocation> lost);

  // Retries the RESCHEDULING groups (ascending ids).
  std::vector<RescheduleReport> OnClusterChanged();

  const PlacementGroup* Find(PlacementGroupId id) const;
  std::optional<PlacementGroupId> FindByName(std::string_view name) const;
  const std::map<int64_t, PlacementGroup>& groups() const { return groups_; }

 private:
  struct Attempt {
    bool placed = false;
    std::vector<std::pair<int, Allocation>> taken;  // (bundle index, allocation) in order taken
    int failed_bundle = -1;
  };
  // Places `todo` bundles of `option`; `used` are nodes already holding the group's bundles.
  // All or nothing: on failure every allocation of this attempt is released.
  Attempt Place(const BundleOption& option, PlacementStrategy strategy,
                const std::vector<int>& todo, const std::set<NodeIndex>& used);
  std::optional<NodeIndex> FirstNode(const LabelSelector& selector, const ResourceSet& demand,
                                     const std::set<NodeIndex>& excluded,
                                     const std::vector<const LabelSelector*>& also_match) const;
  bool Usable(NodeIndex node, const LabelSelector& selector, const ResourceSet& demand) const;
  // Why `option` could not be placed; feasible = some node change is not needed.
  Diagnosis Explain(const BundleOption& option, PlacementStrategy strategy,
                    const std::vector<int>& todo, const std::set<NodeIndex>& used,
                    int failed_bundle) const;
  RescheduleReport Replace(PlacementGroup& group);
  void Own(PlacementGroup& group, int bundle, const Allocation& allocation);

  ClusterView* cluster_;
  std::map<int64_t, PlacementGroup> groups_;
  std::map<std::string, int64_t, std::less<>> by_name_;
  // allocation id -> (group id, bundle index)
  absl::flat_hash_map<int64_t, std::pair<int64_t, int>> owners_;
  int64_t next_id_ = 1;
};

}  // namespace tessera

// PlacementGroupScheduler: reserves every bundle of a placement group on the nodes of a
// ClusterView, all or nothing, with the strategy rules of PACK / SPREAD / STRICT_PACK /
// STRICT_SPREAD, trying the primary bundle shape and then each fallback in order. A group that
// loses bundles with a failed node has ONLY those bundles re-placed (STRICT_PACK excepted: the
// whole group moves to one node); one that cannot be re-placed stays RESCHEDULING, explained, and
// is retried by OnClusterChanged. Restore re-creates a group that existed before (a restarted
// head) with exactly the placement it had, bundle by bundle, never placing anything anew.
//
// Bundles are placed by a greedy pass and, when it fails, by a bounded search
// (scheduling/bundle_search.h) that finds an assignment whenever one exists for groups of up to
// kCompleteSearchBundles bundles (larger ones: within kMaxSearchSteps tries). A group that is not
// placed is INFEASIBLE when no assignment exists even on an idle cluster, else PENDING.
//
// A group with spec.same_label is placed inside one value of that label at a time (reference
// scheduling.md §7): values whose nodes could hold the bundles' summed demand now are tried,
// fewest nodes first; the value taken is kept while any bundle stays placed, so re-placement
// stays inside it, and a group that lost every bundle may take another.
//
// Cost: per bundle, a scan of the anchored utilization order that stops at the first node that
// fits (O(log n) on a cluster with room); the search and the explanations (the failure path)
// scan further.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "scheduling/bundle_search.h"
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

// One bundle of a placement group being restored (a head restarted from its state store): where
// it was held, exactly, or no node when it was waiting for one.
struct RestoredBundle {
  std::optional<NodeId> node;        // nullopt: it had no node (its group was RESCHEDULING)
  ResourceSet resources;             // what its allocation took: the bundle's demand
  std::vector<DeviceGrant> devices;  // the device instances it held, exactly
};

// A bundle given with a node that Restore could not take back, and why.
struct UnrestoredBundle {
  int bundle = 0;
  std::string
      reason;  // one line: "node n9 is not in the cluster", "node n0: GPU 3 has 0 free, ..."
  friend bool operator==(const UnrestoredBundle&, const UnrestoredBundle&) = default;
};

struct PlacementGroupRestoreResult {
  PlacementGroupId id;  // fresh: this scheduler's own (the caller maps its ids, e.g. "pg-7", to it)
  size_t option = 0;
  // kCreated when every bundle is held again; kRescheduling otherwise (OnClusterChanged places
  // the rest).
  PlacementGroupState state = PlacementGroupState::kCreated;
  // By bundle index: the placement now held (this view's allocation ids), nullopt when not held.
  std::vector<std::optional<BundlePlacement>> bundles;
  std::vector<UnrestoredBundle> refused;  // ascending bundle index
  std::string explanation;  // "bundle 1: <reason>; bundle 3: <reason>" ("" when none refused)
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

  // Re-creates a group that existed before (a head restarted from its state store) with the
  // placement it had, so the work running in its bundles continues untouched. `option` is the
  // option that was chosen (0 primary, then the fallbacks); `bundles` has one entry per bundle of
  // that option. Each bundle given with a node is taken back with exactly its device instances
  // (ClusterView::RestoreExact: a draining node is accepted); selectors and the strategy are not
  // re-checked (the placement was theirs when it was made, and moving running work would be
  // worse). A bundle that cannot be taken back is left unplaced and listed in `refused` with the
  // reason; nothing is refused as a whole for it:
  //   - its node is not in the view (never came back after the restart) or is dead;
  //   - its resources are not the bundle's demand in that option;
  //   - the view cannot give the allocation (instances held by something else — another group,
  //     a lease, an earlier bundle of this group —, more than the node has, grants that do not
  //     match the demand).
  // A group with any bundle unplaced is RESCHEDULING; Restore never places anything anew (that
  // could take what a group restored after it holds): restore every group first, then call
  // OnClusterChanged, which places the unplaced bundles by the usual rules (STRICT_PACK moves
  // the whole group). A group with no bundle held is still kept, with its option.
  // Errors, with nothing changed: InvalidArgument for a spec ValidatePlacementGroupSpec refuses,
  // an option the spec does not have, or a bundle count other than the option's; AlreadyExists
  // for a name in use. The group gets a fresh PlacementGroupId.
  absl::StatusOr<PlacementGroupRestoreResult> Restore(const PlacementGroupSpec& spec, size_t option,
                                                      std::span<const RestoredBundle> bundles);

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
    bool gave_up = false;  // the search ran out of steps (it may have missed an assignment)
  };
  // Places `todo` bundles of `option`; `used` are nodes already holding the group's bundles.
  // All or nothing: on failure every allocation of this attempt is released. The greedy pass
  // first (each bundle, scarcest first, on the first node that fits it), then, when it fails,
  // the search of scheduling/bundle_search.h.
  Attempt Place(const BundleOption& option, PlacementStrategy strategy,
                const std::vector<int>& todo, const std::set<NodeIndex>& used);
  Attempt Greedy(const BundleOption& option, PlacementStrategy strategy,
                 const std::vector<int>& todo, const std::set<NodeIndex>& used);
  std::optional<NodeIndex> FirstNode(const LabelSelector& selector, const ResourceSet& demand,
                                     const std::set<NodeIndex>& excluded,
                                     const std::vector<const LabelSelector*>& also_match) const;
  bool Usable(NodeIndex node, const LabelSelector& selector, const ResourceSet& demand) const;
  // Why `option` could not be placed; feasible = some node change is not needed.
  Diagnosis Explain(const BundleOption& option, PlacementStrategy strategy,
                    const std::vector<int>& todo, const std::set<NodeIndex>& used,
                    const Attempt& attempt) const;
  // Explain for STRICT_PACK: whether any alive node matches every bundle's selector and could
  // hold their sum, and how many could.
  Diagnosis ExplainStrictPack(const BundleOption& option, const std::vector<NodeIndex>& alive,
                              const BundleSearchRequest& request) const;
  // Place() for a group's option, honouring spec.same_label: the option confined to one value
  // of the key at a time (only `pinned` when set), skipping values whose nodes cannot hold the
  // bundles' summed demand now.
  Attempt PlaceGroup(const PlacementGroupSpec& spec, const BundleOption& option,
                     const std::vector<int>& todo, const std::set<NodeIndex>& used,
                     const std::optional<std::string>& pinned);
  // Why PlaceGroup did not place it (Explain, per value for a confined group).
  Diagnosis ExplainGroup(const PlacementGroupSpec& spec, const BundleOption& option,
                         const std::vector<int>& todo, const std::set<NodeIndex>& used,
                         const std::optional<std::string>& pinned, const Attempt& attempt) const;
  // The alive nodes of each value of spec.same_label (only `pinned` when set), fewest nodes
  // first, ties by value.
  std::vector<std::pair<std::string, std::vector<NodeIndex>>> LabelValues(
      const PlacementGroupSpec& spec, const std::optional<std::string>& pinned) const;
  // The same_label value the group's placed bundles share (nullopt when none is placed or the
  // group is not confined).
  std::optional<std::string> PinnedValue(const PlacementGroup& group) const;
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

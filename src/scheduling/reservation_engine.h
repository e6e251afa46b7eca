// ReservationEngine: a cluster's reservations — placement groups and slice groups, by name — and
// every decision about them: placing a new one; keeping one that cannot be placed waiting
// (PENDING or INFEASIBLE, explained) and trying it again after a change; re-placing the bundles
// a dead node took from a placement group; breaking a slice group that lost a host, and
// reserving it anew once its hosts are back; giving back a placement the cluster could not hold;
// taking back a previous head's reservations; and where a request inside a reservation may go.
//
// The head drives it under its cluster lock and adds what only a running cluster has (the
// agents' two-phase commit, the state store, events); `tessera schedule` drives it from a
// requests file (scheduling/simulation.h). Both make every decision here, so the simulator and
// the cluster cannot decide differently.
//
// Pure: no I/O, no threads, no clock; deterministic (ordered containers). Not thread-safe: one
// owner calls it. It changes the cluster view (which must outlive it) only through its
// schedulers. Cost: a create is its scheduler's; a retry pass is one scheduler call per waiting
// reservation (and per placement group missing bundles).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "resources/resource_set.h"
#include "scheduling/cluster_view.h"
#include "scheduling/domain_group_scheduler.h"
#include "scheduling/placement_group_scheduler.h"

namespace tessera {

enum class ReservationKind { kPlacementGroup, kSliceGroup };
// "placement group" / "slice group", as events and explanations name them.
std::string_view ReservationNoun(ReservationKind kind);

enum class ReservationStatus {
  kPending,     // waits for room (something holds what it needs)
  kInfeasible,  // waits for the cluster to gain a node that could hold it
  kPlaced,      // every bundle has its node
  kReplacing,   // a placement group missing bundles lost with a node; re-placed when it can be
  kBroken,      // a slice group that lost a host; reserved anew once its hosts are all back
};
std::string_view ReservationStatusName(ReservationStatus status);

// One reservation as the engine keeps it. Read-only for callers.
struct ReservationRecord {
  ReservationKind kind = ReservationKind::kPlacementGroup;
  std::string name;
  ReservationStatus status = ReservationStatus::kPending;
  // Why it is not kPlaced (one line); "" when placed.
  std::string explanation;
  // The placement group option (0 primary, then the fallbacks) or slice alternative taken;
  // meaningful while the scheduler holds it.
  size_t choice = 0;

  // A placement group: its spec, and its scheduler id while the scheduler holds it.
  PlacementGroupSpec spec;
  std::optional<PlacementGroupId> group;
  // A slice group: its request, and while held its scheduler id and the slices or NVLink
  // domains taken, in order (its bundles: ReservationEngine::SliceHosts).
  DomainGroupRequest slices;
  std::optional<DomainGroupId> slice_group;
  std::vector<std::string> domains;

  bool held() const { return group.has_value() || slice_group.has_value(); }
  bool waiting() const {
    return status == ReservationStatus::kPending || status == ReservationStatus::kInfeasible;
  }
};

// What one decision did to one reservation.
struct ReservationOutcome {
  ReservationKind kind = ReservationKind::kPlacementGroup;
  std::string name;
  ReservationStatus status = ReservationStatus::kPending;  // after the decision
  std::string explanation;                                 // the record's, after it
  // The bundle indices it concerns: re-placed, or still waiting for a node (kReplacing); not
  // held after a restore (kReplacing, kBroken).
  std::vector<int> bundles;
  // A decision about a placement group's lost bundles (re-placed or not), not about a
  // reservation that was waiting.
  bool replacement = false;
};

// Where a request inside a reservation may go (reference scheduling.md §4.6), before the
// holder of the bundles (a node agent's BundleLedger) serves it.
struct BundleTargetCheck {
  // kPlaced: `candidates` are the targeted bundles that have a node now, by index; a ledger
  // serves the request from one of them (or finds them short: then `replacing` says whether a
  // targeted bundle that could hold it is waiting to be re-placed). Otherwise no bundle can
  // serve it now (kPending) or ever (kInfeasible), as `explanation` says.
  ScheduleStatus status = ScheduleStatus::kPlaced;
  std::string explanation;
  std::vector<std::pair<int, NodeId>> candidates;
  std::string replacing;  // "bundle 1 of g is waiting to be re-placed (...)" or ""
};

class ReservationEngine {
 public:
  explicit ReservationEngine(ClusterView* cluster) : groups_(cluster), slices_(cluster) {}

  // Every placement decision (a create, a retry) runs as `wrap(kind, decide)`; the head times
  // them. By default a decision just runs.
  using DecisionWrapper = std::function<void(ReservationKind, absl::FunctionRef<void()>)>;
  void set_decision_wrapper(DecisionWrapper wrap) { wrap_ = std::move(wrap); }

  // Adds placement group `spec.name` and tries to place it now. InvalidArgument for an empty
  // name or a spec the scheduler refuses, AlreadyExists for a name either kind uses: nothing is
  // kept then. Otherwise it is kPlaced, or kept waiting (kPending / kInfeasible, explained).
  absl::StatusOr<ReservationOutcome> CreatePlacementGroup(PlacementGroupSpec spec);
  // The same for slice group `request.name` (DomainGroupScheduler::ReserveSlices).
  absl::StatusOr<ReservationOutcome> ReserveSlices(DomainGroupRequest request);

  // Forgets the reservation and gives back exactly what its scheduler held (nothing for one
  // that was waiting). NotFound when there is none.
  absl::StatusOr<std::vector<Allocation>> Remove(std::string_view name);

  // After a change that could help: placement groups missing bundles are re-placed (ascending
  // scheduler ids), then every waiting reservation is tried again — placement groups before
  // slice groups, each in name order — except those `may_retry` holds back. One outcome per
  // reservation tried, in that order.
  std::vector<ReservationOutcome> RetryWaiting(
      absl::FunctionRef<bool(const std::string& name)> may_retry);
  std::vector<ReservationOutcome> RetryWaiting() {
    return RetryWaiting([](const std::string&) { return true; });
  }

  // Node `node` died (`reason`, one line) and the view released `lost` (ClusterView::FailNode):
  // placement groups that had bundles there re-place them now (kPlaced) or wait (kReplacing);
  // slice groups with a host there are kBroken (one broken before keeps its explanation). One
  // outcome per reservation touched: placement groups first (ascending scheduler ids), then
  // slice groups by name.
  std::vector<ReservationOutcome> OnNodeFailed(const NodeId& node, std::string_view reason,
                                               std::span<const Allocation> lost);

  // Broken slice groups whose hosts `alive` all are again give back what they still hold and
  // wait as new (kPending): the next RetryWaiting reserves them, on the same slice when it is
  // intact and free. Their names, in order.
  // `may_heal` false holds one back (the head's reservations with a round in flight).
  std::vector<std::string> HealBroken(absl::FunctionRef<bool(const NodeId&)> alive,
                                      absl::FunctionRef<bool(const std::string& name)> may_heal);

  // A held slice group's host no longer holds its bundle although the host lives (its agent
  // lost it): the group is kBroken, `explanation`, and healed as after a host's death.
  void Break(std::string_view name, std::string explanation);

  // The cluster could not hold the placement (the agents refused it): it is given back and the
  // reservation waits again (kPending, `explanation`). No-op for an unknown or waiting one.
  void Unplace(std::string_view name, std::string explanation);

  // A previous head's reservations (a head restarted from its state store). Restore every held
  // one first, then call RetryWaiting: nothing here places anything anew.
  // A placement group that held bundles: PlacementGroupScheduler::Restore. kPlaced when every
  // bundle is held again, kReplacing (bundles: the refused ones) otherwise; kPending with the
  // reason when the record cannot be restored at all (it is placed anew by the next retry).
  absl::StatusOr<ReservationOutcome> RestorePlacementGroup(PlacementGroupSpec spec, size_t option,
                                                           std::span<const RestoredBundle> bundles);
  // A slice group that was reserved: DomainGroupScheduler::Restore. kPlaced, kBroken (bundles:
  // the missing hosts'), or kPending with the reason when it is refused.
  absl::StatusOr<ReservationOutcome> RestoreSliceGroup(DomainGroupRequest request,
                                                       size_t alternative,
                                                       std::span<const DomainBundle> bundles);
  // A reservation that was waiting (`status` kPending or kInfeasible): kept waiting, not tried.
  absl::Status RestoreWaiting(PlacementGroupSpec spec, ReservationStatus status,
                              std::string explanation);
  absl::Status RestoreWaiting(DomainGroupRequest request, ReservationStatus status,
                              std::string explanation);

  // --- reading ---
  const ReservationRecord* Find(std::string_view name) const;
  // Every reservation, by name.
  const std::map<std::string, ReservationRecord, std::less<>>& records() const { return records_; }
  // Where each bundle of a held reservation is now, by bundle index (nullopt: a placement
  // group's bundle waiting for a node). A slice group lists every host, a lost one included.
  // Empty for a waiting or unknown reservation.
  std::vector<std::optional<BundlePlacement>> Bundles(std::string_view name) const;
  // The node bundle `index` of a held reservation is on now (nullopt when none); `count`, when
  // given, receives the number of bundles (0 when not held). For every bundle a heartbeat
  // reports: no copies.
  std::optional<NodeId> BundleNode(std::string_view name, int index, size_t* count) const;
  // The number of bundles of a held reservation (0 when it waits or is unknown).
  size_t BundleCount(std::string_view name) const;
  // The bundles of a held slice group (one per host, or chip), by bundle index, a lost host's
  // included; nullptr for anything else.
  const std::vector<DomainBundle>* SliceHosts(std::string_view name) const;
  // What each bundle of the reservation reserves, by index: the chosen option's shapes for a
  // placement group (the primary's while it waits), each host bundle's resources for a held
  // slice group (none while it waits).
  std::vector<ResourceSet> BundleShapes(std::string_view name) const;
  // Where a request asking for `demand` inside reservation `name` may go (bundle -1: any).
  BundleTargetCheck CheckBundleTarget(std::string_view name, int bundle,
                                      const ResourceSet& demand) const;

 private:
  ReservationRecord* FindMutable(std::string_view name);
  // InvalidArgument for an empty name, AlreadyExists for one either kind uses.
  absl::Status CheckNewName(std::string_view name, ReservationKind kind) const;
  // Tries to place the record now: kPlaced, or waiting (explained). The scheduler's refusal of
  // its request (bad input) is returned with the record unchanged.
  absl::Status TryPlace(ReservationRecord& record);
  // A new, empty record of that name and kind in the map; nullptr (and why in `refused`) for a
  // name CheckNewName refuses.
  ReservationRecord* NewRecord(std::string_view name, ReservationKind kind, absl::Status* refused);
  // Tries to place a new record: its outcome (placed or waiting), or the scheduler's refusal
  // with the record dropped again.
  absl::StatusOr<ReservationOutcome> PlaceNew(ReservationRecord& record);
  absl::Status KeepWaiting(ReservationRecord record, ReservationStatus status,
                           std::string explanation);
  static void Wait(ReservationRecord& record, ScheduleStatus status, std::string explanation);
  // Gives the placement back to the kind's scheduler (the record keeps its request).
  void ForgetPlacement(ReservationRecord& record);
  static ReservationOutcome OutcomeOf(const ReservationRecord& record, std::vector<int> bundles);
  // What the placement group scheduler's re-placement reports mean for the records: each one's
  // status and explanation, and an outcome per report (marked a replacement).
  void ApplyReplacements(const std::vector<RescheduleReport>& reports,
                         std::vector<ReservationOutcome>& outcomes);
  // The record of the group a scheduler report is about (nullptr when none).
  ReservationRecord* GroupRecord(const RescheduleReport& report);
  void Decide(ReservationKind kind, absl::FunctionRef<void()> decide);

  PlacementGroupScheduler groups_;
  DomainGroupScheduler slices_;
  std::map<std::string, ReservationRecord, std::less<>> records_;
  DecisionWrapper wrap_;
};

}  // namespace tessera

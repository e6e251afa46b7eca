// ClusterController: the one owner of the head's cluster state. It holds, under its one mutex,
// the ClusterState (the view of the nodes, the task scheduler's advice and the reservation
// engine), the NodeRegistry (nodes, heartbeats, health: node_registry.h) as a part, and the
// head's reservations: placement groups and slice groups on a running cluster. Every placement
// decision (placing, waiting and retrying, re-placing what a node's death takes, breaking and
// healing slice groups, where a request inside one goes) is the ReservationEngine's (the engine
// `tessera schedule` drives too); the controller adds what only a cluster has: holding the
// bundles on the node agents by two-phase commit (reservation.h), reconciling what the agents
// report holding, releasing what a gone driver owned, events, and the records in the StateStore
// (tables "placement_groups" and "slice_groups"; the registry's "nodes").
// Files: cluster_controller.cc (construction, rounds, removal, nodes' effects, ticks),
// placement_groups.cc, slice_groups.cc, reservation_restore.cc.
//
// Threading: one mutex, mutex(), guards everything above. Callers that read or change the nodes
// or the view (the gRPC front, the in-process cluster head) hold it and reach the parts through
// nodes(), state(); the methods marked ABSL_EXCLUSIVE_LOCKS_REQUIRED are called with it held, the
// others take it themselves and make agent RPCs without it. A reservation with a round in flight
// is `busy`; removal waits for it. Tick's two-phase commits run on threads of their own, several
// reservations at once (at most max_concurrent_syncs), never on the health check's path: a slow
// agent delays only the reservations that wait on it. Lock order: this mutex first, then any other
// table's own (jobs, actors, drivers, events); never the other way round. No RPC is made while it
// is held.
// Cost: create/remove is the scheduler's cost plus one store write and one round of agent calls;
// a heartbeat's reconciliation is O(that node's bundles); Tick is O(reservations).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "head/cluster_state.h"
#include "head/driver_table.h"
#include "head/event_log.h"
#include "head/head_latency_metrics.h"
#include "head/node_agent_client.h"
#include "head/node_registry.h"
#include "head/reservation.h"
#include "head/store_writer.h"
#include "tessera/v1/head.pb.h"
#include "tessera/v1/head_state.pb.h"
#include "wire/proto_convert.h"

namespace tessera {

struct ClusterControllerOptions {
  Clock* clock = nullptr;                // required
  StoreWriter* writer = nullptr;         // required
  EventLog* events = nullptr;            // required
  DriverTable* drivers = nullptr;        // required
  NodeAgentClientFactory agent_clients;  // required
  absl::Duration heartbeat_interval = absl::Milliseconds(500);
  absl::Duration node_timeout = absl::Seconds(5);
  // How tasks are placed (TaskScheduler), and how reservations wait.
  SchedulerOptions scheduling;
  absl::Duration retry_interval = absl::Seconds(1);
  size_t max_concurrent_syncs = 8;
  HeadLatencyMetrics latency;  // decisions and commits timed there (null histograms: not timed)
};

// Where a request inside a reservation should go (PickNode with a bundle target).
struct BundleTargetAdvice {
  enum class Status { kPlaced, kPending, kInfeasible };
  Status status = Status::kPending;
  std::string node;  // kPlaced
  std::string explanation;
};

class ClusterController {
 public:
  // What the engine does not keep: the request as it came (stored, and answered again to a
  // retried create).
  struct GroupEntry : Reservation {
    GroupEntry() : Reservation(ReservationKind::kPlacementGroup) {}
    v1::CreatePlacementGroupRequest request;
  };
  struct SliceEntry : Reservation {
    SliceEntry() : Reservation(ReservationKind::kSliceGroup) {}
    v1::ReserveSlicesRequest request;
  };

  // `listener` is told what nodes do (see NodeListener); it must outlive the controller.
  ClusterController(ClusterControllerOptions options, NodeListener* listener);
  // Waits for the syncs Tick started.
  ~ClusterController();
  ClusterController(const ClusterController&) = delete;
  ClusterController& operator=(const ClusterController&) = delete;

  // The one mutex of the cluster's state (see the file comment).
  absl::Mutex* mutex() const ABSL_LOCK_RETURNED(mu_) { return &mu_; }
  // For a callback that generic code (a paged listing's filler) runs while the caller holds the
  // mutex: tells the analysis so, and checks it.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK(mu_) { mu_.AssertHeld(); }
  // The parts, with the mutex held.
  NodeRegistry& nodes() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return nodes_; }
  const NodeRegistry& nodes() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return nodes_; }
  ClusterState& state() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return state_; }
  const ClusterState& state() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return state_; }
  // Before waiting for the mutex: a heartbeat of this incarnation arrived at `arrived` (the
  // health check counts it from then, however long the heartbeat waits for the mutex).
  void NoteArrival(const std::string& node, const std::string& incarnation, absl::Time arrived) {
    arrivals_.Note(node, incarnation, arrived);
  }

  // --- requests (take the mutex themselves) ---
  // ALREADY_EXISTS for a taken name, InvalidArgument for a spec the scheduler refuses,
  // UNAVAILABLE when the state store does not take its record (StoreWriter::Write: nothing is
  // changed, nothing is asked of the agents). Answers once placement and the first two-phase
  // round are over (or the group waits for room).
  absl::Status CreatePlacementGroup(const v1::CreatePlacementGroupRequest& request,
                                    PlacementGroupSpec spec, v1::PlacementGroupInfo* response)
      ABSL_LOCKS_EXCLUDED(mu_);
  // NotFound when there is none; the agents give the bundles back before it is forgotten.
  // `acknowledged` (a caller's removal): its record is deleted from the store first, and
  // UNAVAILABLE, changing nothing, when the store does not take that; otherwise (the head's own
  // removal) the deletion is kept pending while the store is degraded.
  absl::Status RemovePlacementGroup(const std::string& name,
                                    v1::RemovePlacementGroupResponse* response,
                                    bool acknowledged = true) ABSL_LOCKS_EXCLUDED(mu_);
  // Until it is created or `timeout` passes on the injected clock (a fake clock's only when it
  // is moved); NotFound when there is none (removed while waited for).
  absl::Status WaitPlacementGroup(const std::string& name, absl::Duration timeout,
                                  v1::PlacementGroupInfo* response) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status ReserveSlices(const v1::ReserveSlicesRequest& request, DomainGroupRequest parsed,
                             v1::SliceGroupInfo* response) ABSL_LOCKS_EXCLUDED(mu_);
  // As RemovePlacementGroup.
  absl::Status ReleaseSlices(const std::string& name, v1::ReleaseSlicesResponse* response,
                             bool acknowledged = true) ABSL_LOCKS_EXCLUDED(mu_);
  // Until it is reserved or refused (RESERVED or INFEASIBLE), or `timeout` passes as for
  // WaitPlacementGroup; NotFound when there is none (released while waited for).
  absl::Status WaitSliceGroup(const std::string& name, absl::Duration timeout,
                              v1::SliceGroupInfo* response) ABSL_LOCKS_EXCLUDED(mu_);
  // The head is shutting down: every wait above answers now, where its reservation stands, and
  // later ones at once (gRPC's shutdown waits for the calls in flight to return).
  void EndWaits() ABSL_LOCKS_EXCLUDED(mu_);
  // Removes every placement group and releases every slice group `owner` owns; the names.
  std::vector<std::string> ReleaseOwnedBy(const std::string& owner) ABSL_LOCKS_EXCLUDED(mu_);

  // --- periodic ---
  // Retries waiting reservations (after a change, and every retry_interval), reserves anew the
  // broken slice groups whose hosts are back, and starts the two-phase rounds that bring the
  // agents in line, on threads of their own. With `wait`, returns when those rounds are over.
  void Tick(bool wait) ABSL_LOCKS_EXCLUDED(mu_, syncs_mu_);

  // --- what nodes do to reservations (the registry's listener calls them, under the mutex) ---
  // Placement groups drop the node's bundles and are re-placed (`moved`); slice groups holding
  // a host there are broken (`broken`).
  void NodeDead(const std::string& node, const std::string& reason,
                const std::vector<Allocation>& lost, std::vector<std::string>* moved,
                std::vector<std::string>* broken) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An agent's report of the bundles it holds: the positions of those the head does not hold
  // there (to release, with an event); with `epoch_seen`, bundles committed there before that
  // epoch and missing from the report are lost (re-prepared, or the slice group broken).
  std::vector<size_t> Reconcile(const std::string& node, const std::vector<ReportedBundle>& bundles,
                                std::optional<int64_t> epoch_seen)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Bumped by every bundle commit; agents echo it in heartbeats.
  int64_t bundles_epoch() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return bundles_epoch_; }

  // --- reading (under the mutex) ---
  const std::map<std::string, GroupEntry, std::less<>>& groups() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return groups_;
  }
  const std::map<std::string, SliceEntry, std::less<>>& slices() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return slices_;
  }
  void DescribeGroup(const GroupEntry& group, v1::PlacementGroupInfo* info) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DescribeSlice(const SliceEntry& slice, v1::SliceGroupInfo* info) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The slices the nodes' labels describe, by name, with whether they are intact and who holds
  // them.
  std::map<std::string, v1::ListSlicesResponse::Slice> SliceCatalog() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Which node should take a request inside reservation `name` (bundle -1: any bundle).
  BundleTargetAdvice AdviseBundleTarget(const std::string& name, int bundle_index,
                                        const ResourceSet& demand,
                                        const std::set<std::string>& excluded) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Reads back a previous head's groups and slice groups with exactly their bundles' nodes and
  // allocations (reservation_restore.cc). DataLoss naming the table and key.
  absl::Status Restore() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

 private:
  Reservation* Find(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const Reservation* Find(const std::string& name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Reservation* Find(ReservationKind kind, const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool NameTaken(const std::string& name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A fresh id "<prefix>-N" and the group's name (the id when none was asked for);
  // AlreadyExists when the asked-for name is taken by a group of either kind.
  absl::Status ClaimName(const std::string& requested, absl::string_view prefix, int64_t* counter,
                         std::string* id, std::string* name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The engine's record of a reservation this manager has (they are added and removed together).
  const ReservationRecord& Record(const Reservation& reservation) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the engine holds it placed (its bundles have nodes in the view).
  bool IsPlaced(const Reservation& reservation) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Where the engine wants each bundle held.
  std::vector<std::optional<BundleHold>> DesiredHolds(const Reservation& reservation) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What an engine decision about a reservation that was waiting means here: placed, it is
  // committed next (kCommitting); otherwise it waits, explained. Whether anything changed.
  bool ApplyPlacement(Reservation& reservation, const ReservationOutcome& outcome)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The reservation's record in its table (v1::StoredPlacementGroup or StoredSliceGroup).
  std::string StoredRecord(const Reservation& reservation) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The head's own write of the record: kept pending while the store is degraded.
  void Persist(const Reservation& reservation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The first record of a reservation just made, before anyone hears of it. When the store
  // does not take it, undoes the making (the engine's placement, the entry, the id counter back
  // to `counter_before`) and returns UNAVAILABLE; the reservation is then gone.
  absl::Status PersistCreated(Reservation& reservation, int64_t* counter, int64_t counter_before)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool KnowsBundle(const std::string& node, const ReportedBundle& bundle) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A bundle of `reservation` was committed on `node`: remembers the epoch of that commit.
  void NoteCommitted(const std::string& node, const std::string& reservation, int index)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The agent of a live node no longer holds committed bundle `index`: a placement group
  // prepares it again where the view holds it (RESCHEDULING meanwhile), a slice group is broken
  // (and reserved anew once its hosts are all alive, as after a host's death).
  void LostBundle(Reservation& reservation, int index, const std::string& node)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The wait of WaitPlacementGroup and WaitSliceGroup: until the reservation of `kind` named
  // `name` is gone or `settled(its phase)`, or `timeout` passes on the injected clock. The
  // reservation then; nullptr when there is none.
  const Reservation* AwaitSettled(ReservationKind kind, const std::string& name,
                                  absl::Duration timeout, bool (*settled)(ReservationPhase))
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Blocks until the named reservation of `kind` is not busy; nullptr when there is none.
  Reservation* WaitUntilIdle(ReservationKind kind, const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The cancels that release every confirmed bundle, for a removal.
  std::vector<NodeWork> CancelAllWork(const Reservation& reservation) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends a removal: the placement back to the scheduler, the group out of the store and the map.
  // "placement group g held: 4 bundles on 2 nodes (n1, n2)", for the event stream.
  std::string DescribeHeld(const Reservation& reservation) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Erase(Reservation& reservation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks it busy, cancels every bundle on the agents (without the lock), then calls
  // `finish` under the lock with the reservation (still busy) before erasing it.
  // With `acknowledged`, the record is deleted from the store first (see RemovePlacementGroup).
  absl::Status Remove(ReservationKind kind, const std::string& name, bool acknowledged,
                      absl::FunctionRef<void(Reservation&)> finish) ABSL_LOCKS_EXCLUDED(mu_);
  // Retries waiting reservations and heals broken slice groups; the names that want a round and
  // the cancels healing needs.
  std::vector<std::string> RetryAndHeal(
      std::vector<std::pair<std::string, std::vector<NodeWork>>>* healing)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- without the lock ---
  // Brings the agents in line with the scheduler's placement of the reservation: cancels bundles
  // that moved, prepares then commits the new ones; on failure a fresh reservation gives its
  // placement back and waits, a placement group already holding bundles is re-placed later.
  void Sync(const std::string& name) ABSL_LOCKS_EXCLUDED(mu_);
  // After creating a reservation that was placed: syncs it, waits until no round is in flight,
  // then calls `describe` under the lock with it (nullptr: removed meanwhile).
  void SyncAndDescribe(ReservationKind kind, const std::string& name,
                       absl::FunctionRef<void(const Reservation*)> describe)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Starts Sync(name) on a thread of its own unless one runs for it or max_concurrent_syncs do.
  void StartSync(const std::string& name) ABSL_LOCKS_EXCLUDED(syncs_mu_);
  void WaitForSyncs() ABSL_LOCKS_EXCLUDED(syncs_mu_);
  void JoinFinishedSyncs() ABSL_LOCKS_EXCLUDED(syncs_mu_);

  // Restore helpers (reservation_restore.cc).
  absl::Status RestoreGroup(const std::string& key, const std::string& value)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RestoreSlice(const std::string& key, const std::string& value)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Keeps a restored entry (its id counter moved past `id_number`, its owner given a whole
  // driver timeout); the entry as kept.
  Reservation& AdoptRestored(GroupEntry entry, int64_t id_number)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Reservation& AdoptRestored(SliceEntry entry, int64_t id_number)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A restored reservation as the engine took it back (`restored`). Refused (kPending): it waits
  // anew, an event naming it as `noun` ("placement group", "slice group") says why, and false.
  // Otherwise its bundles count as committed where the engine holds them, except the bundle
  // indices the outcome lists as not held, and true.
  bool ConfirmRestoredOrWait(Reservation& reservation, const ReservationOutcome& restored,
                             std::string_view noun) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ClusterControllerOptions options_;
  mutable absl::Mutex mu_;
  ClusterState state_ ABSL_GUARDED_BY(mu_);
  HeartbeatArrivals arrivals_;  // its own lock: written before mu_ is waited for
  NodeRegistry nodes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, GroupEntry, std::less<>> groups_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, SliceEntry, std::less<>> slices_ ABSL_GUARDED_BY(mu_);
  int64_t next_group_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t next_slice_ ABSL_GUARDED_BY(mu_) = 1;
  absl::Time last_retry_ ABSL_GUARDED_BY(mu_) = options_.clock->Now();
  // Bumped by every bundle commit; starts from the clock so it also grows across head restarts.
  int64_t bundles_epoch_ ABSL_GUARDED_BY(mu_) = absl::ToUnixMicros(options_.clock->Now());
  // node -> (reservation name, bundle index) -> the bundles epoch of its commit there. A
  // heartbeat that saw this epoch and lacks the bundle lost it.
  std::map<std::string, std::map<std::pair<std::string, int>, int64_t>, std::less<>>
      committed_epochs_ ABSL_GUARDED_BY(mu_);
  absl::CondVar idle_;  // signalled when a reservation stops being busy (with mu_)

  absl::Mutex syncs_mu_ ABSL_ACQUIRED_AFTER(mu_);
  absl::CondVar syncs_done_;
  std::map<std::string, std::thread> syncs_ ABSL_GUARDED_BY(syncs_mu_);  // running, by name
  std::vector<std::thread> finished_syncs_ ABSL_GUARDED_BY(syncs_mu_);   // to join
  bool stopping_ ABSL_GUARDED_BY(syncs_mu_) = false;
  // Where the next tick's list of rounds starts.
  size_t next_sync_ ABSL_GUARDED_BY(mu_) = 0;
  bool waits_ended_ ABSL_GUARDED_BY(mu_) = false;  // EndWaits
};

}  // namespace tessera

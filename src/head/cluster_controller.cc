// ClusterController (cluster_controller.h): its construction, and reservations of either kind:
// finding them, bringing the agents in line with the scheduler's placement (two-phase commit, see
// reservation.h) on the request's thread or the sync threads Tick starts, removal, what a dead node
// or an agent's report does to them, and what a gone driver owned. The kinds' own parts live in
// placement_groups.cc and slice_groups.cc; reading back a previous head's records in
// reservation_restore.cc.
#include "head/cluster_controller.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/ignore_status.h"
#include "base/string_util.h"
#include "head/state_store.h"
#include "metrics/scoped_timer.h"

namespace tessera {

using wire::ExactAllocationOf;

ClusterController::ClusterController(ClusterControllerOptions options, NodeListener* listener)
    : options_(std::move(options)),
      state_(options_.scheduling),
      nodes_(NodeRegistryOptions{.heartbeat_interval = options_.heartbeat_interval,
                                 .node_timeout = options_.node_timeout,
                                 .clock = options_.clock,
                                 .writer = options_.writer,
                                 .events = options_.events,
                                 .agent_clients = options_.agent_clients},
             &state_, &arrivals_) {
  // The engine's decisions, timed by kind (tessera_head_scheduling_decision_seconds).
  HeadLatencyMetrics latency = options_.latency;
  absl::MutexLock lock(&mu_);
  nodes_.set_listener(listener);
  state_.reservations.set_decision_wrapper([latency](ReservationKind kind,
                                                     absl::FunctionRef<void()> decide) {
    metrics::ScopedTimer timer(kind == ReservationKind::kPlacementGroup ? latency.group_decision
                                                                        : latency.slice_decision);
    decide();
  });
}

ClusterController::~ClusterController() {
  {
    absl::MutexLock lock(&syncs_mu_);
    stopping_ = true;  // a Tick racing the destructor starts nothing
  }
  WaitForSyncs();
  JoinFinishedSyncs();
}

Reservation* ClusterController::Find(const std::string& name) {
  if (auto g = groups_.find(name); g != groups_.end()) return &g->second;
  if (auto s = slices_.find(name); s != slices_.end()) return &s->second;
  return nullptr;
}

const Reservation* ClusterController::Find(const std::string& name) const {
  return const_cast<ClusterController*>(this)->Find(name);
}

Reservation* ClusterController::Find(ReservationKind kind, const std::string& name) {
  Reservation* found = Find(name);
  return found != nullptr && found->kind == kind ? found : nullptr;
}

bool ClusterController::NameTaken(const std::string& name) const { return Find(name) != nullptr; }

absl::Status ClusterController::ClaimName(const std::string& requested, absl::string_view prefix,
                                          int64_t* counter, std::string* id, std::string* name) {
  if (!requested.empty() && NameTaken(requested)) {
    return absl::AlreadyExistsError(absl::StrCat("a group named ", requested, " exists"));
  }
  do {
    *id = absl::StrCat(prefix, "-", (*counter)++);
  } while (requested.empty() && NameTaken(*id));
  *name = requested.empty() ? *id : requested;
  return absl::OkStatus();
}

const ReservationRecord& ClusterController::Record(const Reservation& reservation) const {
  const ReservationRecord* record = state_.reservations.Find(reservation.name);
  // Added and removed with the manager's entry, under the same lock: a missing one is our bug.
  if (record == nullptr) {
    std::fprintf(stderr, "tessera head: the reservation engine has no record of %s\n",
                 reservation.name.c_str());
    std::abort();
  }
  return *record;
}

bool ClusterController::IsPlaced(const Reservation& reservation) const {
  return Record(reservation).held();
}

std::vector<std::optional<BundleHold>> ClusterController::DesiredHolds(
    const Reservation& reservation) const {
  const std::vector<std::optional<BundlePlacement>> bundles =
      state_.reservations.Bundles(reservation.name);
  if (bundles.empty()) return std::vector<std::optional<BundleHold>>(reservation.confirmed.size());
  // A slice group's bundles never move: where the engine put them is where they are wanted.
  std::vector<std::optional<BundleHold>> desired(bundles.size());
  for (size_t i = 0; i < bundles.size(); ++i) {
    if (bundles[i].has_value()) {
      desired[i] = BundleHold{bundles[i]->node.value(), ExactAllocationOf(bundles[i]->allocation)};
    }
  }
  return desired;
}

bool ClusterController::ApplyPlacement(Reservation& reservation,
                                       const ReservationOutcome& outcome) {
  const ReservationPhase phase = reservation.phase;
  const std::string explanation = reservation.explanation;
  switch (outcome.status) {
    case ReservationStatus::kPlaced:
      reservation.phase = ReservationPhase::kCommitting;
      reservation.confirmed.assign(state_.reservations.BundleCount(reservation.name), std::nullopt);
      reservation.explanation.clear();
      break;
    case ReservationStatus::kInfeasible:
      reservation.phase = ReservationPhase::kInfeasible;
      reservation.explanation = outcome.explanation;
      break;
    default:
      reservation.phase = ReservationPhase::kPending;
      reservation.explanation = outcome.explanation;
      break;
  }
  return reservation.phase != phase || reservation.explanation != explanation;
}

// The StateStore holds what `tessera status` and a Redis-backed head need.
std::string ClusterController::StoredRecord(const Reservation& reservation) const {
  // The request it came from and what the head knows of it now: all a restarted head needs.
  if (reservation.kind == ReservationKind::kPlacementGroup) {
    const auto& group = static_cast<const GroupEntry&>(reservation);
    v1::StoredPlacementGroup stored;
    *stored.mutable_request() = group.request;
    DescribeGroup(group, stored.mutable_info());
    return stored.SerializeAsString();
  }
  const auto& slice = static_cast<const SliceEntry&>(reservation);
  v1::StoredSliceGroup stored;
  *stored.mutable_request() = slice.request;
  DescribeSlice(slice, stored.mutable_info());
  return stored.SerializeAsString();
}

namespace {

std::string_view TableOf(ReservationKind kind) {
  return kind == ReservationKind::kPlacementGroup ? kPlacementGroupsTable : kSliceGroupsTable;
}

}  // namespace

void ClusterController::Persist(const Reservation& reservation) {
  options_.writer->Put(TableOf(reservation.kind), reservation.name, StoredRecord(reservation));
}

absl::Status ClusterController::PersistCreated(Reservation& reservation, int64_t* counter,
                                               int64_t counter_before) {
  absl::Status written = options_.writer->Write(TableOf(reservation.kind), reservation.name,
                                                StoredRecord(reservation));
  if (written.ok()) return written;
  // Not durable, so never made: the engine gives back what it placed, the name and id are free.
  IgnoreStatus(state_.reservations.Remove(reservation.name),
               "NotFound only when the engine holds nothing of it: nothing to give back");
  *counter = counter_before;
  if (reservation.kind == ReservationKind::kPlacementGroup) {
    groups_.erase(reservation.name);
  } else {
    slices_.erase(reservation.name);
  }
  return written;
}

bool ClusterController::KnowsBundle(const std::string& node, const ReportedBundle& bundle) const {
  const Reservation* reservation = Find(bundle.reservation);
  if (reservation == nullptr) return false;
  if (reservation->busy) return true;
  const int index = bundle.index;
  // Where the engine wants bundle `index` (this runs for every bundle of every heartbeat: no
  // copies). A reservation the engine does not hold has only what was confirmed.
  // A held reservation has at least one bundle, so a count of 0 means it is not held.
  size_t placed_count = 0;
  const std::optional<NodeId> placed =
      state_.reservations.BundleNode(reservation->name, index, &placed_count);
  const size_t count = placed_count > 0 ? placed_count : reservation->confirmed.size();
  std::optional<std::string> wanted;
  if (placed.has_value()) wanted = placed->value();
  if (index < 0 || index >= static_cast<int>(count)) return false;
  const std::vector<std::optional<BundleHold>>& confirmed = reservation->confirmed;
  const bool confirmed_here = index < static_cast<int>(confirmed.size()) &&
                              confirmed[index].has_value() && confirmed[index]->node == node;
  return wanted == node || confirmed_here;
}

void ClusterController::NodeDead(const std::string& node, const std::string& reason,
                                 const std::vector<Allocation>& lost,
                                 std::vector<std::string>* moved,
                                 std::vector<std::string>* broken) {
  committed_epochs_.erase(node);  // its agent, and what it held, are gone
  std::map<std::string, const ReservationOutcome*> touched_by_engine;
  const std::vector<ReservationOutcome> outcomes =
      state_.reservations.OnNodeFailed(NodeId(node), reason, lost);
  for (const ReservationOutcome& outcome : outcomes) touched_by_engine[outcome.name] = &outcome;

  for (auto& [name, group] : groups_) {
    bool touched = false;
    for (std::optional<BundleHold>& hold : group.confirmed) {
      if (hold.has_value() && hold->node == node) {
        hold.reset();  // the agent is gone, and its reservation with it
        touched = true;
      }
    }
    if (auto it = touched_by_engine.find(name); it != touched_by_engine.end()) {
      touched = true;
      group.explanation =
          it->second->status == ReservationStatus::kPlaced ? "" : it->second->explanation;
    }
    if (!touched) continue;
    moved->push_back(name);
    group.phase = ReservationPhase::kDegraded;
    if (group.explanation.empty()) {
      group.explanation = absl::StrCat("re-placing bundles lost with node ", node);
    }
    Persist(group);
  }
  for (auto& [name, slice] : slices_) {
    auto it = touched_by_engine.find(name);
    if (it == touched_by_engine.end() || slice.phase == ReservationPhase::kDegraded) continue;
    slice.phase = ReservationPhase::kDegraded;
    slice.explanation = it->second->explanation;  // "host n3 died (<reason>)"
    broken->push_back(name);
    Persist(slice);
  }
}

void ClusterController::LostBundle(Reservation& reservation, int index, const std::string& node) {
  reservation.confirmed[index].reset();
  reservation.phase = ReservationPhase::kDegraded;
  if (reservation.replaceable()) {
    // The view still holds its instances on that node: the next sync prepares it there again.
    reservation.explanation =
        absl::StrCat("bundle ", index, " was lost on node ", node, "; preparing it again");
  } else {
    reservation.explanation = absl::StrCat("host ", node, " lost bundle ", index);
    // Broken as after a host's death: reserved anew once its hosts are all back.
    state_.reservations.Break(reservation.name, reservation.explanation);
  }
  options_.events->Record(
      absl::StrCat(ToAbsl(ReservationNoun(reservation.kind)), " ", reservation.name, ": bundle ",
                   index, " is no longer held by the agent of ", node,
                   reservation.replaceable() ? "; it is prepared again" : "; the group is broken"),
      "reservation");
  Persist(reservation);
  state_.changed = true;
}

void ClusterController::Sync(const std::string& name) {
  for (int round = 0; round < 4; ++round) {
    std::vector<NodeWork> work;
    std::vector<NodeWork> stale;  // bundles to cancel where they no longer belong
    {
      absl::MutexLock lock(&mu_);
      Reservation* reservation = Find(name);
      if (reservation == nullptr || reservation->busy || !IsPlaced(*reservation)) return;
      // A slice group is only ever committed once; a broken one stays as it is.
      if (!reservation->replaceable() && reservation->phase != ReservationPhase::kCommitting) {
        return;
      }
      std::vector<std::optional<BundleHold>> desired = DesiredHolds(*reservation);
      reservation->confirmed.resize(desired.size());
      NodeWorkPlan prepare(nodes_.Agents());
      NodeWorkPlan cancel(nodes_.Agents());
      bool complete = true;
      for (size_t i = 0; i < desired.size(); ++i) {
        const auto& want = desired[i];
        const auto& have = reservation->confirmed[i];
        if (!want.has_value()) complete = false;
        if (want == have) continue;
        if (have.has_value()) cancel.Cancel(have->node, static_cast<int>(i));
        if (want.has_value()) prepare.Prepare(want->node, static_cast<int>(i), want->allocation);
      }
      if (prepare.empty() && cancel.empty()) {
        ReservationPhase phase = complete ? ReservationPhase::kHeld : ReservationPhase::kDegraded;
        if (phase != reservation->phase) {
          reservation->phase = phase;
          if (complete) {
            reservation->explanation.clear();
            options_.events->RecordChange(DescribeHeld(*reservation), "reservation");
          }
          Persist(*reservation);
        }
        idle_.SignalAll();
        return;
      }
      work = prepare.Take();
      stale = cancel.Take();
      reservation->busy = true;
    }
    CancelBundles(name, stale);
    const absl::Time commit_start = options_.clock->Now();
    absl::Status status = TwoPhaseCommit(name, work);
    if (metrics::Histogram* commit =
            status.ok() ? options_.latency.commit_ok : options_.latency.commit_failed;
        commit != nullptr) {
      commit->Observe(absl::ToDoubleSeconds(options_.clock->Now() - commit_start));
    }
    absl::MutexLock lock(&mu_);
    Reservation& reservation = *Find(name);  // busy: nobody removed it
    reservation.busy = false;
    idle_.SignalAll();
    for (const NodeWork& w : stale) {
      for (int index : w.cancel) {
        std::optional<BundleHold>& hold = reservation.confirmed[index];
        if (hold.has_value() && hold->node == w.node) hold.reset();
      }
    }
    if (!status.ok()) {
      reservation.explanation = absl::StrCat("two-phase commit failed: ", status.message());
      if (!reservation.AnyConfirmed() &&
          (reservation.phase == ReservationPhase::kCommitting || !reservation.replaceable())) {
        // A fresh reservation: give everything back and wait for the cluster to change.
        state_.reservations.Unplace(name, reservation.explanation);
        reservation.confirmed.clear();
        reservation.phase = ReservationPhase::kPending;
      } else {
        reservation.phase = ReservationPhase::kDegraded;
        if (!reservation.replaceable()) {
          state_.reservations.Break(name, reservation.explanation);
        }
      }
      options_.events->Record(absl::StrCat(ToAbsl(ReservationNoun(reservation.kind)), " ", name,
                                           ": ", reservation.explanation),
                              "reservation");
      Persist(reservation);
      return;
    }
    for (const NodeWork& w : work) {
      for (const auto& [index, allocation] : w.prepare) {
        reservation.confirmed[index] = BundleHold{w.node, allocation};
        NoteCommitted(w.node, name, index);  // heartbeats from then on must report it
      }
    }
  }
}

Reservation* ClusterController::WaitUntilIdle(ReservationKind kind, const std::string& name) {
  Reservation* reservation = Find(kind, name);
  while (reservation != nullptr && reservation->busy) {
    idle_.Wait(&mu_);
    reservation = Find(kind, name);
  }
  return reservation;
}

const Reservation* ClusterController::AwaitSettled(ReservationKind kind, const std::string& name,
                                                   absl::Duration timeout,
                                                   bool (*settled)(ReservationPhase)) {
  const absl::Time deadline = options_.clock->Now() + timeout;
  // Looked at again whenever the cluster lock is let go (every change to a reservation is made
  // under it), by the thread letting it go: no polling, and no signal to forget.
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const Reservation* reservation = Find(kind, name);
    return reservation == nullptr || settled(reservation->phase) || waits_ended_;
  };
  options_.clock->AwaitWithDeadline(mu_, absl::Condition(&done), deadline);
  return Find(kind, name);
}

void ClusterController::EndWaits() {
  absl::MutexLock lock(&mu_);
  waits_ended_ = true;  // the waiters look again as the lock is let go
}

void ClusterController::SyncAndDescribe(ReservationKind kind, const std::string& name,
                                        absl::FunctionRef<void(const Reservation*)> describe) {
  // Another sync (the ticker's) may hold the reservation; when it lets go between two of its
  // rounds the phase can still read kCommitting although the commit went through. Sync again
  // then, so the caller is told the outcome, not that moment. Bounded: a sync always leaves
  // kCommitting (held, degraded or pending) unless another one overtakes it.
  constexpr int kAttempts = 8;
  for (int attempt = 1;; ++attempt) {
    Sync(name);
    absl::MutexLock lock(&mu_);
    const Reservation* reservation = WaitUntilIdle(kind, name);
    if (reservation == nullptr || reservation->phase != ReservationPhase::kCommitting ||
        attempt == kAttempts) {
      describe(reservation);
      return;
    }
  }
}

std::vector<NodeWork> ClusterController::CancelAllWork(const Reservation& reservation) const {
  NodeWorkPlan plan(nodes_.Agents());
  for (size_t i = 0; i < reservation.confirmed.size(); ++i) {
    if (reservation.confirmed[i].has_value()) {
      plan.Cancel(reservation.confirmed[i]->node, static_cast<int>(i));
    }
  }
  return plan.Take();
}

std::string ClusterController::DescribeHeld(const Reservation& reservation) const {
  std::set<std::string> nodes;
  for (const std::optional<BundleHold>& hold : reservation.confirmed) {
    if (hold.has_value()) nodes.insert(hold->node);
  }
  return absl::StrCat(ToAbsl(ReservationNoun(reservation.kind)), " ", reservation.name,
                      " held: ", reservation.confirmed.size(), " bundles on ", nodes.size(),
                      " nodes (", absl::StrJoin(nodes, ", "), ")");
}

void ClusterController::Erase(Reservation& reservation) {
  const std::string name = reservation.name;
  options_.events->RecordChange(
      absl::StrCat(ToAbsl(ReservationNoun(reservation.kind)), " ", name, " removed"),
      "reservation");
  IgnoreStatus(state_.reservations.Remove(name),  // gives back what the engine held
               "NotFound only when the engine holds nothing of it: nothing to give back");
  reservation.confirmed.clear();
  // Again after a removal a caller asked for (its record went first): a node's death during
  // the cancels may have written it back.
  options_.writer->Delete(TableOf(reservation.kind), name);
  if (reservation.kind == ReservationKind::kPlacementGroup) {
    groups_.erase(name);
  } else {
    slices_.erase(name);
  }
  idle_.SignalAll();
  state_.changed = true;
}

absl::Status ClusterController::Remove(ReservationKind kind, const std::string& name,
                                       bool acknowledged,
                                       absl::FunctionRef<void(Reservation&)> finish) {
  if (name.empty()) return absl::InvalidArgumentError("name: is empty");
  std::vector<NodeWork> work;
  {
    absl::MutexLock lock(&mu_);
    Reservation* reservation = WaitUntilIdle(kind, name);
    if (reservation == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("no ", ToAbsl(ReservationNoun(kind)), " named ", name));
    }
    if (acknowledged) {
      // The record goes first: a removal the store did not take changes nothing, and one it
      // took is never undone by a restart (the agents' bundles of an unknown group are
      // released when they register).
      absl::StatusOr<bool> erased = options_.writer->Erase(TableOf(kind), name);
      if (!erased.ok()) return erased.status();
    }
    reservation->busy = true;
    work = CancelAllWork(*reservation);
  }
  // The agents give the bundles back first, so the view never offers them while still held.
  CancelBundles(name, work);
  absl::MutexLock lock(&mu_);
  Reservation& reservation = *Find(kind, name);  // busy: nobody removed it
  finish(reservation);
  Erase(reservation);
  return absl::OkStatus();
}

std::vector<std::string> ClusterController::ReleaseOwnedBy(const std::string& owner) {
  std::vector<std::string> groups;
  std::vector<std::string> slices;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, group] : groups_) {
      if (group.owner == owner) groups.push_back(name);
    }
    for (const auto& [name, slice] : slices_) {
      if (slice.owner == owner) slices.push_back(name);
    }
  }
  std::vector<std::string> released;
  for (const std::string& name : groups) {
    v1::RemovePlacementGroupResponse response;
    // NotFound: removed meanwhile by someone else, which is just as good. The head's own
    // removal: made also while the store is degraded (its deletion kept pending).
    if (RemovePlacementGroup(name, &response, /*acknowledged=*/false).ok()) {
      released.push_back(name);
    }
  }
  for (const std::string& name : slices) {
    v1::ReleaseSlicesResponse response;
    if (ReleaseSlices(name, &response, /*acknowledged=*/false).ok()) released.push_back(name);
  }
  return released;
}

// --- what agents report ---

void ClusterController::NoteCommitted(const std::string& node, const std::string& reservation,
                                      int index) {
  if (nodes_.Find(node) == nullptr) return;
  committed_epochs_[node][{reservation, index}] = ++bundles_epoch_;
}

std::vector<size_t> ClusterController::Reconcile(const std::string& node,
                                                 const std::vector<ReportedBundle>& bundles,
                                                 std::optional<int64_t> epoch_seen) {
  // Held by the agent, not by the head: a head restart with the in-memory store lost their
  // groups, a prepare applied after the head cancelled it (or gave up on it), or a group removed
  // while its cancel did not get through. KnowsBundle counts a reservation with a round in
  // flight as known: a prepare in flight is not an orphan.
  const bool registering = !epoch_seen.has_value();
  std::vector<size_t> release;
  std::set<std::pair<std::string, int>> reported;
  std::map<std::string, std::vector<int>> released;
  for (size_t i = 0; i < bundles.size(); ++i) {
    const ReportedBundle& bundle = bundles[i];
    reported.emplace(bundle.reservation, bundle.index);
    if (KnowsBundle(node, bundle)) continue;
    release.push_back(i);
    released[bundle.reservation].push_back(bundle.index);
  }
  for (const auto& [group, indices] : released) {
    const std::string list = absl::StrJoin(indices, ",");
    const bool known = NameTaken(group);
    if (registering) {
      options_.events->Record(known
                                  ? absl::StrCat("bundles ", list, " of ", group, " on ", node,
                                                 " are not held by the head; they were released")
                                  : absl::StrCat("placement group ", group,
                                                 " was lost with the head restart; its bundles on ",
                                                 node, " were released"),
                              "reservation");
    } else {
      options_.events->Record(
          absl::StrCat(
              "bundles ", list, " of ", group, " on ", node,
              known
                  ? " were held by the agent but not by the head (prepared after the head had "
                    "cancelled them); they were released"
                  : " belong to no group the head holds (removed, or prepared after the head gave "
                    "up on it); they were released"),
          "reservation");
    }
  }
  if (registering) return release;
  // Committed here by the head, missing on the agent. Judged only from a report taken after
  // the agent saw the epoch of that commit, so the report cannot predate the prepare.
  auto epochs = committed_epochs_.find(node);
  if (epochs == committed_epochs_.end()) return release;
  for (auto it = epochs->second.begin(); it != epochs->second.end();) {
    const auto& [key, epoch] = *it;
    Reservation* reservation = Find(key.first);
    const bool still_committed = reservation != nullptr &&
                                 key.second < static_cast<int>(reservation->confirmed.size()) &&
                                 reservation->confirmed[key.second].has_value() &&
                                 reservation->confirmed[key.second]->node == node;
    if (!still_committed) {
      it = epochs->second.erase(it);
      continue;
    }
    if (reservation->busy || epoch > *epoch_seen || reported.contains(key)) {
      ++it;
      continue;
    }
    const int index = key.second;
    it = epochs->second.erase(it);
    LostBundle(*reservation, index, node);
  }
  return release;
}

// --- periodic ---

std::vector<std::string> ClusterController::RetryAndHeal(
    std::vector<std::pair<std::string, std::vector<NodeWork>>>* healing) {
  // The order `tessera schedule` follows too (scheduling/simulation.h): heal, then retry.
  // A broken slice group whose hosts are all back (their agents registered again) is reserved
  // anew: its remaining bundles are given back (the healing cancels Tick sends before any
  // round) and it waits for placement like a new one (the same slice again when it is intact
  // and free, else another), tried at once below.
  auto may_heal = [&](const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const Reservation* slice = Find(name);
    return slice != nullptr && !slice->busy && slice->phase == ReservationPhase::kDegraded;
  };
  auto alive = [&](const NodeId& node)
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return nodes_.IsAlive(node.value()); };
  for (const std::string& name : state_.reservations.HealBroken(alive, may_heal)) {
    SliceEntry& slice = slices_.at(name);
    healing->emplace_back(name, CancelAllWork(slice));
    slice.confirmed.clear();
    slice.phase = ReservationPhase::kPending;
    slice.explanation = Record(slice).explanation;  // "its hosts are back; reserving it again"
    options_.events->Record(
        absl::StrCat("slice group ", name, ": its hosts are back; it is reserved again"),
        "reservation");
    Persist(slice);
    state_.changed = true;
  }
  const absl::Time now = options_.clock->Now();
  if (state_.changed || now - last_retry_ >= options_.retry_interval) {
    state_.changed = false;
    last_retry_ = now;
    auto idle = [&](const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      const Reservation* reservation = Find(name);
      return reservation != nullptr && !reservation->busy;
    };
    for (const ReservationOutcome& outcome : state_.reservations.RetryWaiting(idle)) {
      Reservation* reservation = Find(outcome.name);
      if (reservation == nullptr) continue;
      if (outcome.replacement) {
        // A placement group re-placing lost bundles: once they have nodes the next round holds
        // them (wants_sync below); until then it says why not.
        if (outcome.status == ReservationStatus::kReplacing) {
          reservation->explanation = outcome.explanation;
        }
        continue;
      }
      if (ApplyPlacement(*reservation, outcome)) Persist(*reservation);
    }
  }
  // A round for a reservation out of line with its placement: committing, or a placement group
  // being re-placed whose scheduler now wants holds it lacks (one with a hole and no room has
  // nothing to do and takes no thread).
  auto wants_sync = [&](const Reservation& reservation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (reservation.busy) return false;
    if (reservation.phase == ReservationPhase::kCommitting) return true;
    if (reservation.phase != ReservationPhase::kDegraded || !reservation.replaceable()) {
      return false;
    }
    const std::vector<std::optional<BundleHold>> desired = DesiredHolds(reservation);
    bool complete = true;
    for (size_t i = 0; i < desired.size(); ++i) {
      const bool held = i < reservation.confirmed.size() && reservation.confirmed[i].has_value();
      if (desired[i] != (held ? reservation.confirmed[i] : std::nullopt)) return true;
      complete = complete && desired[i].has_value();
    }
    return complete;  // every bundle held again: the round marks it created
  };
  std::vector<std::string> to_sync;
  for (const auto& [name, group] : groups_) {
    if (wants_sync(group)) to_sync.push_back(name);
  }
  for (const auto& [name, slice] : slices_) {
    if (wants_sync(slice)) to_sync.push_back(name);
  }
  return to_sync;
}

void ClusterController::Tick(bool wait) {
  std::vector<std::pair<std::string, std::vector<NodeWork>>> healing;  // slice -> cancels
  std::vector<std::string> to_sync;
  {
    absl::MutexLock lock(&mu_);
    to_sync = RetryAndHeal(&healing);
    // Past max_concurrent_syncs the rest wait for the next tick; each tick starts from where
    // the previous one's list moved on, so no reservation is passed over for good.
    if (!to_sync.empty()) {
      const size_t start = next_sync_ % to_sync.size();
      std::rotate(to_sync.begin(), to_sync.begin() + static_cast<std::ptrdiff_t>(start),
                  to_sync.end());
      next_sync_ += options_.max_concurrent_syncs;
    }
  }
  // The healing cancels come first: the slice group waits as pending until the next retry.
  for (const auto& [name, work] : healing) CancelBundles(name, work);
  JoinFinishedSyncs();
  for (const std::string& name : to_sync) StartSync(name);
  if (wait) WaitForSyncs();
}

void ClusterController::StartSync(const std::string& name) {
  absl::MutexLock lock(&syncs_mu_);
  // One at a time per reservation (Sync also backs off a busy one); the rest wait for the next
  // tick, which asks again for every reservation still out of line.
  if (stopping_ || syncs_.contains(name) || syncs_.size() >= options_.max_concurrent_syncs) {
    return;
  }
  syncs_.emplace(name, std::thread([this, name] {
                   Sync(name);
                   absl::MutexLock done(&syncs_mu_);
                   auto it = syncs_.find(name);
                   finished_syncs_.push_back(std::move(it->second));
                   syncs_.erase(it);
                   syncs_done_.SignalAll();
                 }));
}

void ClusterController::WaitForSyncs() {
  absl::MutexLock lock(&syncs_mu_);
  while (!syncs_.empty()) syncs_done_.Wait(&syncs_mu_);
}

void ClusterController::JoinFinishedSyncs() {
  std::vector<std::thread> finished;
  {
    absl::MutexLock lock(&syncs_mu_);
    finished.swap(finished_syncs_);
  }
  for (std::thread& thread : finished) thread.join();
}

// --- leases inside reservations ---

BundleTargetAdvice ClusterController::AdviseBundleTarget(
    const std::string& name, int bundle_index, const ResourceSet& demand,
    const std::set<std::string>& excluded) const {
  using Status = BundleTargetAdvice::Status;
  auto advice = [](Status status, std::string explanation) {
    return BundleTargetAdvice{status, "", std::move(explanation)};
  };
  const BundleTargetCheck check = state_.reservations.CheckBundleTarget(name, bundle_index, demand);
  if (check.status == ScheduleStatus::kInfeasible) {
    return advice(Status::kInfeasible, check.explanation);
  }
  if (check.status == ScheduleStatus::kPending) return advice(Status::kPending, check.explanation);
  // The engine knows it, so this manager does (both are added and removed together).
  const Reservation* reservation = Find(name);
  // A slice group's hosts serve once it is reserved on them; a placement group's bundle once
  // its agent has committed it there.
  if (!reservation->replaceable() && reservation->phase != ReservationPhase::kHeld &&
      reservation->phase != ReservationPhase::kDegraded) {
    return advice(Status::kPending, absl::StrCat("slice group ", name, " is not reserved yet"));
  }
  for (const auto& [index, node] : check.candidates) {
    if (excluded.count(node.value()) != 0 || !nodes_.IsAlive(node.value())) continue;
    if (reservation->replaceable()) {
      const std::vector<std::optional<BundleHold>>& confirmed = reservation->confirmed;
      if (index >= static_cast<int>(confirmed.size()) || !confirmed[index].has_value() ||
          confirmed[index]->node != node.value()) {
        continue;
      }
    }
    return BundleTargetAdvice{Status::kPlaced, node.value(), ""};
  }
  if (!check.replacing.empty()) return advice(Status::kPending, check.replacing);
  return advice(
      Status::kPending,
      bundle_index >= 0
          ? absl::StrCat("bundle ", bundle_index, " of ", name,
                         " is not held on a live node that was not tried yet")
          : absl::StrCat("no bundle of ", name, " is held on a live node that was not tried yet"));
}

}  // namespace tessera

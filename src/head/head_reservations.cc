// HeadService, reservations of either kind: finding them, bringing the agents in line with the
// scheduler's placement (two-phase commit, see reservation.h), removal, and what a dead node
// does to them. The kinds' own parts live in head_placement_groups.cc and head_slice_groups.cc.
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "head/head_service.h"
#include "head/head_service_internal.h"

namespace tessera {

using head_internal::Exact;

Reservation* HeadService::FindReservation(const std::string& name) {
  if (auto g = groups_.find(name); g != groups_.end()) return &g->second;
  if (auto s = slices_.find(name); s != slices_.end()) return &s->second;
  return nullptr;
}

const Reservation* HeadService::FindReservation(const std::string& name) const {
  return const_cast<HeadService*>(this)->FindReservation(name);
}

Reservation* HeadService::FindReservation(ReservationKind kind, const std::string& name) {
  Reservation* found = FindReservation(name);
  return found != nullptr && found->kind == kind ? found : nullptr;
}

bool HeadService::NameTaken(const std::string& name) const {
  return FindReservation(name) != nullptr;
}

grpc::Status HeadService::ClaimName(const std::string& requested, absl::string_view prefix,
                                    int64_t* counter, std::string* id, std::string* name) {
  if (!requested.empty() && NameTaken(requested)) {
    return grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                        absl::StrCat("a group named ", requested, " exists"));
  }
  do {
    *id = absl::StrCat(prefix, "-", (*counter)++);
  } while (requested.empty() && NameTaken(*id));
  *name = requested.empty() ? *id : requested;
  return grpc::Status::OK;
}

bool HeadService::IsPlaced(const Reservation& reservation) const {
  if (reservation.kind == ReservationKind::kPlacementGroup) {
    return static_cast<const GroupEntry&>(reservation).scheduled.has_value();
  }
  return static_cast<const SliceEntry&>(reservation).scheduled.has_value();
}

std::vector<std::optional<BundleHold>> HeadService::DesiredHolds(
    const Reservation& reservation) const {
  if (reservation.kind == ReservationKind::kPlacementGroup) {
    return DesiredBundles(static_cast<const GroupEntry&>(reservation));
  }
  // A slice group's bundles never move: where the scheduler put them is where they are wanted.
  std::vector<std::optional<BundleHold>> desired;
  for (const DomainBundle& bundle : static_cast<const SliceEntry&>(reservation).bundles) {
    desired.push_back(BundleHold{bundle.node.value(), Exact(bundle.allocation)});
  }
  return desired;
}

void HeadService::ForgetPlacement(Reservation& reservation) {
  if (reservation.kind == ReservationKind::kPlacementGroup) {
    GroupEntry& group = static_cast<GroupEntry&>(reservation);
    if (group.scheduled.has_value()) (void)groups_scheduler_.Remove(*group.scheduled);
    group.scheduled.reset();
  } else {
    SliceEntry& slice = static_cast<SliceEntry&>(reservation);
    if (slice.scheduled.has_value()) (void)slices_scheduler_.Release(*slice.scheduled);
    slice.scheduled.reset();
    slice.bundles.clear();
    slice.domains.clear();
  }
  reservation.confirmed.clear();
}

void HeadService::TryPlace(Reservation& reservation) {
  if (reservation.kind == ReservationKind::kPlacementGroup) {
    TryPlaceGroup(static_cast<GroupEntry&>(reservation));
  } else {
    TryPlaceSlice(static_cast<SliceEntry&>(reservation));
  }
}

// The StateStore holds what `tessera status` and a Redis-backed head need.
void HeadService::Persist(const Reservation& reservation) {
  // The request it came from and what the head knows of it now: all a restarted head needs.
  if (reservation.kind == ReservationKind::kPlacementGroup) {
    const auto& group = static_cast<const GroupEntry&>(reservation);
    v1::StoredPlacementGroup stored;
    *stored.mutable_request() = group.request;
    FillGroupInfo(group, stored.mutable_info());
    StorePut(kPlacementGroupsTable, reservation.name, stored.SerializeAsString());
  } else {
    const auto& slice = static_cast<const SliceEntry&>(reservation);
    v1::StoredSliceGroup stored;
    *stored.mutable_request() = slice.request;
    FillSliceInfo(slice, stored.mutable_info());
    StorePut(kSliceGroupsTable, reservation.name, stored.SerializeAsString());
  }
}

bool HeadService::KnowsBundle(const std::string& node, const v1::HeldBundle& bundle) const {
  const Reservation* reservation = FindReservation(bundle.placement_group());
  if (reservation == nullptr) return false;
  if (reservation->busy) return true;
  int index = bundle.bundle_index();
  std::vector<std::optional<BundleHold>> desired = DesiredHolds(*reservation);
  if (index < 0 || index >= static_cast<int>(desired.size())) return false;
  const std::vector<std::optional<BundleHold>>& confirmed = reservation->confirmed;
  bool here = desired[index].has_value() && desired[index]->node == node;
  bool confirmed_here = index < static_cast<int>(confirmed.size()) &&
                        confirmed[index].has_value() && confirmed[index]->node == node;
  return here || confirmed_here;
}

void HeadService::ReservationsLostNode(const std::string& node, const std::string& reason,
                                       const std::vector<Allocation>& lost,
                                       std::vector<std::string>* moved,
                                       std::vector<std::string>* broken) {
  std::vector<RescheduleReport> reports = groups_scheduler_.OnNodeFailed(NodeId(node), lost);
  std::map<int64_t, const RescheduleReport*> by_group;
  for (const RescheduleReport& report : reports) by_group[report.id.value()] = &report;

  for (auto& [name, group] : groups_) {
    bool touched = false;
    for (std::optional<BundleHold>& hold : group.confirmed) {
      if (hold.has_value() && hold->node == node) {
        hold.reset();  // the agent is gone, and its reservation with it
        touched = true;
      }
    }
    if (group.scheduled.has_value() && by_group.count(group.scheduled->value()) != 0) {
      const RescheduleReport* report = by_group.at(group.scheduled->value());
      touched = true;
      group.explanation = report->placed ? "" : report->explanation;
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
    bool holds = std::any_of(slice.bundles.begin(), slice.bundles.end(),
                             [&](const DomainBundle& b) { return b.node.value() == node; });
    if (!holds || slice.phase == ReservationPhase::kDegraded) continue;
    slice.phase = ReservationPhase::kDegraded;
    slice.explanation = absl::StrCat("host ", node, " died (", reason, ")");
    broken->push_back(name);
    Persist(slice);
  }
}

void HeadService::ReservationLostBundle(Reservation& reservation, int index,
                                        const std::string& node) {
  reservation.confirmed[index].reset();
  reservation.phase = ReservationPhase::kDegraded;
  if (reservation.replaceable()) {
    // The view still holds its instances on that node: the next sync prepares it there again.
    reservation.explanation =
        absl::StrCat("bundle ", index, " was lost on node ", node, "; preparing it again");
  } else {
    reservation.explanation = absl::StrCat("host ", node, " lost bundle ", index);
  }
  RecordEvent(absl::StrCat(ReservationNoun(reservation.kind), " ", reservation.name, ": bundle ",
                           index, " is no longer held by the agent of ", node,
                           reservation.replaceable() ? "; it is prepared again"
                                                     : "; the group is broken"));
  Persist(reservation);
  MarkChanged();
}

void HeadService::SyncReservation(const std::string& name) {
  for (int round = 0; round < 4; ++round) {
    std::vector<NodeWork> work;
    std::vector<NodeWork> stale;  // bundles to cancel where they no longer belong
    {
      absl::MutexLock lock(&mu_);
      Reservation* reservation = FindReservation(name);
      if (reservation == nullptr || reservation->busy || !IsPlaced(*reservation)) return;
      // A slice group is only ever committed once; a broken one stays as it is.
      if (!reservation->replaceable() && reservation->phase != ReservationPhase::kCommitting) {
        return;
      }
      std::vector<std::optional<BundleHold>> desired = DesiredHolds(*reservation);
      reservation->confirmed.resize(desired.size());
      NodeWorkPlan prepare(Agents());
      NodeWorkPlan cancel(Agents());
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
          if (complete) reservation->explanation.clear();
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
    absl::Status status = TwoPhaseCommit(name, work);
    absl::MutexLock lock(&mu_);
    Reservation& reservation = *FindReservation(name);  // busy: nobody removed it
    reservation.busy = false;
    idle_.SignalAll();
    for (const NodeWork& w : stale) {
      for (int index : w.cancel) {
        std::optional<BundleHold>& hold = reservation.confirmed[index];
        if (hold.has_value() && hold->node == w.node) hold.reset();
      }
    }
    if (!status.ok()) {
      if (!reservation.AnyConfirmed() &&
          (reservation.phase == ReservationPhase::kCommitting || !reservation.replaceable())) {
        // A fresh reservation: give everything back and wait for the cluster to change.
        ForgetPlacement(reservation);
        reservation.phase = ReservationPhase::kPending;
      } else {
        reservation.phase = ReservationPhase::kDegraded;
      }
      reservation.explanation = absl::StrCat("two-phase commit failed: ", status.message());
      RecordEvent(absl::StrCat(ReservationNoun(reservation.kind), " ", name, ": ",
                               reservation.explanation));
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

Reservation* HeadService::WaitUntilIdle(ReservationKind kind, const std::string& name) {
  Reservation* reservation = FindReservation(kind, name);
  while (reservation != nullptr && reservation->busy) {
    idle_.Wait(&mu_);
    reservation = FindReservation(kind, name);
  }
  return reservation;
}

void HeadService::SyncAndDescribe(ReservationKind kind, const std::string& name,
                                  absl::FunctionRef<void(const Reservation*)> describe) {
  // Another sync (the ticker's) may hold the reservation; when it lets go between two of its
  // rounds the phase can still read kCommitting although the commit went through. Sync again
  // then, so the caller is told the outcome, not that moment. Bounded: a sync always leaves
  // kCommitting (held, degraded or pending) unless another one overtakes it.
  constexpr int kAttempts = 8;
  for (int attempt = 1;; ++attempt) {
    SyncReservation(name);
    absl::MutexLock lock(&mu_);
    const Reservation* reservation = WaitUntilIdle(kind, name);
    if (reservation == nullptr || reservation->phase != ReservationPhase::kCommitting ||
        attempt == kAttempts) {
      describe(reservation);
      return;
    }
  }
}

std::vector<NodeWork> HeadService::CancelAllWork(const Reservation& reservation) const {
  NodeWorkPlan plan(Agents());
  for (size_t i = 0; i < reservation.confirmed.size(); ++i) {
    if (reservation.confirmed[i].has_value()) {
      plan.Cancel(reservation.confirmed[i]->node, static_cast<int>(i));
    }
  }
  return plan.Take();
}

void HeadService::Erase(Reservation& reservation) {
  const std::string name = reservation.name;
  ForgetPlacement(reservation);
  if (reservation.kind == ReservationKind::kPlacementGroup) {
    StoreDelete(kPlacementGroupsTable, name);
    groups_.erase(name);
  } else {
    StoreDelete(kSliceGroupsTable, name);
    slices_.erase(name);
  }
  idle_.SignalAll();
  MarkChanged();
}

}  // namespace tessera

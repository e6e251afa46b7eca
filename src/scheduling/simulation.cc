#include "scheduling/simulation.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/string_util.h"

namespace tessera {

namespace {

SchedulingRequest ToSchedulingRequest(const SimulatedRequest& spec, int64_t id) {
  SchedulingRequest r;
  r.id = RequestId(id);
  r.holder = Holder{spec.actor ? HolderKind::kActor : HolderKind::kTask, spec.name};
  r.resources = spec.resources;
  r.selectors =
      FallbackList::WithPrimary(spec.label_selector, FallbackList::FromSelectors(spec.fallbacks));
  if (spec.node_affinity.has_value()) {
    r.affinity = NodeAffinity{NodeId(spec.node_affinity->node),
                              spec.node_affinity->soft ? AffinityKind::kSoft : AffinityKind::kHard};
  }
  if (spec.local_node.has_value()) r.local_node = NodeId(*spec.local_node);
  r.strategy =
      spec.strategy == SimulatedStrategy::kSpread ? NodeRanking::kSpread : NodeRanking::kDefault;
  r.bundle_target = spec.bundle_target;
  return r;
}

ScheduleStatus PlacementStatus(ReservationStatus status) {
  switch (status) {
    case ReservationStatus::kPending: return ScheduleStatus::kPending;
    case ReservationStatus::kInfeasible: return ScheduleStatus::kInfeasible;
    default: return ScheduleStatus::kPlaced;
  }
}

}  // namespace

absl::Status Simulation::AddNodes(const std::vector<ClusterNode>& nodes) {
  for (const ClusterNode& node : nodes) {
    auto added = view_.AddNode(NodeSpecFromHardware(NodeId(node.id), node.hardware));
    if (!added.ok()) return added.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<EventOutcome> Simulation::Apply(const SimulatedEvent& e) {
  EventOutcome out;
  switch (e.kind) {
    case SimulatedEventKind::kSubmit:
      TESSERA_RETURN_IF_ERROR(Submit(e.request, out));
      return out;  // a submission changes nothing that could let waiting work fit
    case SimulatedEventKind::kCreatePlacementGroup:
      TESSERA_RETURN_IF_ERROR(CreateGroup(e.group, out));
      return out;
    case SimulatedEventKind::kReserveSlices:
      TESSERA_RETURN_IF_ERROR(ReserveSlices(e.slices, out));
      return out;
    case SimulatedEventKind::kFinish: Finish(e.target, out); break;
    case SimulatedEventKind::kAddNodes: TESSERA_RETURN_IF_ERROR(AddNodes(e.nodes)); break;
    case SimulatedEventKind::kFailNode: FailNode(e.target, out); break;
    case SimulatedEventKind::kDrainNode: DrainNode(e.target, out); break;
    case SimulatedEventKind::kRemovePlacementGroup:
    case SimulatedEventKind::kReleaseSlices: Remove(e.target, out); break;
  }
  TESSERA_RETURN_IF_ERROR(RetryWaiting(out));
  return out;
}

absl::Status Simulation::Submit(const SimulatedRequest& request, EventOutcome& out) {
  const int64_t id = static_cast<int64_t>(order_.size()) + 1;
  order_.push_back(request.name);
  Tracked& t = tracked_.emplace(request.name, Tracked{request, ToSchedulingRequest(request, id)})
                   .first->second;
  WorkAttempt attempt;
  TESSERA_RETURN_IF_ERROR(Schedule(t, attempt));
  out.submitted = std::move(attempt);
  return absl::OkStatus();
}

absl::Status Simulation::Schedule(Tracked& t, WorkAttempt& attempt) {
  auto result =
      t.request.bundle_target ? ScheduleInBundle(t.request) : scheduler_.Schedule(t.request);
  if (!result.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("request ", Quote(t.spec.name), ": ", result.status().message()));
  }
  attempt.name = t.spec.name;
  attempt.status = result->status;
  if (result->status == ScheduleStatus::kPlaced) {
    t.phase = Phase::kRunning;
    t.placement = result->placement;
    (t.request.bundle_target ? bundle_owners_ : owners_)[t.placement->allocation.id.value()] =
        t.spec.name;
    attempt.placement = t.placement;
  } else {
    t.phase = result->status == ScheduleStatus::kPending ? Phase::kWaiting : Phase::kParked;
    attempt.explanation = result->explanation;
  }
  return absl::OkStatus();
}

// A request in a reservation: the engine says whether any targeted bundle can take it (as the
// head does for a node agent's PickNode), the ledger serves it from the bundles' reservations
// (as the agent holding them does).
absl::StatusOr<ScheduleResult> Simulation::ScheduleInBundle(const SchedulingRequest& request) {
  TESSERA_RETURN_IF_ERROR(ValidateSchedulingRequest(request));
  const BundleTarget& target = *request.bundle_target;
  const BundleTargetCheck check =
      reservations_.CheckBundleTarget(target.group, target.bundle, request.resources);
  if (check.status != ScheduleStatus::kPlaced) {
    ScheduleResult refused;
    refused.status = check.status;
    refused.explanation = check.explanation;
    return refused;
  }
  ScheduleResult result = ledger_.Allocate(target, request.resources, request.holder);
  if (result.status != ScheduleStatus::kPlaced && !check.replacing.empty()) {
    result.status = ScheduleStatus::kPending;
    result.explanation = check.replacing;
  }
  return result;
}

void Simulation::Finish(const std::string& name, EventOutcome& out) {
  Tracked& t = tracked_.at(name);
  switch (t.phase) {
    case Phase::kRunning: {
      const bool in_bundle = t.request.bundle_target.has_value();
      auto released = in_bundle ? ledger_.Release(t.placement->allocation.id)
                                : view_.Release(t.placement->allocation.id);
      (in_bundle ? bundle_owners_ : owners_).erase(t.placement->allocation.id.value());
      t.phase = Phase::kFinished;
      out.finish = FinishResult::kFinished;
      if (!released.ok()) {
        out.finish_problem = std::string(released.status().message());
        return;
      }
      out.finished = Placement{t.placement->node, *released, 0, t.placement->bundle};
      if (in_bundle) out.finished_group = t.request.bundle_target->group;
      return;
    }
    case Phase::kWaiting:
    case Phase::kParked:
      t.phase = Phase::kWithdrawn;
      out.finish = FinishResult::kWithdrawn;
      return;
    case Phase::kLost: out.finish = FinishResult::kAlreadyLost; return;
    case Phase::kFinished:
    case Phase::kWithdrawn: out.finish = FinishResult::kAlreadyFinished; return;
  }
}

void Simulation::FailNode(const std::string& node, EventOutcome& out) {
  auto lost = view_.FailNode(NodeId(node));
  if (!lost.ok()) {
    out.refused = std::string(lost.status().message());
    return;
  }
  std::vector<std::string> names;
  for (const Allocation& a : *lost) {
    auto owner = owners_.find(a.id.value());
    if (owner == owners_.end()) continue;
    tracked_.at(owner->second).phase = Phase::kLost;
    names.push_back(owner->second);
    owners_.erase(owner);
  }
  // Every reservation with a bundle there: placement groups re-place them, slice groups break.
  std::set<std::string> broken_before;
  for (const auto& [name, record] : reservations_.records()) {
    if (record.status == ReservationStatus::kBroken) broken_before.insert(name);
  }
  std::vector<std::pair<ReservationKind, std::string>> touched;
  for (const ReservationOutcome& outcome :
       reservations_.OnNodeFailed(NodeId(node), "fail_node", *lost)) {
    touched.emplace_back(outcome.kind, outcome.name);
    if (outcome.kind == ReservationKind::kPlacementGroup) {
      out.replaced.push_back(DescribeReplacement(outcome));
    } else if (!broken_before.contains(outcome.name)) {
      out.broken.emplace_back(outcome.name, outcome.explanation);
    }
  }
  std::sort(touched.begin(), touched.end());
  for (const auto& [kind, name] : touched) {
    out.touched.push_back(absl::StrCat(ToAbsl(ReservationNoun(kind)), " ", name));
  }
  // Work served from bundles that were on the node is lost with them.
  for (std::string& name : SyncBundles()) names.push_back(std::move(name));
  std::sort(names.begin(), names.end());
  out.lost = names;
  Resubmit(names, out);
}

void Simulation::DrainNode(const std::string& node, EventOutcome& out) {
  if (absl::Status s = view_.SetDraining(NodeId(node), true); !s.ok()) {
    out.refused = std::string(s.message());
    return;
  }
  for (const auto& [allocation, name] : owners_) {
    if (tracked_.at(name).placement->node.value() == node) out.keeps_running.push_back(name);
  }
  std::sort(out.keeps_running.begin(), out.keeps_running.end());
}

absl::Status Simulation::CreateGroup(const PlacementGroupSpec& spec, EventOutcome& out) {
  absl::StatusOr<ReservationOutcome> outcome = reservations_.CreatePlacementGroup(spec);
  if (!outcome.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("placement group ", Quote(spec.name), ": ", outcome.status().message()));
  }
  out.reservation = DescribePlacement(*outcome);
  SyncBundles();  // its bundles can serve requests from now on (none was held before)
  return absl::OkStatus();
}

absl::Status Simulation::ReserveSlices(const DomainGroupRequest& request, EventOutcome& out) {
  absl::StatusOr<ReservationOutcome> outcome = reservations_.ReserveSlices(request);
  if (!outcome.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("slice reservation ", Quote(request.name), ": ", outcome.status().message()));
  }
  out.reservation = DescribePlacement(*outcome);
  SyncBundles();
  return absl::OkStatus();
}

void Simulation::Remove(const std::string& name, EventOutcome& out) {
  const ReservationRecord* record = reservations_.Find(name);
  if (record == nullptr) {
    out.removal = RemovalResult::kAlreadyGone;
    return;
  }
  const bool waiting = record->waiting();
  absl::StatusOr<std::vector<Allocation>> released = reservations_.Remove(name);
  if (waiting) {
    out.removal = RemovalResult::kWithdrawn;
    return;
  }
  out.removal = RemovalResult::kRemoved;
  if (released.ok()) out.released = *std::move(released);
  out.stopped = SyncBundles();  // work running in its bundles stops with it
}

absl::Status Simulation::RetryWaiting(EventOutcome& out) {
  // The head's order: broken slice groups whose hosts are back first (a simulated node never
  // comes back, but the step is the cluster's), then what waits.
  auto alive = [&](const NodeId& node) {
    const std::optional<NodeIndex> index = view_.Find(node);
    return index.has_value() && view_.node(*index).state != NodeState::kDead;
  };
  reservations_.HealBroken(alive, [](const std::string&) { return true; });
  std::set<int64_t> unparked;
  for (RequestId id : scheduler_.OnClusterChanged()) unparked.insert(id.value());
  for (const std::string& name : order_) {
    Tracked& t = tracked_.at(name);
    const bool retry = t.phase == Phase::kWaiting ||
                       (t.phase == Phase::kParked && unparked.count(t.request.id.value()) != 0);
    if (!retry || t.request.bundle_target) continue;  // bundle requests go after the groups
    WorkAttempt attempt;
    TESSERA_RETURN_IF_ERROR(Schedule(t, attempt));
    attempt.resubmitted = resubmitted_.contains(name);  // says where it went, placed or not
    if (t.phase != Phase::kRunning && !attempt.resubmitted) continue;  // nothing new to say
    out.retried_work.push_back(std::move(attempt));
  }
  for (const ReservationOutcome& outcome : reservations_.RetryWaiting()) {
    if (outcome.status != ReservationStatus::kPlaced) continue;  // still waiting: nothing new
    if (outcome.replacement) {
      out.replaced_later.push_back(DescribeReplacement(outcome));
    } else {
      out.placed_later.push_back(DescribePlacement(outcome));
    }
  }
  // Requests waiting for a bundle: after the groups, whose bundles may just have been placed.
  SyncBundles();
  for (const std::string& name : order_) {
    Tracked& t = tracked_.at(name);
    if (t.phase != Phase::kWaiting || !t.request.bundle_target) continue;
    WorkAttempt attempt;
    TESSERA_RETURN_IF_ERROR(Schedule(t, attempt));
    attempt.resubmitted = resubmitted_.contains(name);
    if (t.phase != Phase::kRunning && !attempt.resubmitted) continue;
    out.retried_in_bundles.push_back(std::move(attempt));
  }
  resubmitted_.clear();
  return absl::OkStatus();
}

void Simulation::Resubmit(const std::vector<std::string>& lost, EventOutcome& out) {
  for (const std::string& name : lost) {
    Tracked& t = tracked_.at(name);
    const int budget = t.spec.max_retries;
    if (budget >= 0 && t.retries >= budget) continue;
    ++t.retries;
    t.phase = Phase::kWaiting;
    t.placement.reset();
    resubmitted_.insert(name);
    out.resubmitted.push_back(Resubmission{name, t.retries, budget});
  }
}

std::vector<std::string> Simulation::SyncBundles() {
  std::vector<std::string> lost;
  auto drop = [&](const std::string& group, std::optional<int> bundle) {
    for (const Allocation& a : ledger_.RemoveBundles(group, bundle)) {
      auto owner = bundle_owners_.find(a.id.value());
      tracked_.at(owner->second).phase = Phase::kLost;
      lost.push_back(owner->second);
      bundle_owners_.erase(owner);
    }
  };
  for (auto it = ledger_groups_.begin(); it != ledger_groups_.end();) {
    const ReservationRecord* record = reservations_.Find(*it);
    if (record != nullptr && record->held()) {
      ++it;
      continue;
    }
    drop(*it, std::nullopt);
    it = ledger_groups_.erase(it);
  }
  for (const auto& [name, record] : reservations_.records()) {
    if (!record.held()) continue;
    ledger_groups_.insert(name);
    const std::vector<std::optional<BundlePlacement>> bundles = reservations_.Bundles(name);
    for (size_t b = 0; b < bundles.size(); ++b) {
      const int index = static_cast<int>(b);
      const std::optional<AllocationId> held = ledger_.ReservationOf(name, index);
      std::optional<BundlePlacement> now = bundles[b];
      // A broken slice group still names its lost host; nothing is reserved there.
      if (now.has_value()) {
        const std::optional<NodeIndex> node = view_.Find(now->node);
        if (!node.has_value() || view_.node(*node).state == NodeState::kDead) now.reset();
      }
      if (held && now && *held == now->allocation.id) continue;
      if (held) drop(name, index);
      if (now) {
        absl::Status added = ledger_.AddBundle(name, index, now->allocation);
        (void)added;  // cannot fail: the bundle was just dropped or never registered
      }
    }
  }
  std::sort(lost.begin(), lost.end());
  return lost;
}

ReservationPlacement Simulation::DescribePlacement(const ReservationOutcome& outcome) const {
  ReservationPlacement out;
  out.kind = outcome.kind;
  out.name = outcome.name;
  out.status = PlacementStatus(outcome.status);
  out.explanation = outcome.explanation;
  if (out.status != ScheduleStatus::kPlaced) return out;
  const ReservationRecord& record = *reservations_.Find(outcome.name);
  out.choice = record.choice;
  if (outcome.kind == ReservationKind::kPlacementGroup) {
    const std::vector<std::optional<BundlePlacement>> bundles = reservations_.Bundles(outcome.name);
    for (size_t b = 0; b < bundles.size(); ++b) {
      if (bundles[b].has_value()) out.bundles.emplace_back(static_cast<int>(b), *bundles[b]);
    }
  } else {
    out.domains = record.domains;
    if (const std::vector<DomainBundle>* hosts = reservations_.SliceHosts(outcome.name)) {
      out.hosts = *hosts;
    }
  }
  return out;
}

Replacement Simulation::DescribeReplacement(const ReservationOutcome& outcome) const {
  Replacement out;
  out.name = outcome.name;
  out.bundles = outcome.bundles;
  out.placed = outcome.status == ReservationStatus::kPlaced;
  if (!out.placed) {
    out.explanation = outcome.explanation;
    return out;
  }
  const std::vector<std::optional<BundlePlacement>> bundles = reservations_.Bundles(outcome.name);
  for (int b : outcome.bundles) {
    if (b >= 0 && b < static_cast<int>(bundles.size()) && bundles[b].has_value()) {
      out.placements.emplace_back(b, *bundles[b]);
    }
  }
  return out;
}

std::map<std::string, std::pair<Quantity, Quantity>> Simulation::Utilization() const {
  std::map<std::string, std::pair<Quantity, Quantity>> sums;  // used, total
  for (NodeIndex i = 0; i < view_.slot_count(); ++i) {
    const NodeRecord& n = view_.node(i);
    if (n.removed || n.state == NodeState::kDead) continue;
    for (const auto& [name, total] : n.total) {
      auto& [used, sum] = sums[name];
      sum = Quantity::FromRaw(sum.raw() + total.raw());
      used = Quantity::FromRaw(used.raw() + total.raw() - n.available.Get(name).raw());
    }
  }
  return sums;
}

}  // namespace tessera

#include "head/reservation.h"

#include <algorithm>
#include <thread>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "base/ignore_status.h"

namespace tessera {

v1::PlacementGroupState PlacementGroupStateOf(ReservationPhase phase) {
  switch (phase) {
    case ReservationPhase::kPending:
    case ReservationPhase::kCommitting: return v1::PLACEMENT_GROUP_STATE_PENDING;
    case ReservationPhase::kInfeasible: return v1::PLACEMENT_GROUP_STATE_INFEASIBLE;
    case ReservationPhase::kHeld: return v1::PLACEMENT_GROUP_STATE_CREATED;
    case ReservationPhase::kDegraded: return v1::PLACEMENT_GROUP_STATE_RESCHEDULING;
  }
  return v1::PLACEMENT_GROUP_STATE_PENDING;
}

v1::SliceGroupState SliceGroupStateOf(ReservationPhase phase) {
  switch (phase) {
    case ReservationPhase::kPending:
    case ReservationPhase::kCommitting: return v1::SLICE_GROUP_STATE_PENDING;
    case ReservationPhase::kInfeasible: return v1::SLICE_GROUP_STATE_INFEASIBLE;
    case ReservationPhase::kHeld: return v1::SLICE_GROUP_STATE_RESERVED;
    case ReservationPhase::kDegraded: return v1::SLICE_GROUP_STATE_BROKEN;
  }
  return v1::SLICE_GROUP_STATE_PENDING;
}

bool Reservation::AnyConfirmed() const {
  return std::any_of(confirmed.begin(), confirmed.end(),
                     [](const std::optional<BundleHold>& hold) { return hold.has_value(); });
}

std::string Reservation::ShownExplanation() const {
  if (phase == ReservationPhase::kCommitting && explanation.empty()) {
    return "reserving on the node agents";
  }
  return explanation;
}

bool Reservation::IsDemand() const {
  return phase == ReservationPhase::kPending || phase == ReservationPhase::kInfeasible ||
         (phase == ReservationPhase::kDegraded && replaceable());
}

NodeWork& NodeWorkPlan::For(const std::string& node) {
  auto [it, added] = by_node_.try_emplace(node);
  if (added) {
    it->second.node = node;
    it->second.client = agents_(node);
  }
  return it->second;
}

void NodeWorkPlan::Prepare(const std::string& node, int index, wire::ExactAllocation allocation) {
  For(node).prepare.emplace_back(index, std::move(allocation));
}

void NodeWorkPlan::Cancel(const std::string& node, int index) { For(node).cancel.push_back(index); }

std::vector<NodeWork> NodeWorkPlan::Take() {
  std::vector<NodeWork> work;
  for (auto& [node, w] : by_node_) work.push_back(std::move(w));
  by_node_.clear();
  return work;
}

namespace {

// Runs call(i) for every i in [0, n): the first on this thread, the others each on a thread of
// its own, so a round costs one agent round trip however many nodes take part. Returns when
// every call has returned.
void ForEachInParallel(size_t n, absl::FunctionRef<void(size_t)> call) {
  std::vector<std::thread> others;
  others.reserve(n > 0 ? n - 1 : 0);
  for (size_t i = 1; i < n; ++i) others.emplace_back([&call, i] { call(i); });
  if (n > 0) call(0);
  for (std::thread& t : others) t.join();
}

// The first error of `statuses` (in node order), named after its node and step.
absl::Status FirstFailure(const std::vector<const NodeWork*>& nodes,
                          const std::vector<absl::Status>& statuses, absl::string_view step) {
  for (size_t i = 0; i < statuses.size(); ++i) {
    if (!statuses[i].ok()) {
      return absl::Status(statuses[i].code(), absl::StrCat(step, " on ", nodes[i]->node,
                                                           " failed: ", statuses[i].message()));
    }
  }
  return absl::OkStatus();
}

v1::PrepareBundlesRequest PrepareRequest(const std::string& group, const NodeWork& w) {
  v1::PrepareBundlesRequest request;
  request.set_placement_group(group);
  for (const auto& [index, allocation] : w.prepare) {
    v1::BundleReservation* bundle = request.add_bundles();
    bundle->set_bundle_index(index);
    wire::AllocationToProto(allocation, bundle->mutable_allocation());
  }
  return request;
}

}  // namespace

absl::Status TwoPhaseCommit(const std::string& group, const std::vector<NodeWork>& work) {
  std::vector<const NodeWork*> nodes;  // the participants
  for (const NodeWork& w : work) {
    if (w.prepare.empty()) continue;
    if (w.client == nullptr) {
      return absl::UnavailableError(absl::StrCat("node ", w.node, " is not alive"));
    }
    nodes.push_back(&w);
  }
  // Cancelling covers every participant: a prepare that failed or timed out may still have been
  // applied.
  auto cancel_all = [&] {
    std::vector<NodeWork> prepared;
    for (const NodeWork* w : nodes) prepared.push_back(*w);
    CancelBundles(group, prepared);
  };
  // A lone participant has nobody to disagree with: it prepares and commits in one step.
  const bool one_phase = nodes.size() == 1;
  std::vector<absl::Status> statuses(nodes.size());
  ForEachInParallel(nodes.size(), [&](size_t i) {
    v1::PrepareBundlesRequest request = PrepareRequest(group, *nodes[i]);
    request.set_commit(one_phase);
    statuses[i] = nodes[i]->client->Prepare(request);
  });
  if (absl::Status failed = FirstFailure(nodes, statuses, "prepare"); !failed.ok()) {
    cancel_all();
    return failed;
  }
  if (one_phase) return absl::OkStatus();
  ForEachInParallel(nodes.size(), [&](size_t i) {
    v1::CommitBundlesRequest request;
    request.set_placement_group(group);
    for (const auto& [index, allocation] : nodes[i]->prepare) request.add_bundle_indices(index);
    statuses[i] = nodes[i]->client->Commit(request);
  });
  if (absl::Status failed = FirstFailure(nodes, statuses, "commit"); !failed.ok()) {
    cancel_all();
    return failed;
  }
  return absl::OkStatus();
}

void CancelBundles(const std::string& group, const std::vector<NodeWork>& work) {
  std::vector<std::pair<const NodeWork*, v1::CancelBundlesRequest>> calls;
  for (const NodeWork& w : work) {
    if (w.client == nullptr) continue;
    v1::CancelBundlesRequest request;
    request.set_placement_group(group);
    for (const auto& [index, allocation] : w.prepare) request.add_bundle_indices(index);
    for (int index : w.cancel) request.add_bundle_indices(index);
    if (request.bundle_indices_size() == 0) continue;
    calls.emplace_back(&w, std::move(request));
  }
  ForEachInParallel(calls.size(), [&](size_t i) {
    IgnoreStatus(calls[i].first->client->Cancel(calls[i].second),
                 "best effort: a node that cannot be reached is declared dead by the health "
                 "check, and its agent releases unknown bundles when it registers again");
  });
}

}  // namespace tessera

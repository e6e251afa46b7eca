#include "head/reservation.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tessera {

absl::string_view ReservationNoun(ReservationKind kind) {
  return kind == ReservationKind::kPlacementGroup ? "placement group" : "slice group";
}

std::string ReservationStateName(ReservationKind kind, ReservationPhase phase) {
  const bool group = kind == ReservationKind::kPlacementGroup;
  switch (phase) {
    case ReservationPhase::kPending: return "PENDING";
    case ReservationPhase::kInfeasible: return "INFEASIBLE";
    case ReservationPhase::kCommitting: return "PENDING";
    case ReservationPhase::kHeld: return group ? "CREATED" : "RESERVED";
    case ReservationPhase::kDegraded: return group ? "RESCHEDULING" : "BROKEN";
  }
  return "PENDING";
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

void NodeWorkPlan::Prepare(const std::string& node, int index, rpc::ExactAllocation allocation) {
  For(node).prepare.emplace_back(index, std::move(allocation));
}

void NodeWorkPlan::Cancel(const std::string& node, int index) { For(node).cancel.push_back(index); }

std::vector<NodeWork> NodeWorkPlan::Take() {
  std::vector<NodeWork> work;
  for (auto& [node, w] : by_node_) work.push_back(std::move(w));
  by_node_.clear();
  return work;
}

absl::Status TwoPhaseCommit(const std::string& group, const std::vector<NodeWork>& work) {
  std::vector<NodeWork> prepared;
  for (const NodeWork& w : work) {
    if (w.prepare.empty()) continue;
    if (w.client == nullptr) {
      CancelBundles(group, prepared);
      return absl::UnavailableError(absl::StrCat("node ", w.node, " is not alive"));
    }
    v1::PrepareBundlesRequest request;
    request.set_placement_group(group);
    for (const auto& [index, allocation] : w.prepare) {
      v1::BundleReservation* bundle = request.add_bundles();
      bundle->set_bundle_index(index);
      rpc::AllocationToProto(allocation, bundle->mutable_allocation());
    }
    // Cancel covers this node too: a prepare that timed out may have been applied.
    prepared.push_back(w);
    absl::Status status = w.client->Prepare(request);
    if (!status.ok()) {
      CancelBundles(group, prepared);
      return absl::Status(status.code(), absl::StrCat("prepare on ", w.node, " failed: ",
                                                      status.message()));
    }
  }
  for (const NodeWork& w : prepared) {
    v1::CommitBundlesRequest request;
    request.set_placement_group(group);
    for (const auto& [index, allocation] : w.prepare) request.add_bundle_indices(index);
    absl::Status status = w.client->Commit(request);
    if (!status.ok()) {
      CancelBundles(group, prepared);
      return absl::Status(status.code(), absl::StrCat("commit on ", w.node, " failed: ",
                                                      status.message()));
    }
  }
  return absl::OkStatus();
}

void CancelBundles(const std::string& group, const std::vector<NodeWork>& work) {
  for (const NodeWork& w : work) {
    if (w.client == nullptr) continue;
    v1::CancelBundlesRequest request;
    request.set_placement_group(group);
    for (const auto& [index, allocation] : w.prepare) request.add_bundle_indices(index);
    for (int index : w.cancel) request.add_bundle_indices(index);
    if (request.bundle_indices_size() == 0) continue;
    // Best effort: a node that cannot be reached is declared dead by the health check, and its
    // agent releases unknown bundles when it registers again.
    (void)w.client->Cancel(request);
  }
}

}  // namespace tessera

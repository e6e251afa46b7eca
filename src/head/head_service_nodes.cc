// HeadNodesService, the nodes' RPCs: registration and heartbeats (what the agent reports, converted
// for the NodeRegistry; bundles to release sent back), the node listing, and PickNode — which
// node should take a lease: a request inside a reservation goes to the agent holding the bundle
// (ClusterController::AdviseBundleTarget; that agent decides), any other is the task
// scheduler's advice over the view, excluded nodes left out.
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "head/head_service_internal.h"
#include "head/head_services.h"
#include "head/request_limits.h"
#include "metrics/scoped_timer.h"
#include "rpc/status_conversion.h"

namespace tessera {

using head_internal::Invalid;
using head_internal::InvalidText;

namespace {

// Leases outside bundles (those inside use the bundle's reservation, held in the view already).
absl::StatusOr<std::vector<ReportedLease>> LeasesFromProto(
    const google::protobuf::RepeatedPtrField<v1::LeaseInfo>& leases, bool need_ids) {
  std::vector<ReportedLease> out;
  for (int i = 0; i < leases.size(); ++i) {
    const v1::LeaseInfo& lease = leases[i];
    if (need_ids && lease.lease_id().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("leases[", i, "].lease_id: is empty"));
    }
    auto allocation =
        wire::AllocationFromProto(lease.allocation(), absl::StrCat("leases[", i, "].allocation"));
    if (!allocation.ok()) return allocation.status();
    if (!lease.placement_group().empty()) continue;
    out.push_back(ReportedLease{lease.lease_id(), *std::move(allocation)});
  }
  return out;
}

absl::StatusOr<std::vector<ReportedBundle>> BundlesFromProto(
    const google::protobuf::RepeatedPtrField<v1::HeldBundle>& bundles) {
  std::vector<ReportedBundle> out;
  for (int i = 0; i < bundles.size(); ++i) {
    if (bundles[i].placement_group().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("bundles[", i, "].placement_group: is empty"));
    }
    if (bundles[i].bundle_index() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bundles[", i, "].bundle_index: ", bundles[i].bundle_index(), " is negative"));
    }
    out.push_back(ReportedBundle{bundles[i].placement_group(), bundles[i].bundle_index()});
  }
  return out;
}

}  // namespace

namespace head_internal {

void FillNodeInfo(const ClusterController& controller, const DeviceHistory& device_history,
                  const Clock& clock, const NodeRegistry::Node& node, v1::NodeInfo* info) {
  *info->mutable_node() = node.description;
  const bool alive = node.health == NodeRegistry::Health::kAlive;
  info->set_state(alive ? v1::NODE_STATE_ALIVE : v1::NODE_STATE_DEAD);
  if (alive) {
    if (std::optional<NodeIndex> index = controller.state().view.Find(NodeId(node.id));
        index.has_value()) {
      wire::ResourcesToProto(controller.state().view.node(*index).available,
                             info->mutable_available());
    }
  }
  info->set_last_heartbeat_age_ms(absl::ToInt64Milliseconds(clock.Now() - node.last_heartbeat));
  info->set_workers(node.workers);
  if (std::optional<v1::NodeUsage> usage = device_history.Usage(node.id); usage.has_value()) {
    *info->mutable_usage() = *std::move(usage);
  }
}

}  // namespace head_internal

grpc::Status HeadNodesService::RegisterNode(grpc::ServerContext*,
                                            const v1::RegisterNodeRequest* request,
                                            v1::RegisterNodeResponse* response) {
  auto registration = wire::NodeFromProto(request->node());
  if (!registration.ok()) return Invalid(registration.status());
  if (registration->address.empty()) return InvalidText("node.address: is empty");
  // Validate everything before changing anything.
  auto leases = LeasesFromProto(request->leases(), /*need_ids=*/true);
  if (!leases.ok()) return Invalid(leases.status());
  auto bundles = BundlesFromProto(request->bundles());
  if (!bundles.ok()) return Invalid(bundles.status());
  absl::MutexLock lock(controller_.mutex());
  std::vector<size_t> release;
  absl::Status registered =
      controller_.nodes().Register(*registration, request->node(), *leases, *bundles, &release);
  if (!registered.ok()) return rpc::ToGrpcStatus(registered);
  // Bundles the head does not know: a head restart with the in-memory store lost their groups,
  // or the group was removed while the agent was away. The agent releases them.
  for (size_t i : release) *response->add_release() = request->bundles(static_cast<int>(i));
  response->set_heartbeat_interval_ms(absl::ToInt64Milliseconds(options_.heartbeat_interval));
  response->set_dead_after_ms(absl::ToInt64Milliseconds(options_.node_timeout));
  response->set_bundles_epoch(controller_.bundles_epoch());
  return grpc::Status::OK;
}

grpc::Status HeadNodesService::Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* request,
                                         v1::HeartbeatResponse* response) {
  const absl::Time arrived = clock_->Now();
  auto leases = LeasesFromProto(request->leases(), /*need_ids=*/false);
  if (!leases.ok()) return Invalid(leases.status());
  auto bundles = BundlesFromProto(request->bundles());
  if (!bundles.ok()) return Invalid(bundles.status());
  // Before the cluster lock: a heartbeat that waits behind a slow request counts from its
  // arrival.
  controller_.NoteArrival(request->node_id(), request->incarnation(), arrived);
  absl::MutexLock lock(controller_.mutex());
  std::vector<size_t> release;
  const bool known = controller_.nodes().Heartbeat(request->node_id(), request->incarnation(),
                                                   arrived, request->workers(), *leases, *bundles,
                                                   request->bundles_epoch_seen(), &release);
  response->set_known(known);
  if (!known) return grpc::Status::OK;
  device_history_.Record(request->node_id(), request->device_samples());
  if (request->has_usage()) device_history_.RecordUsage(request->node_id(), request->usage());
  for (size_t i : release) *response->add_release() = request->bundles(static_cast<int>(i));
  response->set_bundles_epoch(controller_.bundles_epoch());
  for (std::string& driver : drivers_.RecentlyGone(arrived)) {
    response->add_gone_drivers(std::move(driver));
  }
  return grpc::Status::OK;
}

grpc::Status HeadNodesService::ListNodes(grpc::ServerContext*, const v1::ListRequest* request,
                                         v1::ListNodesResponse* response) {
  // Pages by node id: a node registered or dropped meanwhile moves no other node across pages.
  constexpr std::string_view kListing = "nodes";
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  auto page = head_internal::ParsePageRequest(*request, kListing, options_.max_page_size);
  if (!page.ok()) return Invalid(page.status());
  absl::MutexLock lock(controller_.mutex());
  const auto& nodes = controller_.nodes().nodes();
  head_internal::PageFiller filler(page->size, options_.max_page_bytes);
  std::optional<std::string> resume = head_internal::AppendPage(
      nodes.upper_bound(page->after), nodes.end(), filler, response->mutable_nodes(),
      [](const auto& entry) { return entry.first; },
      [&](const auto& entry, v1::NodeInfo* out) {
        controller_.AssertHeld();  // AppendPage runs it under this function's lock
        head_internal::FillNodeInfo(controller_, device_history_, *clock_, entry.second, out);
      });
  if (resume.has_value())
    response->set_next_page_token(head_internal::PageToken(kListing, *resume));
  return grpc::Status::OK;
}

std::optional<v1::NodeInfo> HeadNodesService::NodeInfoOf(const std::string& node_id) {
  absl::MutexLock lock(controller_.mutex());
  auto it = controller_.nodes().nodes().find(node_id);
  if (it == controller_.nodes().nodes().end()) return std::nullopt;
  v1::NodeInfo info;
  head_internal::FillNodeInfo(controller_, device_history_, *clock_, it->second, &info);
  return info;
}

grpc::Status HeadNodesService::PickNode(grpc::ServerContext*, const v1::PickNodeRequest* request,
                                        v1::PickNodeResponse* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  auto parsed = wire::ResourceRequestFromProto(request->request());
  if (!parsed.ok()) return Invalid(parsed.status());
  std::set<std::string> excluded(request->exclude_node_ids().begin(),
                                 request->exclude_node_ids().end());
  absl::MutexLock lock(controller_.mutex());
  auto answer = [&](const std::string& node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(controller_.mutex()) {
    response->set_node_id(node);
    response->set_address(controller_.nodes().Find(node)->description.address());
    response->set_status(v1::PICK_STATUS_PLACED);
  };
  if (parsed->target.has_value()) {
    const wire::BundleTarget& target = *parsed->target;
    BundleTargetAdvice advice = controller_.AdviseBundleTarget(
        target.placement_group, target.bundle_index, parsed->request.resources, excluded);
    switch (advice.status) {
      case BundleTargetAdvice::Status::kPlaced: answer(advice.node); return grpc::Status::OK;
      case BundleTargetAdvice::Status::kPending:
        response->set_status(v1::PICK_STATUS_PENDING);
        break;
      case BundleTargetAdvice::Status::kInfeasible:
        response->set_status(v1::PICK_STATUS_INFEASIBLE);
        break;
    }
    response->set_explanation(advice.explanation);
    return grpc::Status::OK;
  }
  // Excluded nodes take no part in this decision; the head only advises (the agent that takes
  // the lease reports it in its next heartbeat, which mirrors it here).
  SchedulingRequest decision = parsed->request;
  for (const std::string& id : excluded) decision.excluded_nodes.push_back(NodeId(id));
  auto result = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(controller_.mutex()) {
    metrics::ScopedTimer timer(options_.latency.task_decision);
    return controller_.state().tasks.Advise(decision);
  }();
  if (!result.ok()) return Invalid(result.status());
  switch (result->status) {
    case ScheduleStatus::kPlaced: answer(result->placement->node.value()); return grpc::Status::OK;
    case ScheduleStatus::kPending: response->set_status(v1::PICK_STATUS_PENDING); break;
    case ScheduleStatus::kInfeasible: response->set_status(v1::PICK_STATUS_INFEASIBLE); break;
  }
  response->set_explanation(result->explanation);
  return grpc::Status::OK;
}

}  // namespace tessera

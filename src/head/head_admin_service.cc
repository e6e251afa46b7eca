// HeadAdminService: the cluster's status (nodes, use, slices, demand, events, the state store's
// health) for `tessera status` and the dashboard, the dashboard's logins, and the head's
// shutdown.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "head/head_services.h"
#include "rpc/status_conversion.h"

namespace tessera {

void HeadAdminService::FillSlices(v1::ListSlicesResponse* response) const {
  for (auto& [name, slice] : controller_.SliceCatalog()) *response->add_slices() = std::move(slice);
  for (const auto& [name, slice] : controller_.slices()) {
    controller_.DescribeSlice(slice, response->add_groups());
  }
}

std::map<std::string, HeadAdminService::MeasuredUse> HeadAdminService::MeasureUse(
    const v1::ClusterStatus& status) const {
  std::map<std::string, MeasuredUse> out;
  const std::map<std::string, std::vector<v1::DeviceSample>> devices = device_history_.Latest();
  for (const v1::NodeInfo& info : status.nodes()) {
    if (info.state() != v1::NODE_STATE_ALIVE) continue;
    if (info.has_usage()) {
      out["CPU"].amount += info.usage().cpu_cores();
      out["memory"].amount += static_cast<double>(info.usage().memory_bytes());
    }
    auto it = devices.find(info.node().node_id());
    if (it == devices.end()) continue;
    for (const v1::DeviceSample& sample : it->second) {
      std::optional<double> busy;
      if (sample.has_utilization()) {
        busy = sample.utilization();
      } else if (sample.has_duty_cycle()) {
        busy = sample.duty_cycle();
      }
      if (!busy.has_value()) continue;
      MeasuredUse& use = out[sample.resource()];
      use.amount += *busy;
      ++use.devices;
    }
  }
  return out;
}

grpc::Status HeadAdminService::CreateDashboardLogin(grpc::ServerContext*,
                                                    const v1::CreateDashboardLoginRequest*,
                                                    v1::CreateDashboardLoginResponse* response) {
  if (http_sessions_ == nullptr || http_address_.empty()) {
    return rpc::ToGrpcStatus(
        absl::FailedPreconditionError("this head serves no HTTP (started with --http-port -1)"));
  }
  absl::StatusOr<std::string> ticket = http_sessions_->IssueTicket();
  if (!ticket.ok()) return rpc::ToGrpcStatus(ticket.status());
  response->set_ticket(*std::move(ticket));
  response->set_http_address(http_address_);
  response->set_expires_in_s(absl::ToInt64Seconds(http_sessions_->options().ticket_lifetime));
  return grpc::Status::OK;
}

grpc::Status HeadAdminService::GetClusterStatus(grpc::ServerContext*, const v1::ListRequest*,
                                                v1::ClusterStatus* response) {
  {
    absl::MutexLock lock(controller_.mutex());
    std::map<std::string, std::pair<int64_t, int64_t>> usage;  // resource -> (used, total)
    for (const auto& [id, node] : controller_.nodes().nodes()) {
      head_internal::FillNodeInfo(controller_, device_history_, *clock_, node,
                                  response->add_nodes());
      if (node.health != NodeRegistry::Health::kAlive) continue;
      std::optional<NodeIndex> index = controller_.state().view.Find(NodeId(id));
      if (!index.has_value()) continue;
      const NodeRecord& record = controller_.state().view.node(*index);
      for (const auto& [resource, total] : record.total) {
        auto& [used, sum] = usage[resource];
        sum += total.raw();
        used += total.raw() - record.available.Get(resource).raw();
      }
    }
    const std::map<std::string, MeasuredUse> measured = MeasureUse(*response);
    for (const auto& [resource, amounts] : usage) {
      v1::ResourceUsage* out = response->add_usage();
      out->set_resource(resource);
      out->set_used_raw(amounts.first);
      out->set_total_raw(amounts.second);
      if (auto it = measured.find(resource); it != measured.end()) {
        out->set_measured(it->second.amount);
        out->set_measured_devices(it->second.devices);
      }
    }
    FillSlices(response->mutable_slices());
    auto add_demand = [&](const Reservation& reservation, const char* kind) {
      if (!reservation.IsDemand()) return;
      v1::Demand* demand = response->add_demand();
      demand->set_kind(kind);
      demand->set_name(reservation.name);
      demand->set_status(reservation.phase == ReservationPhase::kInfeasible
                             ? v1::DEMAND_STATUS_INFEASIBLE
                             : v1::DEMAND_STATUS_PENDING);
      demand->set_explanation(reservation.explanation);
    };
    for (const auto& [name, group] : controller_.groups()) {
      controller_.DescribeGroup(group, response->add_placement_groups());
      add_demand(group, "placement group");
    }
    for (const auto& [name, slice] : controller_.slices()) add_demand(slice, "slices");
  }
  for (const std::string& event : events_.List()) response->add_events(event);
  response->set_http_address(http_address_);
  const StateStoreHealth store = writer_.health();
  v1::StateStoreHealth* health = response->mutable_state_store();
  health->set_degraded(store.degraded);
  health->set_cause(store.cause);
  health->set_pending_writes(static_cast<int64_t>(store.pending));
  health->set_failed_writes(static_cast<int64_t>(store.failed));
  return grpc::Status::OK;
}

grpc::Status HeadAdminService::Shutdown(grpc::ServerContext*, const v1::ShutdownRequest*,
                                        v1::ShutdownResponse*) {
  if (options_.on_shutdown) options_.on_shutdown();
  return grpc::Status::OK;
}

}  // namespace tessera

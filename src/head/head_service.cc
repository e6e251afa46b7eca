// HeadService, the front's core: construction of the managers, the periodic checks, cluster
// status, shutdown, restore, and what a node's death or a driver's end means across managers.
// The RPCs live with their idea: head_service_nodes.cc, head_service_reservations.cc,
// head_service_jobs_kv.cc, head_actors.cc.
#include "head/head_service.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "rpc/status_conversion.h"

namespace tessera {

HeadService::HeadService(HeadServiceOptions options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : Clock::Real()),
      events_(options_.max_events, clock_),
      writer_(options_.store, &events_, options_.store_metrics),
      actor_store_(&writer_),
      drivers_(options_.driver_timeout),
      jobs_(JobTableOptions{clock_, &writer_, &events_, options_.max_ended_jobs}),
      kv_(&writer_),
      actors_(ActorDirectoryOptions{&actor_store_, clock_, options_.max_dead_actors}),
      controller_(ClusterControllerOptions{.clock = clock_,
                                           .writer = &writer_,
                                           .events = &events_,
                                           .drivers = &drivers_,
                                           .agent_clients = options_.agent_clients,
                                           .heartbeat_interval = options_.heartbeat_interval,
                                           .node_timeout = options_.node_timeout,
                                           .scheduling = options_.scheduling,
                                           .retry_interval = options_.retry_interval,
                                           .max_concurrent_syncs = options_.max_concurrent_syncs,
                                           .latency = options_.latency},
                  this),
      create_cache_(options_.request_cache_capacity),
      remove_cache_(options_.request_cache_capacity),
      reserve_cache_(options_.request_cache_capacity),
      release_cache_(options_.request_cache_capacity),
      create_refusals_(options_.request_cache_capacity),
      remove_refusals_(options_.request_cache_capacity),
      reserve_refusals_(options_.request_cache_capacity),
      release_refusals_(options_.request_cache_capacity) {}

HeadService::~HeadService() = default;

// --- what crosses managers ---

void HeadService::OnNodeDead(const std::string& node, const std::string& reason,
                             const std::vector<Allocation>& lost, std::string* event) {
  std::vector<std::string> moved;
  std::vector<std::string> broken;
  controller_.NodeDead(node, reason, lost, &moved, &broken);
  const int failed_jobs = jobs_.FailJobsOn(node, reason);
  const std::vector<std::string> actors =
      actors_.NodeDead(node, absl::StrCat("its node ", node, " was declared dead: ", reason));
  ReportActorStoreFailures();
  if (!moved.empty()) {
    absl::StrAppend(event, "; bundles of ", absl::StrJoin(moved, ", "), " are re-placed");
  }
  if (!broken.empty()) {
    absl::StrAppend(event, "; slice groups ", absl::StrJoin(broken, ", "), " are broken");
  }
  if (failed_jobs > 0) {
    absl::StrAppend(event, "; ", failed_jobs,
                    " running jobs are presumed failed (until their real end is recorded)");
  }
  if (!actors.empty()) {
    absl::StrAppend(event, "; actors ", absl::StrJoin(actors, ", "),
                    " are restarting (or died, when detached)");
  }
}

std::vector<size_t> HeadService::OnBundlesReported(const std::string& node,
                                                   const std::vector<ReportedBundle>& bundles,
                                                   std::optional<int64_t> epoch_seen) {
  return controller_.Reconcile(node, bundles, epoch_seen);
}

std::vector<std::string> HeadService::ReleaseDriver(const std::string& driver,
                                                    const std::string& why) {
  drivers_.Forget(driver);
  drivers_.NoteGone(driver, clock_->Now());  // agents free its objects (heartbeat responses)
  std::vector<std::string> released = controller_.ReleaseOwnedBy(driver);
  const std::vector<std::string> actors =
      actors_.OwnerGone(driver, absl::StrCat("its owner, driver ", driver, ", ", why));
  ReportActorStoreFailures();
  if (!released.empty() || !actors.empty()) {
    std::string event = absl::StrCat("driver ", driver, " ", why);
    if (!released.empty()) absl::StrAppend(&event, ": released ", absl::StrJoin(released, ", "));
    if (!actors.empty()) {
      absl::StrAppend(&event, released.empty() ? ": " : "; ", "actors ",
                      absl::StrJoin(actors, ", "), " died with it");
    }
    events_.Record(std::move(event), "driver");
  }
  return released;
}

void HeadService::ReportActorStoreFailures() {
  for (std::string& failure : actors_.TakeStoreFailures()) events_.Record(std::move(failure));
}

// --- periodic ---

void HeadService::CheckHealth() {
  absl::MutexLock lock(controller_.mutex());
  controller_.nodes().CheckHealth(clock_->Now());
}

void HeadService::Reconcile(bool wait) {
  // The rounds start first: a release below may wait for a busy reservation and its agents.
  controller_.Tick(wait);
  for (const std::string& driver : drivers_.TakeExpired(clock_->Now())) {
    ReleaseDriver(driver,
                  absl::StrCat("fell silent for ", absl::FormatDuration(drivers_.timeout())));
  }
  // Last: a store that does not answer holds this thread up to its retry budget.
  writer_.MaybeCheckHealth(clock_->Now(), options_.store_check_interval);
}

void HeadService::Tick() {
  CheckHealth();
  Reconcile(/*wait=*/true);
}

absl::Status HeadService::Restore() {
  std::vector<std::pair<std::string, v1::PlacementGroupInfo>> groups;  // request id -> answer
  std::vector<std::pair<std::string, v1::SliceGroupInfo>> slices;
  {
    absl::MutexLock lock(controller_.mutex());
    TESSERA_RETURN_IF_ERROR(controller_.nodes().Restore());
    TESSERA_RETURN_IF_ERROR(controller_.Restore());
    for (const auto& [name, group] : controller_.groups()) {
      if (group.request.request_id().empty()) continue;
      auto& [id, info] = groups.emplace_back(group.request.request_id(), v1::PlacementGroupInfo());
      controller_.DescribeGroup(group, &info);
    }
    for (const auto& [name, slice] : controller_.slices()) {
      if (slice.request.request_id().empty()) continue;
      auto& [id, info] = slices.emplace_back(slice.request.request_id(), v1::SliceGroupInfo());
      controller_.DescribeSlice(slice, &info);
    }
  }
  // A create the previous head answered, retried to this one (its client did not hear the
  // answer), is answered with the group it made instead of making a second one. Run stores the
  // answer; what it returns is that same answer.
  for (const auto& group : groups) {
    create_cache_.Run(group.first, [&] { return CreateResult{grpc::Status::OK, group.second}; });
  }
  for (const auto& slice : slices) {
    reserve_cache_.Run(slice.first, [&] { return ReserveResult{grpc::Status::OK, slice.second}; });
  }
  TESSERA_RETURN_IF_ERROR(jobs_.Restore());
  TESSERA_RETURN_IF_ERROR(actors_.Restore());
  ReportActorStoreFailures();
  // As the owners of reservations: a whole driver timeout to call this head.
  for (const std::string& owner : actors_.LiveOwners()) drivers_.NoteAlive(owner, clock_->Now());
  return absl::OkStatus();
}

// --- status ---

void HeadService::FillNodeInfo(const NodeRegistry::Node& node, v1::NodeInfo* info) const {
  *info->mutable_node() = node.description;
  const bool alive = node.health == NodeRegistry::Health::kAlive;
  info->set_state(alive ? v1::NODE_STATE_ALIVE : v1::NODE_STATE_DEAD);
  if (alive) {
    if (std::optional<NodeIndex> index = controller_.state().view.Find(NodeId(node.id));
        index.has_value()) {
      wire::ResourcesToProto(controller_.state().view.node(*index).available,
                             info->mutable_available());
    }
  }
  info->set_last_heartbeat_age_ms(absl::ToInt64Milliseconds(clock_->Now() - node.last_heartbeat));
  info->set_workers(node.workers);
  if (std::optional<v1::NodeUsage> usage = device_history_.Usage(node.id); usage.has_value()) {
    *info->mutable_usage() = *std::move(usage);
  }
}

void HeadService::FillSlices(v1::ListSlicesResponse* response) const {
  for (auto& [name, slice] : controller_.SliceCatalog()) *response->add_slices() = std::move(slice);
  for (const auto& [name, slice] : controller_.slices()) {
    controller_.DescribeSlice(slice, response->add_groups());
  }
}

std::map<std::string, HeadService::MeasuredUse> HeadService::MeasureUse(
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

grpc::Status HeadService::CreateDashboardLogin(grpc::ServerContext*,
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

grpc::Status HeadService::GetClusterStatus(grpc::ServerContext*, const v1::ListRequest*,
                                           v1::ClusterStatus* response) {
  {
    absl::MutexLock lock(controller_.mutex());
    std::map<std::string, std::pair<int64_t, int64_t>> usage;  // resource -> (used, total)
    for (const auto& [id, node] : controller_.nodes().nodes()) {
      FillNodeInfo(node, response->add_nodes());
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

grpc::Status HeadService::Shutdown(grpc::ServerContext*, const v1::ShutdownRequest*,
                                   v1::ShutdownResponse*) {
  if (options_.on_shutdown) options_.on_shutdown();
  return grpc::Status::OK;
}

grpc::Status HeadService::ListEvents(grpc::ServerContext*, const v1::ListEventsRequest* request,
                                     v1::ListEventsResponse* response) {
  constexpr int kMaxEvents = 1000;
  const int limit =
      request->limit() <= 0 || request->limit() > kMaxEvents ? kMaxEvents : request->limit();
  int64_t next = request->after();
  for (const HeadEvent& event : events_.Since(request->after(), limit, &next)) {
    v1::HeadEventInfo* info = response->add_events();
    info->set_seq(event.seq);
    info->set_time_ms(absl::ToUnixMillis(event.time));
    info->set_kind(event.kind);
    info->set_message(event.message);
    info->set_notice(event.notice);
  }
  response->set_next(next);
  return grpc::Status::OK;
}

}  // namespace tessera

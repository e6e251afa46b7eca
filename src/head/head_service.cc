// HeadService, the facade: construction, the event log, cluster status, shutdown and the
// periodic Tick that drives health checks and reconciliation. The RPCs live with their idea:
// head_nodes.cc (registry, health), head_pick_node.cc, head_reservations.cc (two-phase commit for
// either kind), head_placement_groups.cc, head_slice_groups.cc, head_jobs_kv.cc.
#include "head/head_service.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tessera {

HeadService::HeadService(HeadServiceOptions options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : Clock::Real()),
      tasks_(&view_),
      groups_scheduler_(&view_),
      slices_scheduler_(&view_),
      create_cache_(options_.request_cache_capacity),
      remove_cache_(options_.request_cache_capacity),
      reserve_cache_(options_.request_cache_capacity),
      release_cache_(options_.request_cache_capacity) {
  absl::MutexLock lock(&mu_);
  last_retry_ = clock_->Now();
}

HeadService::~HeadService() = default;

std::vector<std::string> HeadService::events() const {
  absl::MutexLock lock(&mu_);
  return std::vector<std::string>(events_.begin(), events_.end());
}

void HeadService::RecordEvent(std::string event) {
  events_.push_back(std::move(event));
  while (events_.size() > options_.max_events) events_.pop_front();
}

grpc::Status HeadService::GetClusterStatus(grpc::ServerContext*, const v1::ListRequest*,
                                           v1::ClusterStatus* response) {
  absl::MutexLock lock(&mu_);
  std::map<std::string, std::pair<int64_t, int64_t>> usage;  // resource -> (used, total)
  for (const auto& [id, node] : nodes_) {
    FillNodeInfo(node, response->add_nodes());
    if (node.health != NodeHealth::kAlive) continue;
    std::optional<NodeIndex> index = view_.Find(NodeId(id));
    if (!index.has_value()) continue;
    const NodeRecord& record = view_.node(*index);
    for (const auto& [resource, total] : record.total) {
      auto& [used, sum] = usage[resource];
      sum += total.raw();
      used += total.raw() - record.available.Get(resource).raw();
    }
  }
  for (const auto& [resource, amounts] : usage) {
    v1::ResourceUsage* out = response->add_usage();
    out->set_resource(resource);
    out->set_used_raw(amounts.first);
    out->set_total_raw(amounts.second);
  }
  FillSlices(response->mutable_slices());
  auto add_demand = [&](const Reservation& reservation, const char* kind) {
    if (!reservation.IsDemand()) return;
    v1::Demand* demand = response->add_demand();
    demand->set_kind(kind);
    demand->set_name(reservation.name);
    demand->set_status(reservation.phase == ReservationPhase::kInfeasible ? "infeasible"
                                                                          : "pending");
    demand->set_explanation(reservation.explanation);
  };
  for (const auto& [name, group] : groups_) {
    FillGroupInfo(group, response->add_placement_groups());
    add_demand(group, "placement group");
  }
  for (const auto& [name, slice] : slices_) add_demand(slice, "slices");
  for (const std::string& event : events_) response->add_events(event);
  return grpc::Status::OK;
}

grpc::Status HeadService::Shutdown(grpc::ServerContext*, const v1::ShutdownRequest*,
                                   v1::ShutdownResponse*) {
  if (options_.on_shutdown) options_.on_shutdown();
  return grpc::Status::OK;
}

// --- health and reconciliation ---

void HeadService::Tick() {
  std::vector<std::string> to_sync;
  std::vector<std::pair<std::string, std::vector<NodeWork>>> healing;  // slice -> cancels
  std::vector<std::string> gone_drivers;
  {
    absl::MutexLock lock(&mu_);
    absl::Time now = clock_->Now();
    CheckHealth(now);
    gone_drivers = TakeExpiredDrivers(now);
    if (changed_ || now - last_retry_ >= options_.retry_interval) {
      changed_ = false;
      last_retry_ = now;
      std::vector<RescheduleReport> reports = groups_scheduler_.OnClusterChanged();
      for (const RescheduleReport& report : reports) {
        for (auto& [name, group] : groups_) {
          if (group.scheduled == report.id && !report.placed) group.explanation = report.explanation;
        }
      }
      auto retry = [&](Reservation& reservation) {
        if (reservation.busy) return;
        if (reservation.phase != ReservationPhase::kPending &&
            reservation.phase != ReservationPhase::kInfeasible) {
          return;
        }
        const ReservationPhase phase = reservation.phase;
        const std::string explanation = reservation.explanation;
        TryPlace(reservation);
        if (reservation.phase != phase || reservation.explanation != explanation) {
          Persist(reservation);
        }
      };
      for (auto& [name, group] : groups_) retry(group);
      for (auto& [name, slice] : slices_) retry(slice);
    }
    // A broken slice group whose hosts are all back (their agents registered again) is reserved
    // anew: its remaining bundles are given back and it waits for placement like a new one (the
    // same slice again when it is intact and free, else another).
    for (auto& [name, slice] : slices_) {
      if (slice.busy || slice.phase != ReservationPhase::kDegraded || slice.bundles.empty()) {
        continue;
      }
      const bool all_back = std::all_of(
          slice.bundles.begin(), slice.bundles.end(), [&](const DomainBundle& bundle) {
            auto node = nodes_.find(bundle.node.value());
            return node != nodes_.end() && node->second.health == NodeHealth::kAlive;
          });
      if (!all_back) continue;
      healing.emplace_back(name, CancelAllWork(slice));
      ForgetPlacement(slice);
      slice.phase = ReservationPhase::kPending;
      slice.explanation = "its hosts are back; reserving it again";
      RecordEvent(absl::StrCat("slice group ", name, ": its hosts are back; it is reserved again"));
      Persist(slice);
      MarkChanged();
    }
    auto wants_sync = [](const Reservation& reservation) {
      return !reservation.busy &&
             (reservation.phase == ReservationPhase::kCommitting ||
              (reservation.phase == ReservationPhase::kDegraded && reservation.replaceable()));
    };
    for (const auto& [name, group] : groups_) {
      if (wants_sync(group)) to_sync.push_back(name);
    }
    for (const auto& [name, slice] : slices_) {
      if (wants_sync(slice)) to_sync.push_back(name);
    }
  }
  for (const auto& [name, work] : healing) CancelBundles(name, work);
  for (const std::string& name : to_sync) SyncReservation(name);
  for (const std::string& driver : gone_drivers) {
    (void)ReleaseOwnedBy(driver, absl::StrCat("fell silent for ",
                                              absl::FormatDuration(options_.driver_timeout)));
  }
}

}  // namespace tessera

#include "serve_runtime/deployment_router.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/ignore_status.h"
#include "base/log_line.h"
#include "base/string_util.h"

namespace tessera::serve {
namespace {

constexpr char kProbeMethod[] = "get_num_ongoing_requests";

// Ray's BackPressureError text (as the router's own, request_router.cc).
absl::Status BackPressure(int64_t queued, int64_t max_queued) {
  return absl::ResourceExhaustedError(
      absl::StrCat("Request dropped due to backpressure (num_queued_requests=", queued,
                   ", max_queued_requests=", max_queued, ")."));
}

absl::Status CheckOptions(const DeploymentRouterOptions& options) {
  if (options.runtime == nullptr || options.replica_sets == nullptr) {
    return absl::InvalidArgumentError(
        "a deployment router needs a runtime and a replica set source");
  }
  if (options.application.empty() || options.source.empty()) {
    return absl::InvalidArgumentError("a deployment router needs an application and a source");
  }
  if (options.clock == nullptr)
    return absl::InvalidArgumentError("a deployment router needs a clock");
  if (options.watch_wait <= absl::ZeroDuration() || options.watch_retry <= absl::ZeroDuration() ||
      options.report_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "a deployment router's watch_wait, watch_retry and report_interval must be positive");
  }
  return absl::OkStatus();
}

std::vector<RouterReplica> RouterReplicas(const v1::GetServeReplicasResponse& response) {
  std::vector<RouterReplica> replicas;
  replicas.reserve(response.replicas_size());
  for (const v1::ServeReplica& replica : response.replicas()) {
    replicas.push_back(RouterReplica{
        .replica_id = replica.replica_id(),
        .node_id = replica.node_id(),
        .availability_zone = "",
        .max_ongoing_requests = replica.max_ongoing_requests(),
        .multiplexed_model_ids = std::vector<std::string>(replica.multiplexed_model_ids().begin(),
                                                          replica.multiplexed_model_ids().end())});
  }
  return replicas;
}

}  // namespace

void DeploymentRouter::Prober::Probe(const std::string& replica_id, absl::Time deadline,
                                     ProbeCallback callback) {
  const absl::Duration timeout = std::max(deadline - clock_->Now(), absl::ZeroDuration());
  runtime_->Call(replica_id, kProbeMethod, std::nullopt, timeout,
                 [replica_id, callback = std::move(callback)](absl::StatusOr<std::string> result) {
                   if (!result.ok()) {
                     // The runtime's Unavailable (and NotFound) is a dead actor: the router
                     // drops the replica; anything else skips it for this attempt.
                     const bool died =
                         absl::IsUnavailable(result.status()) || absl::IsNotFound(result.status());
                     callback(died ? ReplicaDiedError(replica_id) : result.status());
                     return;
                   }
                   int64_t queue_len = 0;
                   if (!absl::SimpleAtoi(*result, &queue_len) || queue_len < 0) {
                     callback(absl::InternalError(absl::StrCat("replica ", replica_id, " answered ",
                                                               kProbeMethod, " with ",
                                                               Quote(*result), ", not a count")));
                     return;
                   }
                   callback(ProbeReply{.queue_len = queue_len});
                 });
}

DeploymentRouter::DeploymentRouter(DeploymentRouterOptions options)
    : options_(std::move(options)), prober_(options_.runtime, options_.clock) {}

absl::StatusOr<std::unique_ptr<DeploymentRouter>> DeploymentRouter::Create(
    DeploymentRouterOptions options) {
  if (absl::Status checked = CheckOptions(options); !checked.ok()) return checked;
  std::unique_ptr<DeploymentRouter> router(new DeploymentRouter(std::move(options)));
  // No cap in the router itself: the deployment's max_queued_requests is learned (and may
  // change) later, so Route enforces it.
  absl::StatusOr<std::unique_ptr<PowerOfTwoChoicesRouter>> created =
      PowerOfTwoChoicesRouter::Create(
          RouterOptions{.clock = router->options_.clock,
                        .prober = &router->prober_,
                        .max_queued_requests = -1,
                        .self_node_id = router->options_.self_node_id,
                        .self_availability_zone = router->options_.self_availability_zone,
                        .prefer_local_node = router->options_.prefer_local_node,
                        .prefer_local_az = router->options_.prefer_local_az,
                        .seed = router->options_.seed});
  if (!created.ok()) return created.status();
  {
    absl::MutexLock lock(&router->mu_);
    router->router_ = *std::move(created);
    // From now, not from when the reporter's thread first runs.
    router->next_report_ = router->options_.clock->Now() + router->options_.report_interval;
  }
  DeploymentRouter* self = router.get();
  router->watcher_ = std::thread([self] { self->Watch(); });
  router->reporter_ = std::thread([self] { self->ReportLoop(); });
  return router;
}

DeploymentRouter::~DeploymentRouter() { Stop(); }

void DeploymentRouter::Stop() {
  std::unique_ptr<PowerOfTwoChoicesRouter> router;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    router = std::move(router_);
  }
  // Outside the lock: its thread cancels what waits, and those callbacks may call us.
  router.reset();
  if (watcher_.joinable()) watcher_.join();
  if (reporter_.joinable()) reporter_.join();
}

RouteCallback DeploymentRouter::Counted(RouteCallback callback) {
  return [this, callback = std::move(callback)](absl::StatusOr<std::string> replica) {
    if (replica.ok()) {
      absl::MutexLock lock(&mu_);
      ++ongoing_;
    }
    callback(std::move(replica));
  };
}

absl::StatusOr<DeploymentRouter::Ticket> DeploymentRouter::Route(RouteRequest request,
                                                                 RouteCallback callback) {
  if (!callback) return Ticket{0};
  absl::MutexLock lock(&mu_);
  if (router_ == nullptr) {
    return absl::CancelledError(
        absl::StrCat("the router of application ", options_.application, " is stopped"));
  }
  if (max_queued_requests_ >= 1) {
    const int64_t queued = router_->NumQueued();
    if (queued >= max_queued_requests_) return BackPressure(queued, max_queued_requests_);
  }
  const Ticket ticket = router_->Route(std::move(request), Counted(std::move(callback)));
  if (!cold_start_reported_ && router_->HasQueuedWorkWithoutReplicas()) report_now_ = true;
  return ticket;
}

bool DeploymentRouter::Cancel(Ticket ticket) {
  absl::MutexLock lock(&mu_);
  return router_ != nullptr && router_->Cancel(ticket);
}

void DeploymentRouter::Finished(const std::string& replica_id) {
  absl::MutexLock lock(&mu_);
  ongoing_ = std::max<int64_t>(0, ongoing_ - 1);
  if (router_ != nullptr) router_->OnRequestFinished(replica_id);
}

DeploymentRouter::Ticket DeploymentRouter::Rejected(const std::string& replica_id,
                                                    RouteRequest request, RouteCallback callback) {
  if (!callback) return 0;
  {
    absl::MutexLock lock(&mu_);
    ongoing_ = std::max<int64_t>(0, ongoing_ - 1);
    if (router_ != nullptr) {
      auto known = replicas_.find(replica_id);
      // A replica rejects at its max_ongoing_requests: that is its queue length now.
      const int64_t queue_len = known == replicas_.end() ? 1 : known->second.max_ongoing_requests();
      return router_->OnReplicaRejected(replica_id, queue_len, std::move(request),
                                        Counted(std::move(callback)));
    }
  }
  callback(absl::CancelledError(
      absl::StrCat("the router of application ", options_.application, " is stopped")));
  return 0;
}

void DeploymentRouter::Died(const std::string& replica_id) {
  absl::MutexLock lock(&mu_);
  if (router_ != nullptr) router_->OnReplicaDied(replica_id);
}

int64_t DeploymentRouter::ongoing() const {
  absl::MutexLock lock(&mu_);
  return ongoing_;
}

uint64_t DeploymentRouter::replica_set_version() const {
  absl::MutexLock lock(&mu_);
  return version_;
}

RouterStats DeploymentRouter::Stats() const {
  absl::MutexLock lock(&mu_);
  return router_ == nullptr ? RouterStats{} : router_->Stats();
}

bool DeploymentRouter::SleepUntilLocked(absl::Time deadline) {
  auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
  options_.clock->AwaitWithDeadline(mu_, absl::Condition(&stopping), deadline);
  return stopping_;
}

void DeploymentRouter::Watch() {
  uint64_t known = 0;
  bool first = true;  // the first answer is applied whatever its version
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    absl::StatusOr<v1::GetServeReplicasResponse> replicas = options_.replica_sets->GetReplicas(
        options_.application, options_.deployment, known, options_.watch_wait);
    if (replicas.ok()) {
      if (first || replicas->version() != known) Apply(*replicas);
      first = false;
      known = replicas->version();
      continue;
    }
    // The application or deployment is gone (or the source cannot be reached): route to no
    // replica until it is back, and ask again a little later.
    if (absl::IsNotFound(replicas.status())) {
      Forget();
      known = 0;
      first = true;
    }
    absl::MutexLock lock(&mu_);
    if (SleepUntilLocked(options_.clock->Now() + options_.watch_retry)) return;
  }
}

void DeploymentRouter::Apply(const v1::GetServeReplicasResponse& replicas) {
  absl::MutexLock lock(&mu_);
  if (router_ == nullptr) return;
  if (absl::Status updated = router_->UpdateReplicas(RouterReplicas(replicas)); !updated.ok()) {
    // A set the router refuses changes nothing; the next one may be right.
    LogLine(absl::StrCat("serve: application ", options_.application, ": replica set ",
                         replicas.version(), " refused: ", updated.message()));
    return;
  }
  replicas_.clear();
  for (const v1::ServeReplica& replica : replicas.replicas()) {
    replicas_[replica.replica_id()] = replica;
  }
  has_replicas_ = replicas.replicas_size() > 0;
  if (has_replicas_) cold_start_reported_ = false;
  max_queued_requests_ = replicas.max_queued_requests();
  deployment_ = replicas.deployment();
  version_ = replicas.version();
  if (!cold_start_reported_ && router_->HasQueuedWorkWithoutReplicas()) report_now_ = true;
}

std::optional<v1::ServeReplica> DeploymentRouter::Replica(const std::string& replica_id) const {
  absl::MutexLock lock(&mu_);
  auto found = replicas_.find(replica_id);
  if (found == replicas_.end()) return std::nullopt;
  return found->second;
}

void DeploymentRouter::Forget() {
  absl::MutexLock lock(&mu_);
  if (router_ == nullptr || !has_replicas_) return;
  IgnoreStatus(router_->UpdateReplicas({}), "an empty replica set is always valid");
  replicas_.clear();
  has_replicas_ = false;
}

void DeploymentRouter::ReportLoop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    auto due = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || report_now_; };
    options_.clock->AwaitWithDeadline(mu_, absl::Condition(&due), next_report_);
    if (stopping_) return;
    const absl::Time now = options_.clock->Now();
    if (!report_now_ && now < next_report_) continue;
    const bool cold_start = report_now_;
    report_now_ = false;
    if (now >= next_report_) next_report_ = now + options_.report_interval;
    // Nothing is reported before the source named the deployment (the first replica set, which
    // asks again for a cold start still waiting).
    if (deployment_.empty() || router_ == nullptr) continue;
    if (cold_start) cold_start_reported_ = true;
    v1::ServeAutoscalingSample sample;
    sample.set_application(options_.application);
    sample.set_deployment(deployment_);
    sample.set_source(options_.source);
    sample.set_ongoing_requests(static_cast<double>(ongoing_));
    sample.set_queued_requests(static_cast<double>(router_->NumQueued()));
    mu_.Unlock();
    options_.replica_sets->Report(sample);
    mu_.Lock();
  }
}

}  // namespace tessera::serve

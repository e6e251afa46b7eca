// DeploymentRouter: one caller's router for one deployment of one application (the proxy has one
// per application it routes HTTP to; a handle, one per deployment it calls). It is a
// PowerOfTwoChoicesRouter (serve/request_router.h) fed from a ReplicaSetSource and probing
// replicas through a ReplicaRuntime:
//
// - a watcher thread long-polls ReplicaSetSource::GetReplicas and hands each new replica set to
//   the router, with the deployment's max_queued_requests (which Route enforces: Ray's
//   BackPressureError past it);
// - the router's probe is the replica's get_num_ongoing_requests() (ReplicaRuntime::Call, its
//   int result as decimal text); a replica whose actor died (Unavailable) is dropped until the
//   next replica set names it again;
// - a reporter thread sends the caller's ongoing requests (assigned, not yet finished) and the
//   queued ones to ReplicaSetSource::Report every report_interval (Ray's 10 s), and at once when
//   a request queues while there is no replica at all (the cold start, reference §4.4).
//
//   auto router = DeploymentRouter::Create({.application = "app", .source = "proxy:n1",
//                                           .runtime = &runtime, .replica_sets = &controller});
//   absl::StatusOr<Ticket> t = (*router)->Route({.request_id = id}, [&](auto replica) {
//     ... call *replica, then (*router)->Finished(*replica), or Rejected(...) when it was full
//   });
//   (*router)->Stop();  // before the last reference goes
//
// Threading: thread-safe. Three threads of its own (the router's, the watcher, the reporter)
// until Stop. RouteCallbacks run on the router's thread, outside every lock: they may call
// Route, Cancel, Finished and Rejected, must not block long (other requests wait behind them)
// and must not call Stop. Stop runs on a thread of the owner's, never inside a callback; it
// returns once the watcher's poll in flight (at most watch_wait) has returned. Cost: a Route is
// the router's (O(1) expected with cached queue lengths) plus one mutex; a replica set is
// O(replicas); one Report per report_interval.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "serve/request_router.h"
#include "serve_runtime/replica_runtime.h"
#include "serve_runtime/replica_set_source.h"

namespace tessera::serve {

struct DeploymentRouterOptions {
  std::string application;
  std::string deployment;  // "" the application's ingress
  // Who reports (stable per caller): "proxy:<node id>", "handle:<driver>:<handle>".
  std::string source;
  ReplicaRuntime* runtime = nullptr;         // not owned; required; outlives the router
  ReplicaSetSource* replica_sets = nullptr;  // not owned; required; outlives the router
  Clock* clock = Clock::Real();              // not owned
  // Locality, as RouterOptions's (proxies prefer their node and zone).
  std::string self_node_id;
  std::string self_availability_zone;
  bool prefer_local_node = false;
  bool prefer_local_az = false;
  // The watcher's long poll, and its wait after a failed one.
  absl::Duration watch_wait = absl::Seconds(5);
  absl::Duration watch_retry = absl::Seconds(1);
  // RAY_SERVE_HANDLE_AUTOSCALING_METRIC_PUSH_INTERVAL_S.
  absl::Duration report_interval = absl::Seconds(10);
  uint64_t seed = 0;  // the router's sampling (tests fix it)
};

class DeploymentRouter {
 public:
  using Ticket = PowerOfTwoChoicesRouter::Ticket;

  // InvalidArgument, one line, for a missing runtime or source, an empty application or source,
  // or durations that are not positive. Starts the threads.
  static absl::StatusOr<std::unique_ptr<DeploymentRouter>> Create(DeploymentRouterOptions options);
  ~DeploymentRouter();  // Stop()
  DeploymentRouter(const DeploymentRouter&) = delete;
  DeploymentRouter& operator=(const DeploymentRouter&) = delete;

  // Queues `request` (an empty callback queues nothing and returns 0). `callback` gets the
  // replica chosen, or Cancelled (Cancel, or Stop came first), from the router's thread. With
  // max_queued_requests requests waiting already: ResourceExhausted with Ray's BackPressureError
  // text, at once, and the callback is never called; after Stop: Cancelled, the same way.
  absl::StatusOr<Ticket> Route(RouteRequest request, RouteCallback callback)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Drops a request still waiting (its callback gets Cancelled): true; false once assigned.
  bool Cancel(Ticket ticket) ABSL_LOCKS_EXCLUDED(mu_);
  // A request Route gave `replica_id` ended, however it ended.
  void Finished(const std::string& replica_id) ABSL_LOCKS_EXCLUDED(mu_);
  // `replica_id` answered that it is full (at its max_ongoing_requests): the request waits
  // again, first in line, under the ticket returned (0 after Stop: the callback then gets
  // Cancelled); it counts as ongoing no more.
  Ticket Rejected(const std::string& replica_id, RouteRequest request, RouteCallback callback)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A request Route gave `replica_id` found its actor dead (Unavailable before the replica
  // answered): the replica is routed around until the next replica set names it again. The
  // request itself still ends with Finished, or waits again with Rejected.
  void Died(const std::string& replica_id) ABSL_LOCKS_EXCLUDED(mu_);

  // Requests assigned a replica and not yet Finished (or Rejected).
  int64_t ongoing() const ABSL_LOCKS_EXCLUDED(mu_);
  // The version of the last replica set applied (0: none yet).
  uint64_t replica_set_version() const ABSL_LOCKS_EXCLUDED(mu_);
  // Replica `replica_id` of the newest replica set (its actor and owner: where to send the
  // request Route chose it for); nullopt when that set does not name it.
  std::optional<v1::ServeReplica> Replica(const std::string& replica_id) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The router's figures (zeros after Stop).
  RouterStats Stats() const ABSL_LOCKS_EXCLUDED(mu_);

  // Stops the threads; waiting requests get Cancelled. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The router's probe: get_num_ongoing_requests() of the replica through the runtime.
  class Prober : public ReplicaProber {
   public:
    Prober(ReplicaRuntime* runtime, Clock* clock) : runtime_(runtime), clock_(clock) {}
    void Probe(const std::string& replica_id, absl::Time deadline, ProbeCallback callback) override;

   private:
    ReplicaRuntime* const runtime_;
    Clock* const clock_;
  };

  explicit DeploymentRouter(DeploymentRouterOptions options);

  void Watch() ABSL_LOCKS_EXCLUDED(mu_);
  void Apply(const v1::GetServeReplicasResponse& replicas) ABSL_LOCKS_EXCLUDED(mu_);
  void Forget() ABSL_LOCKS_EXCLUDED(mu_);
  void ReportLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // Waits on the clock until `deadline` or Stop; true when stopping.
  bool SleepUntilLocked(absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  RouteCallback Counted(RouteCallback callback);

  const DeploymentRouterOptions options_;
  Prober prober_;

  mutable absl::Mutex mu_;
  // Every use of the router is under mu_ (its calls are short and never call back inline), so
  // Stop can take it away and destroy it outside the lock while callbacks still come.
  std::unique_ptr<PowerOfTwoChoicesRouter> router_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t max_queued_requests_ ABSL_GUARDED_BY(mu_) = -1;
  // The deployment the source resolved ("" until the first replica set).
  std::string deployment_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  // The replica set's replicas by id: their addresses (Replica) and max_ongoing_requests (the
  // queue length a rejection stands for).
  absl::flat_hash_map<std::string, v1::ServeReplica> replicas_ ABSL_GUARDED_BY(mu_);
  bool has_replicas_ ABSL_GUARDED_BY(mu_) = false;
  int64_t ongoing_ ABSL_GUARDED_BY(mu_) = 0;
  bool report_now_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time next_report_ ABSL_GUARDED_BY(mu_);
  // A cold start was reported at once already (until replicas come).
  bool cold_start_reported_ ABSL_GUARDED_BY(mu_) = false;

  std::thread watcher_;
  std::thread reporter_;
};

}  // namespace tessera::serve

// ServeController: the serve controller the head's process hosts (docs/serve.md; the serving
// reference's §1.3, §3 and §4). It owns Serve's start options, every application (the spec its
// client deployed and one DeploymentStateMachine per deployment), the route table and each
// deployment's replica set, keeps them in the head's StateStore (table "serve",
// serve_records.h), and drives the replicas through a ReplicaRuntime.
//
//   Deploy     checks the whole request before it changes anything: application names (not
//              empty, unique), route prefixes (application_state.h's rules, unique across the
//              live applications), every deployment (its options as a DeploymentTarget, which
//              must be valid; num_replicas >= 1 unless it autoscales), the ingress among them,
//              and Serve's start options (they cannot change while Serve runs:
//              FailedPrecondition). Then it records the goal: a new application, or an update in
//              which each deployment's machine gets its new target (an unchanged one is left as
//              it is, so deploying the same config again restarts nothing) and deployments left
//              out are deleted; replace_all deletes the applications the request does not name.
//              The first deploy starts Serve. Answers once the goal is persisted.
//   Delete     applications go DELETING: their replicas are stopped, then they are forgotten.
//   Shutdown   deletes every application; Serve is not started once every replica is stopped.
//   Status     serve.status()'s shape (v1::ServeStatus): proxies (the head's, as
//              SetProxyStatus reports it, then the nodes'), applications with their status
//              (application_state.h), deployments with theirs (DeploymentStateMachine::Status),
//              and each deployment's replicas for the dashboard (state, node, actor, pid, why
//              one waits to be placed).
//   proxies    with options.proxies.runtime, the proxies of the nodes (proxy_manager.h): each
//              control loop tells the ProxyManager Serve's start options (while it runs) and
//              the nodes its replicas are on (placed, not stopping), after the actions.
//   the loop   a thread of its own runs RunControlLoopOnce every control_loop_period (0.1 s):
//              Tick() on every machine under the lock, then the actions carried out through the
//              ReplicaRuntime outside it (start, check_health, reconfigure_json,
//              prepare_for_shutdown then kill, kill). The runtime's answers come back on its
//              threads as the machines' events; each change is persisted when the machine's
//              records_generation moved. With a registry, the RUNNING replicas are the ones
//              whose own metrics are relayed, and every metrics_collect_period they are asked
//              for them (ReplicaMetricsCollector). Every death_check_period the RUNNING
//              replicas' actors are looked at (ReplicaRuntime::DeathOf): a dead one is replaced.
//   routers    ReplicaSetSource: per deployment, its RUNNING replicas whose address is known,
//              with their multiplexed model ids, under a version that moves at each change
//              (GetReplicas waits for a change: long poll); the route table likewise
//              (GetRoutes); Report feeds the autoscaling signal.
//   Recover    a controller started by a restarted head reads the records back: machines are
//              rebuilt with DeploymentStateMachine::Recover, then brought to their
//              application's recorded goal; each replica is looked up (ReplicaRuntime::Find):
//              found, its address is known and it stays RECOVERING until its first health
//              check; gone, it is replaced. Stop() leaves the replicas running for that.
//
// Persistence: a write a caller is answered on (Deploy, Delete, Shutdown) is made before memory
// changes; when the store refuses it the call fails UNAVAILABLE and nothing changes. The
// controller's own writes (a deployment's records after an event, a removal) are retried at
// the next control loop while the store fails, with one log line per outage. A record that
// cannot be read back is skipped with a log line.
//
// Threading: thread-safe. One mutex guards every application, machine, replica set, the route
// table, the proxies and the start options; store writes are made under it (as the head's
// tables do). No ReplicaRuntime call is made with it held, and the runtime's callbacks take it,
// so they may come on any thread, also after the controller is gone (then they do nothing).
// on_serve_state runs outside it, one call at a time, and must not call Deploy, Delete,
// Shutdown or RunControlLoopOnce. Cost: a control loop is O(replicas) plus one store write per
// deployment whose records changed (O(its replicas)); an event is O(replicas) (the replica sets
// are compared after each); Status is O(replicas); GetReplicas is O(the deployment's replicas).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/callback_anchor.h"
#include "base/clock.h"
#include "head/state_store.h"
#include "metrics/metric_registry.h"
#include "serve/deployment_state.h"
#include "serve/serve_states.h"
#include "serve_runtime/proxy_manager.h"
#include "serve_runtime/replica_metrics_collector.h"
#include "serve_runtime/replica_runtime.h"
#include "serve_runtime/replica_set_source.h"
#include "serve_runtime/serve_records.h"
#include "tessera/v1/serve.pb.h"

namespace tessera::serve {

// The Python method the controller calls with a new replica config (ReplicaActor.reconfigure_json:
// one str argument, JSON text {"user_config": <its JSON, null for none>, "max_ongoing_requests":
// N, "graceful_shutdown_wait_loop_s": S}).
inline constexpr char kReconfigureMethod[] = "reconfigure_json";

struct ServeControllerOptions {
  absl::Duration control_loop_period = absl::Milliseconds(100);  // Ray's control loop interval
  // Mixed into each deployment's replica-id seed (with its names and the time it was made).
  uint64_t seed = 0;
  // The controller's metrics (deployment_state.h's names) and the replicas' own, relayed
  // (replica_metrics_collector.h); null: not exported.
  metrics::MetricRegistry* registry = nullptr;
  // How often the RUNNING replicas are asked for their own metrics (with a registry). Ray's
  // replicas push theirs on a period of 10 s too; a scrape never waits on a replica.
  absl::Duration metrics_collect_period = absl::Seconds(10);
  // How often the RUNNING replicas' actors are looked at in the cluster's records
  // (ReplicaRuntime::DeathOf): a dead one is replaced then, not at its next health check. Ray's
  // controller hears of an actor's death from its GCS at once.
  absl::Duration death_check_period = absl::Seconds(1);
  // Serve's state after each change of it: the start options when it starts (or is recovered
  // started), nullopt once it has stopped after a shutdown. What starts and stops the proxies.
  std::function<void(const std::optional<v1::ServeStartOptions>& started)> on_serve_state;
  // The proxies of the nodes (proxy_manager.h; its clock is the controller's). Without a
  // runtime there are none: only the head's proxy runs (SetProxyStatus).
  ProxyManagerOptions proxies;
};

// One application of a deploy as Deploy checked it: its spec and each deployment's target.
struct PlannedApplication {
  v1::ServeApplicationSpec spec;
  std::map<std::string, DeploymentTarget> targets;  // by deployment name
};

class ServeController final : public ReplicaSetSource {
 public:
  // Every pointer must outlive the controller (the runtime may call back later: that is safe).
  // Destroy it after whatever calls it (the gRPC server, the proxy) has stopped.
  ServeController(StateStore* store, Clock* clock, ReplicaRuntime* runtime,
                  ServeControllerOptions options = {});
  ~ServeController() override;
  ServeController(const ServeController&) = delete;
  ServeController& operator=(const ServeController&) = delete;

  // --- life ---
  // Reads a previous controller's records (see above). Once, before the first Deploy. The
  // store's error when the table cannot be listed; unreadable records are skipped (logged).
  absl::Status Recover() ABSL_LOCKS_EXCLUDED(mu_);
  // Registers the metrics in options.registry (nothing without one), the replicas' own relayed
  // through a ReplicaMetricsCollector. Once; Start calls it.
  absl::Status RegisterMetrics();
  // RegisterMetrics, then the control loop's thread. Once.
  absl::Status Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Stops the loop's thread and wakes every long poll; the replicas keep running (a restarted
  // head adopts them). Idempotent; from the thread that called Start.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  // One control loop (the thread's body; tests call it instead of Start).
  void RunControlLoopOnce() ABSL_LOCKS_EXCLUDED(mu_);

  // --- the HeadServe calls ---
  // InvalidArgument (or AlreadyExists for a route prefix another application holds) for a bad
  // request, FailedPrecondition for other start options than the running Serve's or while Serve
  // shuts down, UNAVAILABLE when the store refuses the goal; nothing changes then.
  absl::Status Deploy(const v1::DeployServeApplicationsRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  // Names that are not applications are skipped (as Ray does); InvalidArgument for an empty one.
  absl::Status Delete(const std::vector<std::string>& names) ABSL_LOCKS_EXCLUDED(mu_);
  // A no-op when Serve is not started.
  absl::Status Shutdown() ABSL_LOCKS_EXCLUDED(mu_);
  // started false and nothing else while Serve is not started.
  v1::ServeStatus Status() const ABSL_LOCKS_EXCLUDED(mu_);
  // Serve's start options (defaults filled in), nullopt while it is not started.
  std::optional<v1::ServeStartOptions> start_options() const ABSL_LOCKS_EXCLUDED(mu_);

  // --- what the proxies and replicas report ---
  void SetProxyStatus(const std::string& node_id, ProxyStatus status, const std::string& address)
      ABSL_LOCKS_EXCLUDED(mu_);
  void RemoveProxy(const std::string& node_id) ABSL_LOCKS_EXCLUDED(mu_);
  // The models a replica has loaded (@serve.multiplexed); ignored for a replica not running.
  void SetMultiplexedModelIds(const std::string& replica_id, std::vector<std::string> model_ids)
      ABSL_LOCKS_EXCLUDED(mu_);

  // --- ReplicaSetSource ---
  absl::StatusOr<v1::GetServeReplicasResponse> GetReplicas(const std::string& application,
                                                           const std::string& deployment,
                                                           uint64_t known_version,
                                                           absl::Duration wait) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<RouteTable> GetRoutes(uint64_t known_version, absl::Duration wait) override
      ABSL_LOCKS_EXCLUDED(mu_);
  void Report(const v1::ServeAutoscalingSample& sample) override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // What the runtime's callbacks reach the controller through.
  using Anchor = CallbackAnchor<ServeController>;

  struct ReplicaKey {
    std::string application;
    std::string deployment;
    std::string replica_id;
  };

  // A replica as routers see it.
  struct PublishedReplica {
    std::string replica_id;
    ReplicaAddress address;
    int max_ongoing_requests = 0;
    std::vector<std::string> model_ids;

    bool operator==(const PublishedReplica& other) const;
  };

  struct Deployment {
    std::unique_ptr<DeploymentStateMachine> machine;
    uint64_t replica_id_seed = 0;
    std::optional<uint64_t> persisted_generation;  // the records_generation in the store
    uint64_t replica_set_version = 0;              // 0: not published yet
    std::vector<PublishedReplica> replica_set;
  };

  struct Application {
    v1::ServeApplicationSpec spec;
    double last_deployed_time_s = 0;
    bool deleting = false;
    // Those of the spec, and those being deleted after they left it.
    std::map<std::string, Deployment, std::less<>> deployments;
  };

  // An action to carry out, and what a StartReplica needs.
  struct Work {
    ReplicaKey key;
    ReplicaAction action;
    std::optional<ReplicaLaunch> launch;
  };

  // Deploy's steps.
  absl::Status CheckDeployableLocked(const v1::DeployServeApplicationsRequest& request,
                                     const std::vector<PlannedApplication>& plan) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<std::pair<std::string, std::string>> DeployWritesLocked(
      const v1::DeployServeApplicationsRequest& request,
      const std::vector<PlannedApplication>& plan, double now_s) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyDeployLocked(const v1::DeployServeApplicationsRequest& request,
                         std::vector<PlannedApplication> plan, double now_s)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Each deployment of `targets` gets its target (a new machine when needed); the others of
  // the application are deleted.
  void ApplyTargetsLocked(Application& app, const std::map<std::string, DeploymentTarget>& targets)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DeleteApplicationLocked(Application& app) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NewMachineLocked(const std::string& app, const std::string& name, uint64_t seed,
                        Deployment& deployment) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The names of the applications Delete or Shutdown start deleting, and their records' writes.
  std::vector<std::pair<std::string, std::string>> DeletionWritesLocked(
      const std::set<std::string>& names) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t SeedFor(std::string_view app, std::string_view deployment) const;

  // Recover's steps.
  void RestoreStartLocked(const std::optional<StoredStart>& start, bool have_records)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RestoreDeploymentLocked(StoredDeployment stored, std::vector<ReplicaKey>& to_find)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReconcileRecoveredLocked(const std::map<std::string, PlannedApplication>& goals)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // What follows every change: persisting, forgetting what was deleted, finishing a shutdown,
  // the replica sets and the route table.
  void AfterChangeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CollectDeletedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PersistDeploymentsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishShutdownLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RefreshReplicaSetsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RefreshRoutesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t NextVersionLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ++last_version_; }

  // The store.
  // Makes every write, or none: on a failure those made are undone and UNAVAILABLE returned.
  absl::Status WriteAllLocked(const std::vector<std::pair<std::string, std::string>>& writes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The controller's own removal of a record; kept for the next loop while the store fails.
  void EraseLocked(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RetryErasesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Logs the first failure of an outage; a success ends it.
  void NoteStoreLocked(const absl::Status& status, std::string_view what, std::string_view key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Lookups.
  DeploymentStateMachine* MachineLocked(const ReplicaKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The deployment routers may ask for: `deployment` ("" the ingress) of the application's spec
  // (any of its deployments while it is being deleted); nullptr when there is none. `resolved`
  // (optional) gets its name.
  const Deployment* FindRoutedLocked(std::string_view application, std::string_view deployment,
                                     std::string* resolved) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FillApplicationStatusLocked(const Application& app, v1::ServeApplicationStatus* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FillReplicaLocked(const ReplicaDetails& replica, v1::ServeReplicaDetails* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The nodes Serve's replicas are placed on (not those being stopped): where proxies run.
  std::set<std::string> ReplicaNodesLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The control loop and the actions.
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<Work> TickLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The ids of every RUNNING replica (whose own metrics are relayed).
  std::vector<ReplicaKey> RunningReplicaKeysLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The replicas among `running` whose actors the runtime says are dead are counted dead.
  void CheckDeaths(const std::vector<ReplicaKey>& running) ABSL_LOCKS_EXCLUDED(mu_);
  void Carry(const Work& work) ABSL_LOCKS_EXCLUDED(mu_);
  void CarryStart(const ReplicaKey& key, const ReplicaLaunch& launch) ABSL_LOCKS_EXCLUDED(mu_);
  void CarryCheck(const ReplicaKey& key, const CheckHealth& check) ABSL_LOCKS_EXCLUDED(mu_);
  void CarryReconfigure(const ReplicaKey& key, const Reconfigure& reconfigure)
      ABSL_LOCKS_EXCLUDED(mu_);
  void CarryStop(const ReplicaKey& key, const StopReplica& stop) ABSL_LOCKS_EXCLUDED(mu_);
  void CarryFind(const ReplicaKey& key) ABSL_LOCKS_EXCLUDED(mu_);

  // The runtime's answers.
  void OnPending(const ReplicaKey& key, const std::string& explanation) ABSL_LOCKS_EXCLUDED(mu_);
  void OnStartDone(const ReplicaKey& key, const absl::StatusOr<ReplicaAddress>& address)
      ABSL_LOCKS_EXCLUDED(mu_);
  void OnHealthChecked(const ReplicaKey& key, uint64_t check, const absl::Status& status)
      ABSL_LOCKS_EXCLUDED(mu_);
  void OnReconfigured(const ReplicaKey& key, const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  void OnStopped(const ReplicaKey& key) ABSL_LOCKS_EXCLUDED(mu_);
  void OnFound(const ReplicaKey& key, const absl::StatusOr<ReplicaAddress>& address)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Whether a call's `status` says the replica's actor died; if so the machine is told.
  bool DiedLocked(DeploymentStateMachine& machine, const std::string& replica_id,
                  const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgetReplicaLocked(const std::string& replica_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // on_serve_state, when Serve's state moved since the last call.
  void NotifyServeState() ABSL_LOCKS_EXCLUDED(notify_mu_, mu_);

  // The four autoscaling gauges (series only for deployments that autoscale).
  absl::Status RegisterAutoscalingMetrics(
      metrics::MetricRegistry& registry, std::vector<metrics::CallbackRegistration>& registrations);
  // Metrics: `each` for every deployment, under the lock.
  void ForEachDeploymentMetrics(
      const std::function<void(const std::string& app, const std::string& deployment,
                               const DeploymentMetrics& metrics)>& each) const
      ABSL_LOCKS_EXCLUDED(mu_);

  StateStore* const store_;
  Clock* const clock_;
  ReplicaRuntime* const runtime_;
  const ServeControllerOptions options_;
  const std::shared_ptr<Anchor> anchor_;
  // The nodes' proxies (set once, by the constructor; null without a proxy runtime). Called
  // outside mu_: its callbacks never call the controller.
  std::unique_ptr<ProxyManager> node_proxies_;

  absl::Mutex notify_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  uint64_t notified_generation_ ABSL_GUARDED_BY(notify_mu_) = 0;

  mutable absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  v1::ServeStartOptions start_ ABSL_GUARDED_BY(mu_);
  uint64_t serve_generation_ ABSL_GUARDED_BY(mu_) = 0;  // moves when started_ changes
  std::map<std::string, Application, std::less<>> applications_ ABSL_GUARDED_BY(mu_);
  // Where started (or found) replicas are, and the models they hold, by replica id.
  std::map<std::string, ReplicaAddress, std::less<>> addresses_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<std::string>, std::less<>> model_ids_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, v1::ServeProxyStatus> proxies_ ABSL_GUARDED_BY(mu_);  // by node id
  std::vector<RouteEntry> routes_ ABSL_GUARDED_BY(mu_);
  uint64_t route_version_ ABSL_GUARDED_BY(mu_) = 0;
  // Versions are drawn from one counter that starts at the clock's microseconds, so a version
  // never repeats, not even across a controller restart that routers outlive.
  uint64_t last_version_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> pending_erases_ ABSL_GUARDED_BY(mu_);
  bool store_failing_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t control_loops_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time next_metrics_collection_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time next_death_check_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  std::thread loop_;                                          // Start and Stop only
  std::vector<metrics::CallbackRegistration> registrations_;  // RegisterMetrics and ~ only
  // The replicas' own metrics; set by RegisterMetrics before any control loop, reset by ~.
  std::unique_ptr<ReplicaMetricsCollector> replica_metrics_;
};

}  // namespace tessera::serve

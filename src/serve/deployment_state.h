// DeploymentStateMachine: the serve controller's logic for one deployment (docs/serve.md), as Ray
// Serve's `deployment_state.py` runs it. It holds the deployment's target (DeploymentTarget: its
// code version, user_config, replica count or autoscaling config and the options the controller
// applies) and its replicas, and moves the replicas towards the target:
//
//   start-up   new replicas STARTING until the host reports them started (constructor and
//              initial reconfigure done), then RUNNING. Constructor failures are retried until
//              min(3 × target, max_constructor_retry_count) have failed with no replica of the
//              version ever running; then no more are started until a new target
//              (DEPLOY_FAILED, trigger REPLICA_STARTUP_FAILED, from UPDATING).
//   health     each RUNNING replica is checked every health_check_period_s; an answer that takes
//              longer than health_check_timeout_s is a failure; after 3 failures in a row the
//              replica is stopped and replaced (replacements start at once, while it is still
//              STOPPING). A dead replica is replaced too.
//   updates    a new code version replaces replicas by a rolling update (at most
//              max(int(0.2 × target), 1) in transition; a pending downscale completes first);
//              a user_config (or max_ongoing_requests, graceful_shutdown_wait_loop_s) change
//              reconfigures live replicas in place (UPDATING), in batches of the same size.
//   stopping   STOPPING with a graceful deadline (graceful_shutdown_timeout_s), then ForceKill.
//   autoscaling  with an AutoscalingConfig, the decider (autoscaling_policy.h) sets the target
//              from the samples the host feeds (RecordAutoscalingSample).
//   recovery   Recover(records) on a fresh machine after a controller restart: replicas are
//              RECOVERING until their first health check passes; autoscaling metrics start
//              empty, and autoscaling waits until no replica is recovering.
//   delete     Delete(): every replica stopped, then Deleted().
// Status() is the deployment's entry of `serve.status()`, its status and trigger moving as
// Ray's DeploymentStatusInfo.handle_transition moves them.
//
// The host (the controller) calls Tick() every control loop (0.1 s) and carries out the actions
// it returns (StartReplica, Reconfigure, CheckHealth, StopReplica, ForceKill), and reports what
// happened with the On... events. Records() is what to persist after each change
// (records_generation() moves on with every change to it).
//
// Threading: not thread-safe. The controller's one lock guards every machine; no call blocks.
// Time only from the injected Clock. Cost: Tick, events and Status are O(replicas) (replicas of
// one deployment: a handful to a few hundred).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "serve/autoscaling_policy.h"
#include "serve/serve_states.h"

namespace tessera::serve {

// The controller's metrics, with Ray's names (the serving reference's §6) and one of the
// project's own; the host registers them and fills them from Metrics() under the controller's
// lock.
inline constexpr std::string_view kReplicaHealthyMetric =
    "ray_serve_deployment_replica_healthy";  // gauge; deployment, replica, application
inline constexpr std::string_view kReplicaStartsMetric =
    "ray_serve_deployment_replica_starts_total";  // counter; deployment, application
inline constexpr std::string_view kControlLoopsMetric =
    "ray_serve_controller_num_control_loops";  // gauge; the host's loop count
inline constexpr std::string_view kAutoscalingTargetReplicasMetric =
    "ray_serve_autoscaling_target_replicas";  // gauge; deployment, application
inline constexpr std::string_view kAutoscalingDesiredReplicasMetric =
    "ray_serve_autoscaling_desired_replicas";
inline constexpr std::string_view kAutoscalingTotalRequestsMetric =
    "ray_serve_autoscaling_total_requests";
inline constexpr std::string_view kAutoscalingTargetOngoingRequestsMetric =
    "ray_serve_autoscaling_target_ongoing_requests";
// Ray has no name for it: replicas by state (STARTING, RUNNING, ...); deployment, application,
// state.
inline constexpr std::string_view kReplicaStatesMetric = "tessera_serve_deployment_replicas";

// What a replica process itself is configured with, beyond its code: a change reconfigures
// live replicas (Ray's NeedsActorReconfigure options that the replica reads).
struct ReplicaConfig {
  std::string user_config = "null";  // JSON text passed to `reconfigure`
  int max_ongoing_requests = 5;
  double graceful_shutdown_wait_loop_s = 2.0;

  bool operator==(const ReplicaConfig&) const = default;
};

// The goal of one deployment (its options, §1.1 of the serving reference, as the controller
// needs them).
struct DeploymentTarget {
  // A hash of the replica config (code, init args, actor options, placement group options);
  // a change replaces the replicas by a rolling update. Not empty.
  std::string code_version;
  ReplicaConfig replica_config;
  int num_replicas = 1;  // >= 0; unused with an autoscaling config
  std::optional<AutoscalingConfig> autoscaling_config;
  double graceful_shutdown_timeout_s = 20.0;  // >= 0
  double health_check_period_s = 10.0;        // > 0
  double health_check_timeout_s = 30.0;       // > 0
  int max_constructor_retry_count = 20;       // > 0
  TargetCapacity target_capacity;             // percent in [0, 100]

  bool operator==(const DeploymentTarget&) const = default;

  // OK, or InvalidArgument naming the first field that breaks its rule.
  absl::Status Validate() const;
};

// What the host carries out.
struct StartReplica {
  std::string replica_id;
  std::string code_version;
  ReplicaConfig config;  // the constructor is followed by reconfigure(config.user_config)
};
struct Reconfigure {
  std::string replica_id;
  ReplicaConfig config;
};
// Call the replica's check_health(); report with OnHealthCheckResult(replica_id, check, ...).
// No answer by `deadline` counts as a failure (a later answer is ignored).
struct CheckHealth {
  std::string replica_id;
  uint64_t check = 0;
  absl::Time deadline;
};
// Take the replica out of routing and shut it down gracefully (drain, then exit); the
// machine sends ForceKill at `graceful_deadline` if it has not stopped by then.
struct StopReplica {
  std::string replica_id;
  absl::Time graceful_deadline;
};
struct ForceKill {
  std::string replica_id;
};
using ReplicaAction = std::variant<StartReplica, Reconfigure, CheckHealth, StopReplica, ForceKill>;

// A replica as persisted.
struct ReplicaRecord {
  std::string replica_id;
  std::string code_version;
  ReplicaConfig config;
  std::string node_id;    // "" before it was placed
  bool stopping = false;  // it was being stopped: a recovered controller stops it again

  bool operator==(const ReplicaRecord&) const = default;
};

// Everything a restarted controller needs to carry on with a deployment (Recover).
struct DeploymentRecords {
  DeploymentTarget target;
  int target_num_replicas = 0;  // after autoscaling and target_capacity
  bool deleting = false;
  uint64_t replica_ids_drawn = 0;  // so a recovered machine never draws an id again
  // Start-up failures of the target's version (so a failed deployment stays failed).
  int startup_failures = 0;
  bool replica_has_started = false;
  std::string last_startup_error;
  std::vector<ReplicaRecord> replicas;

  bool operator==(const DeploymentRecords&) const = default;
};

// A replica routers may send requests to.
struct RunningReplica {
  std::string replica_id;
  std::string node_id;
  int max_ongoing_requests = 0;
};

// A replica as the dashboard shows it.
struct ReplicaDetails {
  std::string replica_id;
  ReplicaState state = ReplicaState::kStarting;
  std::string node_id;     // "" before it was placed
  absl::Time state_since;  // when it entered its state
  // While it waits to be placed (STARTING, not yet scheduled): the scheduler's explanation.
  std::string pending_explanation;
};

struct ReplicaHealth {
  std::string replica_id;
  bool healthy = false;
};

// The values of the controller's metrics for this deployment.
struct DeploymentMetrics {
  std::vector<ReplicaHealth> replica_healthy;  // every replica past STARTING
  std::map<std::string, int> replica_states;   // replicas by state word (as Status() counts)
  uint64_t replica_starts = 0;                 // every StartReplica so far
  bool autoscaling = false;                    // the autoscaling values below are set
  int autoscaling_target_replicas = 0;
  int autoscaling_desired_replicas = 0;
  double autoscaling_total_requests = 0;
  double autoscaling_target_ongoing_requests = 0;
};

// Ray's internal triggers of a deployment's status changes.
enum class StatusEvent {
  kHealthy,
  kConfigUpdate,
  kAutoscaleUp,
  kAutoscaleDown,
  kManuallyIncreaseNumReplicas,
  kManuallyDecreaseNumReplicas,
  kReplicaStartupFailed,
  kHealthCheckFailed,
  kInternalError,
  kDelete,
};

// Ray's DeploymentStatusInfo.handle_transition: the status after `event`. A transition that
// does not apply leaves `info` as it is (its message too); one that does sets `message`.
void ApplyStatusEvent(DeploymentStatusInfo& info, StatusEvent event, std::string message = "");

struct DeploymentStateOptions {
  std::string app_name;
  std::string deployment_name;
  Clock* clock = nullptr;  // not owned; required
  // Replica ids are `<app>#<deployment>#<8 characters>` drawn from this seed, so a run is
  // repeatable; a restarted controller continues the draws (DeploymentRecords).
  uint64_t replica_id_seed = 0;
};

class DeploymentStateMachine {
 public:
  explicit DeploymentStateMachine(DeploymentStateOptions options);

  // A new target (deploy or redeploy). InvalidArgument, and nothing changes, for an invalid
  // one; the same target again changes nothing.
  absl::Status SetTarget(const DeploymentTarget& target);

  // Starts deleting: every replica is stopped; Deleted() once none is left.
  void Delete();
  bool Deleted() const;

  // Rebuilds a machine that has no target yet from a previous controller's records: replicas
  // RECOVERING (those that were stopping are stopped again). InvalidArgument when the records
  // do not hold together, FailedPrecondition when the machine already has a target; nothing
  // changes then.
  absl::Status Recover(const DeploymentRecords& records);

  // One control loop: autoscaling, scaling and rolling updates, health checks, stop deadlines,
  // status. Returns the actions to carry out (those the events since the last Tick queued
  // first).
  std::vector<ReplicaAction> Tick();

  // Host reports. Each returns false, and changes nothing, for an unknown replica or one whose
  // state the report does not fit (a late or repeated report).
  //
  // The replica waits for resources; `explanation` is the scheduler's reason, shown in the
  // status message once a replica has waited more than 30 s.
  bool OnReplicaPending(std::string_view replica_id, std::string_view explanation);
  // The replica has a place (its constructor runs there).
  bool OnReplicaScheduled(std::string_view replica_id, std::string_view node_id);
  // Constructor and initial reconfigure done: the replica runs.
  bool OnReplicaStarted(std::string_view replica_id, std::string_view node_id);
  bool OnReplicaStartFailed(std::string_view replica_id, std::string_view error);
  bool OnReplicaDied(std::string_view replica_id, std::string_view reason);
  bool OnHealthCheckResult(std::string_view replica_id, uint64_t check, bool ok,
                           std::string_view error);
  bool OnReconfigured(std::string_view replica_id, bool ok, std::string_view error);
  // The replica's process is gone after StopReplica or ForceKill.
  bool OnReplicaStopped(std::string_view replica_id);

  // An autoscaling sample (autoscaling_policy.h's AutoscalingMetrics::Record); dropped, OK,
  // while the deployment does not autoscale.
  absl::Status RecordAutoscalingSample(std::string_view source, absl::Time time,
                                       double ongoing_requests);

  DeploymentStatusInfo Status() const;
  DeploymentRecords Records() const;
  uint64_t records_generation() const { return records_generation_; }
  std::vector<RunningReplica> RunningReplicas() const;
  // Every replica, in start order.
  std::vector<ReplicaDetails> Replicas() const;
  DeploymentMetrics Metrics() const;
  int target_num_replicas() const { return target_num_replicas_; }

 private:
  enum class Startup { kPendingAllocation, kPendingInitialization };

  struct Replica {
    std::string id;
    std::string code_version;
    ReplicaConfig config;
    ReplicaState state = ReplicaState::kStarting;
    std::string node_id;
    absl::Time state_since;  // when it entered its state
    Startup startup = Startup::kPendingAllocation;
    std::string pending_explanation;
    // Health: the check in flight (0: none) and when the last one was sent.
    uint64_t check = 0;
    absl::Time check_deadline;
    absl::Time last_check_sent = absl::InfinitePast();
    int consecutive_failures = 0;
    // Stopping.
    absl::Time stop_deadline;
    bool force_killed = false;
  };

  // Tick's steps.
  void Autoscale(absl::Time now);
  void ScaleReplicas(absl::Time now);
  void RollOutdatedReplicas(absl::Time now);
  void StartReplicas(int count, absl::Time now);
  void StopForDownscale(int count, absl::Time now);
  void CheckReplicas(absl::Time now);
  void WatchHealth(Replica& replica, absl::Time now);
  void CheckStopping(Replica& replica, absl::Time now);
  void ShowSlowStartups(absl::Time now);
  void UpdateStatus();

  // Shared steps.
  Replica* Find(std::string_view replica_id);
  bool AtTargetVersion(const Replica& replica) const;
  int Count(std::initializer_list<ReplicaState> states, bool only_target_version = false) const;
  void Stop(Replica& replica, bool graceful, absl::Time now);
  void Remove(std::string_view replica_id);
  void RecordStartupFailure(std::string_view error);
  void HealthCheckFailed(Replica& replica, std::string_view error, absl::Time now);
  int FailedToStartThreshold() const;
  bool StartupFailing() const;
  bool TerminallyFailed() const;
  std::string NewReplicaId();
  void Changed() { ++records_generation_; }

  DeploymentStateOptions options_;
  std::optional<DeploymentTarget> target_;
  int target_num_replicas_ = 0;
  bool deleting_ = false;
  std::vector<Replica> replicas_;  // in start order
  std::vector<ReplicaAction> actions_;
  DeploymentStatusInfo status_;
  int startup_failures_ = 0;
  bool replica_has_started_ = false;
  std::string last_startup_error_;
  std::optional<AutoscalingDecider> decider_;
  AutoscalingMetrics metrics_;
  double last_total_requests_ = 0;
  uint64_t replica_ids_drawn_ = 0;
  uint64_t next_check_ = 1;
  uint64_t replica_starts_ = 0;
  uint64_t records_generation_ = 0;
};

}  // namespace tessera::serve

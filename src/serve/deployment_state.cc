#include "serve/deployment_state.h"

#include <algorithm>
#include <random>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/string_util.h"

namespace tessera::serve {
namespace {

using Event = StatusEvent;
using Trigger = DeploymentStatusTrigger;

// Failed health checks in a row after which a replica is replaced (Ray's
// REPLICA_HEALTH_CHECK_UNHEALTHY_THRESHOLD).
constexpr int kUnhealthyThreshold = 3;
// A replica still starting after this long is reported in the status message; one still
// recovering is given up (Ray's SLOW_STARTUP_WARNING_S).
constexpr absl::Duration kSlowStartup = absl::Seconds(30);

constexpr std::string_view kHealthCheckFailedMessage =
    "A replica's health check failed. This deployment will be UNHEALTHY until the replica "
    "recovers or a new deploy happens.";

// A status change: the trigger stays as it is when unset.
struct Next {
  DeploymentStatus status;
  std::optional<Trigger> trigger;
};

std::optional<Next> FromUpdating(Event event) {
  switch (event) {
    case Event::kHealthy: return Next{DeploymentStatus::kHealthy, Trigger::kConfigUpdateCompleted};
    case Event::kConfigUpdate:
      return Next{DeploymentStatus::kUpdating, Trigger::kConfigUpdateStarted};
    case Event::kAutoscaleUp: return Next{DeploymentStatus::kUpscaling, Trigger::kAutoscaling};
    case Event::kAutoscaleDown: return Next{DeploymentStatus::kDownscaling, Trigger::kAutoscaling};
    // Failures while a version is being rolled out fail the deploy.
    case Event::kHealthCheckFailed:
      return Next{DeploymentStatus::kDeployFailed, Trigger::kHealthCheckFailed};
    case Event::kReplicaStartupFailed:
      return Next{DeploymentStatus::kDeployFailed, Trigger::kReplicaStartupFailed};
    default: return std::nullopt;  // a manual replica count change keeps UPDATING
  }
}

std::optional<Next> FromScaling(DeploymentStatus status, Trigger trigger, Event event) {
  switch (event) {
    case Event::kHealthCheckFailed:
      return Next{DeploymentStatus::kUnhealthy, Trigger::kHealthCheckFailed};
    case Event::kReplicaStartupFailed:
      return Next{DeploymentStatus::kUnhealthy, Trigger::kReplicaStartupFailed};
    case Event::kHealthy:
      return Next{DeploymentStatus::kHealthy, status == DeploymentStatus::kUpscaling
                                                  ? Trigger::kUpscaleCompleted
                                                  : Trigger::kDownscaleCompleted};
    case Event::kConfigUpdate:
      return Next{DeploymentStatus::kUpdating, Trigger::kConfigUpdateStarted};
    default: break;
  }
  const bool up = event == Event::kAutoscaleUp || event == Event::kManuallyIncreaseNumReplicas;
  const bool down = event == Event::kAutoscaleDown || event == Event::kManuallyDecreaseNumReplicas;
  const bool manual =
      event == Event::kManuallyIncreaseNumReplicas || event == Event::kManuallyDecreaseNumReplicas;
  if (!up && !down) return std::nullopt;
  const DeploymentStatus scaling =
      up ? DeploymentStatus::kUpscaling : DeploymentStatus::kDownscaling;
  if (trigger == Trigger::kAutoscaling) {
    // A manual change takes over from autoscaling; autoscaling only changes the direction.
    return manual ? Next{scaling, Trigger::kConfigUpdateStarted} : Next{scaling, std::nullopt};
  }
  if (trigger == Trigger::kConfigUpdateStarted && manual) return Next{scaling, std::nullopt};
  return std::nullopt;
}

std::optional<Next> FromHealthy(Event event) {
  switch (event) {
    case Event::kConfigUpdate:
      return Next{DeploymentStatus::kUpdating, Trigger::kConfigUpdateStarted};
    case Event::kManuallyIncreaseNumReplicas:
      return Next{DeploymentStatus::kUpscaling, Trigger::kConfigUpdateStarted};
    case Event::kManuallyDecreaseNumReplicas:
      return Next{DeploymentStatus::kDownscaling, Trigger::kConfigUpdateStarted};
    case Event::kAutoscaleUp: return Next{DeploymentStatus::kUpscaling, Trigger::kAutoscaling};
    case Event::kAutoscaleDown: return Next{DeploymentStatus::kDownscaling, Trigger::kAutoscaling};
    case Event::kHealthCheckFailed:
      return Next{DeploymentStatus::kUnhealthy, Trigger::kHealthCheckFailed};
    default: return std::nullopt;  // healthy stays healthy, message and all
  }
}

// UNHEALTHY and DEPLOY_FAILED: they recover, take a new config, or stay `failed`.
std::optional<Next> FromFailed(DeploymentStatus failed, Event event) {
  switch (event) {
    case Event::kHealthy: return Next{DeploymentStatus::kHealthy, Trigger::kUnspecified};
    case Event::kConfigUpdate:
      return Next{DeploymentStatus::kUpdating, Trigger::kConfigUpdateStarted};
    case Event::kHealthCheckFailed: return Next{failed, Trigger::kHealthCheckFailed};
    case Event::kReplicaStartupFailed: return Next{failed, Trigger::kReplicaStartupFailed};
    default: return std::nullopt;
  }
}

std::optional<Next> NextStatus(const DeploymentStatusInfo& info, Event event) {
  if (event == Event::kInternalError) {
    return Next{DeploymentStatus::kUnhealthy, Trigger::kInternalError};
  }
  if (event == Event::kDelete) return Next{DeploymentStatus::kUpdating, Trigger::kDeleting};
  switch (info.status) {
    case DeploymentStatus::kUpdating: return FromUpdating(event);
    case DeploymentStatus::kUpscaling:
    case DeploymentStatus::kDownscaling:
      return FromScaling(info.status, info.status_trigger, event);
    case DeploymentStatus::kHealthy: return FromHealthy(event);
    case DeploymentStatus::kUnhealthy:
    case DeploymentStatus::kDeployFailed: return FromFailed(info.status, event);
  }
  return std::nullopt;
}

absl::Status MustBe(bool holds, std::string_view field, std::string_view rule, double value) {
  if (holds) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(ToAbsl(field), " must be ", ToAbsl(rule), ", got ", value));
}

// The two targets differ in at most their replica counts (num_replicas, target_capacity): a
// change between them only scales.
bool ScaledCopy(DeploymentTarget old_target, const DeploymentTarget& new_target) {
  old_target.num_replicas = new_target.num_replicas;
  old_target.target_capacity = new_target.target_capacity;
  return old_target == new_target;
}

bool SameButCapacity(DeploymentTarget old_target, const DeploymentTarget& new_target) {
  old_target.target_capacity = new_target.target_capacity;
  return old_target == new_target;
}

bool Active(ReplicaState state) {
  return state == ReplicaState::kStarting || state == ReplicaState::kUpdating ||
         state == ReplicaState::kRunning;
}

}  // namespace

void ApplyStatusEvent(DeploymentStatusInfo& info, StatusEvent event, std::string message) {
  const std::optional<Next> next = NextStatus(info, event);
  if (!next.has_value()) return;
  info.status = next->status;
  if (next->trigger.has_value()) info.status_trigger = *next->trigger;
  info.message = std::move(message);
}

absl::Status DeploymentTarget::Validate() const {
  if (code_version.empty()) return absl::InvalidArgumentError("code_version must not be empty");
  const std::optional<double> capacity = target_capacity.percent;
  const absl::Status checks[] = {
      MustBe(num_replicas >= 0, "num_replicas", "0 or more", num_replicas),
      MustBe(replica_config.max_ongoing_requests > 0, "max_ongoing_requests", "greater than 0",
             replica_config.max_ongoing_requests),
      MustBe(replica_config.graceful_shutdown_wait_loop_s >= 0, "graceful_shutdown_wait_loop_s",
             "0 or more", replica_config.graceful_shutdown_wait_loop_s),
      MustBe(graceful_shutdown_timeout_s >= 0, "graceful_shutdown_timeout_s", "0 or more",
             graceful_shutdown_timeout_s),
      MustBe(health_check_period_s > 0, "health_check_period_s", "greater than 0",
             health_check_period_s),
      MustBe(health_check_timeout_s > 0, "health_check_timeout_s", "greater than 0",
             health_check_timeout_s),
      MustBe(max_constructor_retry_count > 0, "max_constructor_retry_count", "greater than 0",
             max_constructor_retry_count),
      MustBe(!capacity.has_value() || (*capacity >= 0 && *capacity <= 100), "target_capacity",
             "between 0 and 100", capacity.value_or(0)),
  };
  for (const absl::Status& status : checks) {
    if (!status.ok()) return status;
  }
  return autoscaling_config.has_value() ? autoscaling_config->Validate() : absl::OkStatus();
}

DeploymentStateMachine::DeploymentStateMachine(DeploymentStateOptions options)
    : options_(std::move(options)) {
  status_.name = options_.deployment_name;
}

absl::Status DeploymentStateMachine::SetTarget(const DeploymentTarget& target) {
  TESSERA_RETURN_IF_ERROR(target.Validate());
  if (target_.has_value() && *target_ == target && !deleting_) return absl::OkStatus();
  const std::optional<DeploymentTarget> old = target_;
  const bool was_deleting = deleting_;
  const int old_num = target_num_replicas_;
  target_ = target;
  deleting_ = false;
  if (target.autoscaling_config.has_value()) {
    // Ray starts an autoscaling deployment at initial_replicas whenever its config changes
    // (a target_capacity move alone keeps the count), else where it is, within the bounds.
    const bool config_changed = !old.has_value() || !old->autoscaling_config.has_value() ||
                                was_deleting || !SameButCapacity(*old, target);
    decider_.emplace(*target.autoscaling_config, target.target_capacity);
    metrics_.set_look_back(absl::Seconds(target.autoscaling_config->look_back_period_s));
    const std::optional<int> initial = target.autoscaling_config->initial_replicas;
    target_num_replicas_ =
        decider_->ApplyBounds(config_changed && initial.has_value() ? *initial : old_num);
  } else {
    decider_.reset();
    metrics_.Clear();
    target_num_replicas_ =
        CapacityAdjustedReplicas(target.num_replicas, target.target_capacity.percent);
  }
  if (old.has_value() && !was_deleting && ScaledCopy(*old, target)) {
    if (target_num_replicas_ != old_num) {
      const bool up = target_num_replicas_ > old_num;
      ApplyStatusEvent(
          status_, up ? Event::kManuallyIncreaseNumReplicas : Event::kManuallyDecreaseNumReplicas,
          absl::StrCat(up ? "Upscaling" : "Downscaling", " from ", old_num, " to ",
                       target_num_replicas_, " replicas."));
    }
  } else {
    ApplyStatusEvent(status_, Event::kConfigUpdate);
  }
  startup_failures_ = 0;
  replica_has_started_ = false;
  last_startup_error_.clear();
  Changed();
  return absl::OkStatus();
}

void DeploymentStateMachine::Delete() {
  if (deleting_) return;
  deleting_ = true;
  target_num_replicas_ = 0;
  ApplyStatusEvent(status_, Event::kDelete);
  Changed();
}

bool DeploymentStateMachine::Deleted() const { return deleting_ && replicas_.empty(); }

absl::Status DeploymentStateMachine::Recover(const DeploymentRecords& records) {
  if (target_.has_value() || deleting_ || !replicas_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("deployment ", options_.deployment_name,
                     " already has a target: only a fresh state machine recovers from records"));
  }
  TESSERA_RETURN_IF_ERROR(records.target.Validate());
  if (records.target_num_replicas < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "records: target_num_replicas must be 0 or more, got ", records.target_num_replicas));
  }
  absl::flat_hash_set<std::string> ids;
  for (const ReplicaRecord& record : records.replicas) {
    if (record.replica_id.empty() || record.code_version.empty() ||
        !ids.insert(record.replica_id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("records: replica ", Quote(record.replica_id),
                       " needs a unique, non-empty id and a code version"));
    }
  }
  const absl::Time now = options_.clock->Now();
  target_ = records.target;
  target_num_replicas_ = records.target_num_replicas;
  replica_ids_drawn_ = records.replica_ids_drawn;
  startup_failures_ = records.startup_failures;
  replica_has_started_ = records.replica_has_started;
  last_startup_error_ = records.last_startup_error;
  if (const auto& config = records.target.autoscaling_config; config.has_value()) {
    decider_.emplace(*config, records.target.target_capacity);
    metrics_ = AutoscalingMetrics(absl::Seconds(config->look_back_period_s));
  }
  if (records.deleting) Delete();
  for (const ReplicaRecord& record : records.replicas) {
    Replica replica;
    replica.id = record.replica_id;
    replica.code_version = record.code_version;
    replica.config = record.config;
    replica.node_id = record.node_id;
    replica.state = ReplicaState::kRecovering;
    replica.state_since = now;
    replicas_.push_back(std::move(replica));
    if (record.stopping) Stop(replicas_.back(), /*graceful=*/true, now);
  }
  Changed();
  return absl::OkStatus();
}

std::vector<ReplicaAction> DeploymentStateMachine::Tick() {
  if (target_.has_value() || deleting_) {
    const absl::Time now = options_.clock->Now();
    Autoscale(now);
    ScaleReplicas(now);
    CheckReplicas(now);
    UpdateStatus();
  }
  return std::exchange(actions_, {});
}

void DeploymentStateMachine::Autoscale(absl::Time now) {
  // A recovering controller has lost the metrics it collected; it decides again once it
  // knows its replicas.
  if (!decider_.has_value() || deleting_ || Count({ReplicaState::kRecovering}) > 0) return;
  last_total_requests_ = metrics_.TotalOngoing(now);
  const int decision = decider_->Decide({
      .running_replicas = Count({ReplicaState::kRunning, ReplicaState::kPendingMigration}),
      .target_replicas = target_num_replicas_,
      .total_ongoing_requests = last_total_requests_,
      .now = now,
  });
  if (decision == target_num_replicas_) return;
  const int old_num = target_num_replicas_;
  target_num_replicas_ = decision;
  Changed();
  // Below min (still starting up) is no autoscaling event: the deployment is being deployed.
  if (!decider_->IsWithinBounds(Count({ReplicaState::kRunning}, /*only_target_version=*/true))) {
    return;
  }
  const bool up = decision > old_num;
  ApplyStatusEvent(status_, up ? Event::kAutoscaleUp : Event::kAutoscaleDown,
                   absl::StrCat(up ? "Upscaling" : "Downscaling", " from ", old_num, " to ",
                                decision, " replicas."));
}

void DeploymentStateMachine::ScaleReplicas(absl::Time now) {
  if (!deleting_ && target_num_replicas_ > 0) RollOutdatedReplicas(now);
  // Replicas stopping are not counted: their replacements start at once.
  const int current =
      Count({ReplicaState::kStarting, ReplicaState::kUpdating, ReplicaState::kRunning});
  const int recovering = Count({ReplicaState::kRecovering});
  const int delta = target_num_replicas_ - current - recovering;
  if (delta > 0 && !deleting_ && !TerminallyFailed()) {
    StartReplicas(delta, now);
  } else if (delta < 0) {
    StopForDownscale(-delta, now);
  }
}

void DeploymentStateMachine::RollOutdatedReplicas(absl::Time now) {
  int old_active = 0;
  int old_stopping = 0;
  int new_running = 0;
  for (const Replica& replica : replicas_) {
    const bool current = AtTargetVersion(replica);
    if (!current && Active(replica.state)) ++old_active;
    if (!current && replica.state == ReplicaState::kStopping) ++old_stopping;
    if (current && replica.state == ReplicaState::kRunning) ++new_running;
  }
  const int target = target_num_replicas_;
  if (target < old_active + old_stopping) return;  // a downscale completes first
  // Replicas between versions: old ones gone (or going) whose new ones do not run yet. Counting
  // what is missing, rather than what is stopping, also covers stopped replicas.
  const int in_transition = target - new_running - old_active;
  const int rollout_size = std::max(static_cast<int>(0.2 * target), 1);
  int budget = std::max(rollout_size - in_transition, 0);
  // Replicas still starting go first: they serve nothing yet.
  for (const ReplicaState state : {ReplicaState::kStarting, ReplicaState::kRunning}) {
    for (Replica& replica : replicas_) {
      if (budget == 0) return;
      if (replica.state != state || AtTargetVersion(replica)) continue;
      if (replica.code_version != target_->code_version) {
        --budget;
        Stop(replica, /*graceful=*/state == ReplicaState::kRunning, now);
      } else if (state == ReplicaState::kRunning) {
        // Only its config differs: `reconfigure` in place, no restart.
        --budget;
        replica.config = target_->replica_config;
        replica.state = ReplicaState::kUpdating;
        replica.state_since = now;
        replica.check = 0;
        actions_.push_back(Reconfigure{replica.id, replica.config});
        Changed();
      }
    }
  }
}

void DeploymentStateMachine::StartReplicas(int count, absl::Time now) {
  for (int i = 0; i < count; ++i) {
    Replica replica;
    replica.id = NewReplicaId();
    replica.code_version = target_->code_version;
    replica.config = target_->replica_config;
    replica.state = ReplicaState::kStarting;
    replica.state_since = now;
    actions_.push_back(StartReplica{replica.id, replica.code_version, replica.config});
    replicas_.push_back(std::move(replica));
    ++replica_starts_;
  }
  Changed();
}

void DeploymentStateMachine::StopForDownscale(int count, absl::Time now) {
  // Which replicas go first (as Ray's scheduler picks them): those not placed yet, then those
  // still starting, then recovering ones, then running ones on the nodes with the fewest of
  // this deployment's replicas (to free whole nodes); the newest first within each.
  absl::flat_hash_map<std::string, int> per_node;
  for (const Replica& replica : replicas_) {
    if (Active(replica.state) || replica.state == ReplicaState::kRecovering) {
      ++per_node[replica.node_id];
    }
  }
  std::vector<std::tuple<int, int, int>> order;  // (tier, replicas on its node, -index)
  for (size_t i = 0; i < replicas_.size(); ++i) {
    const Replica& replica = replicas_[i];
    int tier = 3;
    if (replica.state == ReplicaState::kStarting) {
      tier = replica.startup == Startup::kPendingAllocation ? 0 : 1;
    } else if (replica.state == ReplicaState::kRecovering) {
      tier = 2;
    } else if (!Active(replica.state)) {
      continue;
    }
    const int on_node = tier == 3 ? per_node[replica.node_id] : 0;
    order.emplace_back(tier, on_node, -static_cast<int>(i));
  }
  std::sort(order.begin(), order.end());
  for (size_t k = 0; k < order.size() && static_cast<int>(k) < count; ++k) {
    Replica& replica = replicas_[-std::get<2>(order[k])];
    Stop(replica, /*graceful=*/replica.state != ReplicaState::kStarting, now);
  }
}

void DeploymentStateMachine::CheckReplicas(absl::Time now) {
  for (Replica& replica : replicas_) {
    switch (replica.state) {
      case ReplicaState::kRunning:
      case ReplicaState::kPendingMigration:
      case ReplicaState::kRecovering: WatchHealth(replica, now); break;
      case ReplicaState::kStopping: CheckStopping(replica, now); break;
      case ReplicaState::kStarting:
      case ReplicaState::kUpdating: break;
    }
  }
  ShowSlowStartups(now);
}

void DeploymentStateMachine::WatchHealth(Replica& replica, absl::Time now) {
  if (replica.state == ReplicaState::kRecovering && now - replica.state_since > kSlowStartup) {
    Stop(replica, /*graceful=*/false, now);  // it never answered: give it up
    return;
  }
  const absl::Duration timeout = absl::Seconds(target_->health_check_timeout_s);
  if (replica.check != 0 && now >= replica.check_deadline) {
    replica.check = 0;
    HealthCheckFailed(
        replica,
        absl::StrCat("the health check took longer than ", target_->health_check_timeout_s, "s"),
        now);
    if (replica.state == ReplicaState::kStopping) return;
  }
  if (replica.check == 0 &&
      now - replica.last_check_sent >= absl::Seconds(target_->health_check_period_s)) {
    replica.check = next_check_++;
    replica.last_check_sent = now;
    replica.check_deadline = now + timeout;
    actions_.push_back(CheckHealth{replica.id, replica.check, replica.check_deadline});
  }
}

void DeploymentStateMachine::CheckStopping(Replica& replica, absl::Time now) {
  if (replica.force_killed || now < replica.stop_deadline) return;
  replica.force_killed = true;
  actions_.push_back(ForceKill{replica.id});
}

void DeploymentStateMachine::ShowSlowStartups(absl::Time now) {
  // The problem that made the deployment unhealthy matters more than slow replicas.
  if (status_.status == DeploymentStatus::kUnhealthy ||
      status_.status == DeploymentStatus::kDeployFailed) {
    return;
  }
  int unplaced = 0;
  int initializing = 0;
  std::string explanation;
  for (const Replica& replica : replicas_) {
    const bool slow = now - replica.state_since > kSlowStartup;
    if (!slow) continue;
    if (replica.state == ReplicaState::kStarting &&
        replica.startup == Startup::kPendingAllocation) {
      ++unplaced;
      if (explanation.empty()) explanation = replica.pending_explanation;
    } else if (replica.state == ReplicaState::kStarting ||
               replica.state == ReplicaState::kUpdating) {
      ++initializing;
    }
  }
  if (unplaced == 0 && initializing == 0) return;
  const std::string where = absl::StrCat("Deployment '", options_.deployment_name,
                                         "' in application '", options_.app_name, "' has ");
  std::vector<std::string> parts;
  if (unplaced > 0) {
    parts.push_back(absl::StrCat(
        where, unplaced,
        " replicas that have taken more than 30s to be scheduled. This may be due to waiting "
        "for the cluster to auto-scale or for a runtime environment to be installed.",
        explanation.empty() ? "" : " Why they are not placed: ", explanation));
  }
  if (initializing > 0) {
    parts.push_back(absl::StrCat(where, initializing,
                                 " replicas that have taken more than 30s to initialize.\nThis "
                                 "may be caused by a slow __init__ or reconfigure method."));
  }
  status_.message = absl::StrJoin(parts, "\n");
}

void DeploymentStateMachine::UpdateStatus() {
  const int running_at_target = Count({ReplicaState::kRunning}, /*only_target_version=*/true);
  if (running_at_target > 0) {
    if (!replica_has_started_) {
      replica_has_started_ = true;
      Changed();
    }
  } else if (StartupFailing()) {
    ApplyStatusEvent(
        status_, Event::kReplicaStartupFailed,
        absl::StrCat("The deployment failed to start ", startup_failures_,
                     " times in a row. This may be due to a problem with its constructor or "
                     "initial health check failing. See controller logs for details. Error:\n",
                     last_startup_error_));
    return;
  }
  if (deleting_ || Count({ReplicaState::kStarting, ReplicaState::kUpdating,
                          ReplicaState::kRecovering, ReplicaState::kStopping}) > 0) {
    return;
  }
  if (target_num_replicas_ == running_at_target &&
      running_at_target == Count({ReplicaState::kRunning})) {
    ApplyStatusEvent(status_, Event::kHealthy);
    if (startup_failures_ != 0) {
      startup_failures_ = 0;
      Changed();
    }
  }
}

bool DeploymentStateMachine::OnReplicaPending(std::string_view replica_id,
                                              std::string_view explanation) {
  Replica* replica = Find(replica_id);
  if (replica == nullptr || replica->state != ReplicaState::kStarting) return false;
  replica->startup = Startup::kPendingAllocation;
  replica->pending_explanation = std::string(explanation);
  return true;
}

bool DeploymentStateMachine::OnReplicaScheduled(std::string_view replica_id,
                                                std::string_view node_id) {
  Replica* replica = Find(replica_id);
  if (replica == nullptr || replica->state != ReplicaState::kStarting) return false;
  replica->startup = Startup::kPendingInitialization;
  replica->node_id = std::string(node_id);
  Changed();
  return true;
}

bool DeploymentStateMachine::OnReplicaStarted(std::string_view replica_id,
                                              std::string_view node_id) {
  Replica* replica = Find(replica_id);
  if (replica == nullptr || replica->state != ReplicaState::kStarting) return false;
  const absl::Time now = options_.clock->Now();
  replica->state = ReplicaState::kRunning;
  replica->state_since = now;
  if (!node_id.empty()) replica->node_id = std::string(node_id);
  // Starting ran a health check already; the next one is a period away.
  replica->last_check_sent = now;
  replica->consecutive_failures = 0;
  Changed();
  return true;
}

bool DeploymentStateMachine::OnReplicaStartFailed(std::string_view replica_id,
                                                  std::string_view error) {
  Replica* replica = Find(replica_id);
  if (replica == nullptr || replica->state != ReplicaState::kStarting) return false;
  RecordStartupFailure(error);
  Stop(*replica, /*graceful=*/false, options_.clock->Now());
  return true;
}

bool DeploymentStateMachine::OnReplicaDied(std::string_view replica_id, std::string_view reason) {
  Replica* replica = Find(replica_id);
  if (replica == nullptr) return false;
  switch (replica->state) {
    case ReplicaState::kStarting:
    case ReplicaState::kUpdating:
    case ReplicaState::kRecovering: RecordStartupFailure(reason); break;
    case ReplicaState::kRunning:
    case ReplicaState::kPendingMigration:
      if (AtTargetVersion(*replica)) {
        ApplyStatusEvent(
            status_, Event::kHealthCheckFailed,
            absl::StrCat(ToAbsl(kHealthCheckFailedMessage), " A replica died: ", ToAbsl(reason)));
      }
      break;
    case ReplicaState::kStopping: break;
  }
  Remove(replica_id);  // replaced on the next Tick
  return true;
}

bool DeploymentStateMachine::OnHealthCheckResult(std::string_view replica_id, uint64_t check,
                                                 bool ok, std::string_view error) {
  Replica* replica = Find(replica_id);
  if (replica == nullptr || check == 0 || replica->check != check) return false;
  replica->check = 0;
  const absl::Time now = options_.clock->Now();
  if (!ok) {
    HealthCheckFailed(*replica, error, now);
    return true;
  }
  replica->consecutive_failures = 0;
  if (replica->state == ReplicaState::kRecovering) {
    replica->state = ReplicaState::kRunning;
    replica->state_since = now;
  }
  return true;
}

bool DeploymentStateMachine::OnReconfigured(std::string_view replica_id, bool ok,
                                            std::string_view error) {
  Replica* replica = Find(replica_id);
  if (replica == nullptr || replica->state != ReplicaState::kUpdating) return false;
  const absl::Time now = options_.clock->Now();
  if (!ok) {
    RecordStartupFailure(error);
    Stop(*replica, /*graceful=*/true, now);
    return true;
  }
  replica->state = ReplicaState::kRunning;
  replica->state_since = now;
  replica->last_check_sent = now;
  return true;
}

bool DeploymentStateMachine::OnReplicaStopped(std::string_view replica_id) {
  Replica* replica = Find(replica_id);
  if (replica == nullptr || replica->state != ReplicaState::kStopping) return false;
  Remove(replica_id);
  return true;
}

absl::Status DeploymentStateMachine::RecordAutoscalingSample(std::string_view source,
                                                             absl::Time time,
                                                             double ongoing_requests) {
  // Without autoscaling nothing reads the samples (or drops old ones): keep none.
  if (!decider_.has_value()) return absl::OkStatus();
  return metrics_.Record(source, time, ongoing_requests);
}

DeploymentStatusInfo DeploymentStateMachine::Status() const {
  DeploymentStatusInfo info = status_;
  for (const Replica& replica : replicas_) ++info.replica_states[std::string(Name(replica.state))];
  return info;
}

DeploymentRecords DeploymentStateMachine::Records() const {
  DeploymentRecords records;
  if (target_.has_value()) records.target = *target_;
  records.target_num_replicas = target_num_replicas_;
  records.deleting = deleting_;
  records.replica_ids_drawn = replica_ids_drawn_;
  records.startup_failures = startup_failures_;
  records.replica_has_started = replica_has_started_;
  records.last_startup_error = last_startup_error_;
  for (const Replica& replica : replicas_) {
    records.replicas.push_back(ReplicaRecord{replica.id, replica.code_version, replica.config,
                                             replica.node_id,
                                             replica.state == ReplicaState::kStopping});
  }
  return records;
}

std::vector<RunningReplica> DeploymentStateMachine::RunningReplicas() const {
  std::vector<RunningReplica> running;
  for (const Replica& replica : replicas_) {
    if (replica.state == ReplicaState::kRunning ||
        replica.state == ReplicaState::kPendingMigration) {
      running.push_back(
          RunningReplica{replica.id, replica.node_id, replica.config.max_ongoing_requests});
    }
  }
  return running;
}

std::vector<ReplicaDetails> DeploymentStateMachine::Replicas() const {
  std::vector<ReplicaDetails> details;
  details.reserve(replicas_.size());
  for (const Replica& replica : replicas_) {
    const bool unplaced =
        replica.state == ReplicaState::kStarting && replica.startup == Startup::kPendingAllocation;
    details.push_back(ReplicaDetails{replica.id, replica.state, replica.node_id,
                                     replica.state_since,
                                     unplaced ? replica.pending_explanation : std::string()});
  }
  return details;
}

DeploymentMetrics DeploymentStateMachine::Metrics() const {
  DeploymentMetrics metrics;
  for (const Replica& replica : replicas_) {
    if (replica.state == ReplicaState::kStarting) continue;
    const bool healthy =
        (replica.state == ReplicaState::kRunning || replica.state == ReplicaState::kUpdating) &&
        replica.consecutive_failures == 0;
    metrics.replica_healthy.push_back(ReplicaHealth{replica.id, healthy});
  }
  metrics.replica_starts = replica_starts_;
  metrics.replica_states = Status().replica_states;
  if (decider_.has_value()) {
    metrics.autoscaling = true;
    metrics.autoscaling_target_replicas = target_num_replicas_;
    metrics.autoscaling_desired_replicas = decider_->last_desired();
    metrics.autoscaling_total_requests = last_total_requests_;
    metrics.autoscaling_target_ongoing_requests = decider_->config().target_ongoing_requests;
  }
  return metrics;
}

DeploymentStateMachine::Replica* DeploymentStateMachine::Find(std::string_view replica_id) {
  for (Replica& replica : replicas_) {
    if (replica.id == replica_id) return &replica;
  }
  return nullptr;
}

bool DeploymentStateMachine::AtTargetVersion(const Replica& replica) const {
  return target_.has_value() && replica.code_version == target_->code_version &&
         replica.config == target_->replica_config;
}

int DeploymentStateMachine::Count(std::initializer_list<ReplicaState> states,
                                  bool only_target_version) const {
  int count = 0;
  for (const Replica& replica : replicas_) {
    if (std::find(states.begin(), states.end(), replica.state) == states.end()) continue;
    if (only_target_version && !AtTargetVersion(replica)) continue;
    ++count;
  }
  return count;
}

void DeploymentStateMachine::Stop(Replica& replica, bool graceful, absl::Time now) {
  replica.state = ReplicaState::kStopping;
  replica.state_since = now;
  replica.check = 0;
  if (graceful) {
    const double timeout_s = target_.has_value() ? target_->graceful_shutdown_timeout_s : 0;
    replica.stop_deadline = now + absl::Seconds(timeout_s);
    replica.force_killed = false;
    actions_.push_back(StopReplica{replica.id, replica.stop_deadline});
  } else {
    replica.stop_deadline = now;
    replica.force_killed = true;
    actions_.push_back(ForceKill{replica.id});
  }
  Changed();
}

void DeploymentStateMachine::Remove(std::string_view replica_id) {
  const std::string id(replica_id);  // the view may be of a replica that moves below
  metrics_.Forget(id);
  replicas_.erase(std::remove_if(replicas_.begin(), replicas_.end(),
                                 [&](const Replica& r) { return r.id == id; }),
                  replicas_.end());
  Changed();
}

void DeploymentStateMachine::RecordStartupFailure(std::string_view error) {
  // With nothing wanted, a failure to start says nothing about the version.
  if (target_num_replicas_ == 0) return;
  ++startup_failures_;
  last_startup_error_ = std::string(error);
  std::string retrying;
  if (!replica_has_started_) {
    retrying = absl::StrCat(" ", std::max(FailedToStartThreshold() - startup_failures_, 0),
                            " more time(s)");
  }
  status_.message = absl::StrCat("A replica failed to start with exception. Retrying", retrying,
                                 ". Error:\n", ToAbsl(error));
  Changed();
}

void DeploymentStateMachine::HealthCheckFailed(Replica& replica, std::string_view error,
                                               absl::Time now) {
  if (replica.state == ReplicaState::kRecovering) {
    // It never came back as it was: a start-up failure, as Ray counts a failed recovery.
    RecordStartupFailure(error);
    Stop(replica, /*graceful=*/true, now);
    return;
  }
  if (++replica.consecutive_failures < kUnhealthyThreshold) return;
  const bool current = AtTargetVersion(replica);
  Stop(replica, /*graceful=*/true, now);
  if (current) {
    ApplyStatusEvent(status_, Event::kHealthCheckFailed,
                     absl::StrCat(ToAbsl(kHealthCheckFailedMessage), " Error:\n", ToAbsl(error)));
  }
}

int DeploymentStateMachine::FailedToStartThreshold() const {
  const int per_replica = target_num_replicas_ * 3;
  return target_.has_value() ? std::min(target_->max_constructor_retry_count, per_replica)
                             : per_replica;
}

bool DeploymentStateMachine::StartupFailing() const {
  return target_num_replicas_ > 0 && startup_failures_ >= FailedToStartThreshold();
}

bool DeploymentStateMachine::TerminallyFailed() const {
  return !replica_has_started_ && StartupFailing();
}

std::string DeploymentStateMachine::NewReplicaId() {
  static constexpr std::string_view kAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  const uint64_t seed = options_.replica_id_seed;
  while (true) {
    const uint64_t draw = replica_ids_drawn_++;
    // Each id from (seed, draw) alone: a recovered machine continues at its records' count
    // without replaying the draws before it. seed_seq and mt19937_64 are the same everywhere.
    std::seed_seq sequence{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                           static_cast<uint32_t>(draw), static_cast<uint32_t>(draw >> 32)};
    std::mt19937_64 engine(sequence);
    std::string suffix(8, 'a');
    for (char& c : suffix) c = kAlphabet[engine() % kAlphabet.size()];
    std::string id = absl::StrCat(options_.app_name, "#", options_.deployment_name, "#", suffix);
    if (Find(id) == nullptr) return id;
  }
}

}  // namespace tessera::serve

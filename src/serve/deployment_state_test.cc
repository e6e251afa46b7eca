#include "serve/deployment_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "metrics/metric_names.h"

namespace tessera::serve {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::Pair;
using ::testing::SizeIs;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

DeploymentTarget Target(int replicas, std::string code_version = "v1") {
  DeploymentTarget target;
  target.code_version = std::move(code_version);
  target.num_replicas = replicas;
  return target;
}

template <typename T>
std::vector<T> Of(const std::vector<ReplicaAction>& actions) {
  std::vector<T> found;
  for (const ReplicaAction& action : actions) {
    if (const T* one = std::get_if<T>(&action)) found.push_back(*one);
  }
  return found;
}

template <typename T>
std::vector<std::string> IdsOf(const std::vector<ReplicaAction>& actions) {
  std::vector<std::string> ids;
  for (const T& action : Of<T>(actions)) ids.push_back(action.replica_id);
  return ids;
}

class DeploymentStateTest : public ::testing::Test {
 protected:
  DeploymentStateMachine NewMachine(uint64_t seed = 7) {
    return DeploymentStateMachine(DeploymentStateOptions{
        .app_name = "app", .deployment_name = "d", .clock = &clock_, .replica_id_seed = seed});
  }

  // Every replica the actions start is reported started.
  static std::vector<std::string> StartAll(DeploymentStateMachine& machine,
                                           const std::vector<ReplicaAction>& actions) {
    std::vector<std::string> ids = IdsOf<StartReplica>(actions);
    for (const std::string& id : ids) EXPECT_TRUE(machine.OnReplicaStarted(id, "node-1"));
    return ids;
  }

  // Deploys `target` and brings every replica up: RUNNING and HEALTHY.
  std::vector<std::string> Deploy(DeploymentStateMachine& machine, DeploymentTarget target) {
    EXPECT_TRUE(machine.SetTarget(target).ok());
    std::vector<std::string> ids = StartAll(machine, machine.Tick());
    EXPECT_THAT(Of<StartReplica>(machine.Tick()), IsEmpty());
    EXPECT_EQ(machine.Status().status, DeploymentStatus::kHealthy);
    return ids;
  }

  static int InState(const DeploymentStateMachine& machine, ReplicaState state) {
    const auto states = machine.Status().replica_states;
    const auto it = states.find(std::string(Name(state)));
    return it == states.end() ? 0 : it->second;
  }

  FakeClock clock_;
};

// --- Start-up -------------------------------------------------------------------------------

TEST_F(DeploymentStateTest, StartsReplicasAndBecomesHealthy) {
  DeploymentStateMachine machine = NewMachine();
  ASSERT_TRUE(machine.SetTarget(Target(3)).ok());
  EXPECT_EQ(machine.Status().status, DeploymentStatus::kUpdating);
  EXPECT_EQ(machine.Status().status_trigger, DeploymentStatusTrigger::kConfigUpdateStarted);

  const std::vector<ReplicaAction> actions = machine.Tick();
  const std::vector<StartReplica> starts = Of<StartReplica>(actions);
  ASSERT_THAT(starts, SizeIs(3));
  for (const StartReplica& start : starts) {
    EXPECT_THAT(start.replica_id, StartsWith("app#d#"));
    EXPECT_EQ(start.replica_id.size(), std::string("app#d#").size() + 8);
    EXPECT_EQ(start.code_version, "v1");
  }
  EXPECT_THAT(machine.Status().replica_states, ElementsAre(Pair("STARTING", 3)));
  EXPECT_EQ(machine.Status().status, DeploymentStatus::kUpdating);

  StartAll(machine, actions);
  machine.Tick();
  const DeploymentStatusInfo status = machine.Status();
  EXPECT_EQ(status.name, "d");
  EXPECT_EQ(status.status, DeploymentStatus::kHealthy);
  EXPECT_EQ(status.status_trigger, DeploymentStatusTrigger::kConfigUpdateCompleted);
  EXPECT_THAT(status.replica_states, ElementsAre(Pair("RUNNING", 3)));
  ASSERT_THAT(machine.RunningReplicas(), SizeIs(3));
  EXPECT_EQ(machine.RunningReplicas()[0].max_ongoing_requests, 5);
  EXPECT_EQ(machine.RunningReplicas()[0].node_id, "node-1");
}

TEST_F(DeploymentStateTest, ReplicaIdsComeFromTheSeed) {
  DeploymentStateMachine first = NewMachine(7);
  DeploymentStateMachine again = NewMachine(7);
  DeploymentStateMachine other = NewMachine(8);
  for (DeploymentStateMachine* machine : {&first, &again, &other}) {
    ASSERT_TRUE(machine->SetTarget(Target(2)).ok());
  }
  const std::vector<std::string> ids = IdsOf<StartReplica>(first.Tick());
  EXPECT_EQ(IdsOf<StartReplica>(again.Tick()), ids);
  EXPECT_NE(IdsOf<StartReplica>(other.Tick()), ids);
  EXPECT_NE(ids[0], ids[1]);
}

TEST_F(DeploymentStateTest, InvalidTargetIsRejectedAndChangesNothing) {
  DeploymentStateMachine machine = NewMachine();
  const uint64_t generation = machine.records_generation();
  DeploymentTarget target = Target(1, "");
  EXPECT_EQ(machine.SetTarget(target).message(), "code_version must not be empty");
  target = Target(1);
  target.health_check_period_s = 0;
  EXPECT_EQ(machine.SetTarget(target).message(),
            "health_check_period_s must be greater than 0, got 0");
  target = Target(1);
  target.target_capacity.percent = 150;
  EXPECT_EQ(machine.SetTarget(target).code(), absl::StatusCode::kInvalidArgument);
  target = Target(1);
  target.autoscaling_config = AutoscalingConfig();
  target.autoscaling_config->max_replicas = 0;
  EXPECT_THAT(std::string(machine.SetTarget(target).message()), HasSubstr("max_replicas"));
  EXPECT_EQ(machine.records_generation(), generation);
  EXPECT_THAT(machine.Tick(), IsEmpty());
}

TEST_F(DeploymentStateTest, ConstructorFailuresAreRetriedThenTheDeployFails) {
  DeploymentStateMachine machine = NewMachine();
  ASSERT_TRUE(machine.SetTarget(Target(1)).ok());  // threshold min(3 × 1, 20) = 3
  std::vector<ReplicaAction> actions = machine.Tick();
  for (int attempt = 1; attempt <= 3; ++attempt) {
    const std::vector<std::string> started = IdsOf<StartReplica>(actions);
    ASSERT_THAT(started, SizeIs(1)) << attempt;
    ASSERT_TRUE(machine.OnReplicaStartFailed(started[0], "ValueError: boom"));
    if (attempt < 3) {
      EXPECT_EQ(machine.Status().message, "A replica failed to start with exception. Retrying " +
                                              std::to_string(3 - attempt) +
                                              " more time(s). Error:\nValueError: boom");
    }
    actions = machine.Tick();
    EXPECT_THAT(IdsOf<ForceKill>(actions), ElementsAre(started[0]));
    ASSERT_TRUE(machine.OnReplicaStopped(started[0]));
  }
  EXPECT_THAT(Of<StartReplica>(actions), IsEmpty());
  DeploymentStatusInfo status = machine.Status();
  EXPECT_EQ(status.status, DeploymentStatus::kDeployFailed);
  EXPECT_EQ(status.status_trigger, DeploymentStatusTrigger::kReplicaStartupFailed);
  EXPECT_THAT(status.message, HasSubstr("failed to start 3 times in a row"));
  EXPECT_THAT(status.message, HasSubstr("ValueError: boom"));

  // No more tries, however long it waits.
  clock_.Advance(absl::Hours(1));
  EXPECT_THAT(Of<StartReplica>(machine.Tick()), IsEmpty());
  EXPECT_EQ(machine.Status().status, DeploymentStatus::kDeployFailed);

  // Until a new target.
  ASSERT_TRUE(machine.SetTarget(Target(1, "v2")).ok());
  EXPECT_EQ(machine.Status().status, DeploymentStatus::kUpdating);
  EXPECT_THAT(Of<StartReplica>(machine.Tick()), SizeIs(1));
}

TEST_F(DeploymentStateTest, RetryCountIsCappedByMaxConstructorRetryCount) {
  DeploymentStateMachine machine = NewMachine();
  DeploymentTarget target = Target(10);
  target.max_constructor_retry_count = 4;  // min(3 × 10, 4) = 4
  ASSERT_TRUE(machine.SetTarget(target).ok());
  const std::vector<std::string> started = IdsOf<StartReplica>(machine.Tick());
  ASSERT_THAT(started, SizeIs(10));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(machine.OnReplicaStartFailed(started[i], "boom"));
  const std::vector<ReplicaAction> actions = machine.Tick();
  EXPECT_THAT(Of<StartReplica>(actions), IsEmpty());
  EXPECT_EQ(machine.Status().status, DeploymentStatus::kDeployFailed);
}

TEST_F(DeploymentStateTest, AReplicaThatStartedKeepsTheVersionFromFailing) {
  DeploymentStateMachine machine = NewMachine();
  ASSERT_TRUE(machine.SetTarget(Target(2)).ok());  // threshold 6
  const std::vector<std::string> started = IdsOf<StartReplica>(machine.Tick());
  ASSERT_TRUE(machine.OnReplicaStarted(started[0], "node-1"));
  std::string failing = started[1];
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(machine.OnReplicaStartFailed(failing, "flaky"));
    const std::vector<std::string> next = IdsOf<StartReplica>(machine.Tick());
    ASSERT_THAT(next, SizeIs(1)) << "retry " << i;  // still retried past the threshold
    failing = next[0];
  }
  EXPECT_NE(machine.Status().status, DeploymentStatus::kDeployFailed);
}

// --- Health ---------------------------------------------------------------------------------

TEST_F(DeploymentStateTest, ThreeFailedHealthChecksReplaceTheReplica) {
  DeploymentStateMachine machine = NewMachine();
  const std::string old = Deploy(machine, Target(1))[0];
  for (int failure = 1; failure <= 3; ++failure) {
    clock_.Advance(absl::Seconds(9));
    EXPECT_THAT(Of<CheckHealth>(machine.Tick()), IsEmpty());
    clock_.Advance(absl::Seconds(1));
    const std::vector<CheckHealth> checks = Of<CheckHealth>(machine.Tick());
    ASSERT_THAT(checks, SizeIs(1));
    EXPECT_EQ(checks[0].replica_id, old);
    EXPECT_EQ(checks[0].deadline, clock_.Now() + absl::Seconds(30));
    ASSERT_TRUE(machine.OnHealthCheckResult(old, checks[0].check, false, "RuntimeError: sick"));
  }
  DeploymentStatusInfo status = machine.Status();
  EXPECT_EQ(status.status, DeploymentStatus::kUnhealthy);
  EXPECT_EQ(status.status_trigger, DeploymentStatusTrigger::kHealthCheckFailed);
  EXPECT_THAT(status.message, HasSubstr("health check failed"));
  EXPECT_THAT(status.message, HasSubstr("RuntimeError: sick"));

  // Stopped gracefully, and its replacement starts at once, while it is still STOPPING.
  const std::vector<ReplicaAction> actions = machine.Tick();
  EXPECT_THAT(IdsOf<StopReplica>(actions), ElementsAre(old));
  const std::vector<std::string> replacement = StartAll(machine, actions);
  ASSERT_THAT(replacement, SizeIs(1));
  EXPECT_EQ(InState(machine, ReplicaState::kStopping), 1);
  machine.Tick();
  EXPECT_EQ(machine.Status().status, DeploymentStatus::kUnhealthy);  // until the old one is gone

  ASSERT_TRUE(machine.OnReplicaStopped(old));
  machine.Tick();
  status = machine.Status();
  EXPECT_EQ(status.status, DeploymentStatus::kHealthy);
  EXPECT_EQ(status.status_trigger, DeploymentStatusTrigger::kUnspecified);
}

TEST_F(DeploymentStateTest, OnlyFailuresInARowCount) {
  DeploymentStateMachine machine = NewMachine();
  const std::string id = Deploy(machine, Target(1))[0];
  for (const bool ok : {false, false, true, false, false}) {
    clock_.Advance(absl::Seconds(10));
    const std::vector<CheckHealth> checks = Of<CheckHealth>(machine.Tick());
    ASSERT_THAT(checks, SizeIs(1));
    ASSERT_TRUE(machine.OnHealthCheckResult(id, checks[0].check, ok, "flaky"));
  }
  EXPECT_THAT(IdsOf<StopReplica>(machine.Tick()), IsEmpty());
  EXPECT_EQ(machine.Status().status, DeploymentStatus::kHealthy);
}

TEST_F(DeploymentStateTest, AHealthCheckOverTheTimeoutIsAFailure) {
  DeploymentStateMachine machine = NewMachine();
  const std::string id = Deploy(machine, Target(1))[0];
  clock_.Advance(absl::Seconds(10));
  std::vector<CheckHealth> checks = Of<CheckHealth>(machine.Tick());
  ASSERT_THAT(checks, SizeIs(1));
  const uint64_t unanswered = checks[0].check;
  for (int timeout = 1; timeout <= 3; ++timeout) {
    clock_.Advance(absl::Seconds(29));
    EXPECT_THAT(Of<CheckHealth>(machine.Tick()), IsEmpty());
    clock_.Advance(absl::Seconds(1));
    const std::vector<ReplicaAction> actions = machine.Tick();
    if (timeout < 3) {
      // Failed, and the next check goes out at once (the period has passed).
      checks = Of<CheckHealth>(actions);
      ASSERT_THAT(checks, SizeIs(1));
    } else {
      EXPECT_THAT(IdsOf<StopReplica>(actions), ElementsAre(id));
    }
  }
  // The first check's late answer counts for nothing.
  EXPECT_FALSE(machine.OnHealthCheckResult(id, unanswered, true, ""));
  EXPECT_EQ(machine.Status().status, DeploymentStatus::kUnhealthy);
}

TEST_F(DeploymentStateTest, ADeadReplicaIsReplaced) {
  DeploymentStateMachine machine = NewMachine();
  const std::vector<std::string> ids = Deploy(machine, Target(2));
  ASSERT_TRUE(machine.OnReplicaDied(ids[0], "the node was lost"));
  EXPECT_EQ(machine.Status().status, DeploymentStatus::kUnhealthy);
  EXPECT_THAT(machine.Status().message, HasSubstr("the node was lost"));
  const std::vector<std::string> replacement = StartAll(machine, machine.Tick());
  ASSERT_THAT(replacement, SizeIs(1));
  EXPECT_NE(replacement[0], ids[0]);
  machine.Tick();
  EXPECT_EQ(machine.Status().status, DeploymentStatus::kHealthy);
  EXPECT_FALSE(machine.OnReplicaDied(ids[0], "again"));  // it is gone already
}

// --- Updates --------------------------------------------------------------------------------

TEST_F(DeploymentStateTest, RollingUpdateKeepsAtMostARolloutInTransition) {
  DeploymentStateMachine machine = NewMachine();
  const std::vector<std::string> old = Deploy(machine, Target(10));
  ASSERT_TRUE(machine.SetTarget(Target(10, "v2")).ok());
  EXPECT_EQ(machine.Status().status, DeploymentStatus::kUpdating);

  std::set<std::string> stopped;
  std::set<std::string> started;
  std::vector<std::string> stopping;  // stops are reported one control loop late
  for (int loop = 0; loop < 100 && machine.Status().status != DeploymentStatus::kHealthy; ++loop) {
    const std::vector<ReplicaAction> actions = machine.Tick();
    // At most max(int(0.2 × 10), 1) = 2 replicas missing from service, and 2 starting.
    EXPECT_GE(InState(machine, ReplicaState::kRunning), 8) << loop;
    EXPECT_LE(InState(machine, ReplicaState::kStarting), 2) << loop;
    EXPECT_THAT(Of<ForceKill>(actions), IsEmpty());
    for (const std::string& id : stopping) ASSERT_TRUE(machine.OnReplicaStopped(id));
    stopping = IdsOf<StopReplica>(actions);
    stopped.insert(stopping.begin(), stopping.end());
    for (const std::string& id : StartAll(machine, actions)) started.insert(id);
  }
  EXPECT_EQ(machine.Status().status, DeploymentStatus::kHealthy);
  EXPECT_EQ(machine.Status().status_trigger, DeploymentStatusTrigger::kConfigUpdateCompleted);
  EXPECT_EQ(stopped, std::set<std::string>(old.begin(), old.end()));
  EXPECT_THAT(started, SizeIs(10));
  for (const ReplicaRecord& record : machine.Records().replicas) {
    EXPECT_EQ(record.code_version, "v2");
  }
}

TEST_F(DeploymentStateTest, UserConfigChangeReconfiguresWithoutRestarting) {
  DeploymentStateMachine machine = NewMachine();
  const std::vector<std::string> ids = Deploy(machine, Target(3));
  DeploymentTarget target = Target(3);
  target.replica_config.user_config = R"({"threshold": 2})";
  ASSERT_TRUE(machine.SetTarget(target).ok());
  EXPECT_EQ(machine.Status().status, DeploymentStatus::kUpdating);

  std::vector<std::string> reconfigured;
  for (int loop = 0; loop < 10 && machine.Status().status != DeploymentStatus::kHealthy; ++loop) {
    const std::vector<ReplicaAction> actions = machine.Tick();
    EXPECT_THAT(Of<StartReplica>(actions), IsEmpty());
    EXPECT_THAT(Of<StopReplica>(actions), IsEmpty());
    EXPECT_THAT(Of<ForceKill>(actions), IsEmpty());
    EXPECT_LE(InState(machine, ReplicaState::kUpdating), 1);  // rollout max(int(0.6), 1)
    for (const Reconfigure& reconfigure : Of<Reconfigure>(actions)) {
      EXPECT_EQ(reconfigure.config.user_config, R"({"threshold": 2})");
      reconfigured.push_back(reconfigure.replica_id);
      ASSERT_TRUE(machine.OnReconfigured(reconfigure.replica_id, true, ""));
    }
  }
  EXPECT_EQ(machine.Status().status, DeploymentStatus::kHealthy);
  EXPECT_THAT(reconfigured, UnorderedElementsAre(ids[0], ids[1], ids[2]));
  for (const ReplicaRecord& record : machine.Records().replicas) {
    EXPECT_EQ(record.config.user_config, R"({"threshold": 2})");
  }
}

TEST_F(DeploymentStateTest, ChangingOnlyTheCountScales) {
  DeploymentStateMachine machine = NewMachine();
  Deploy(machine, Target(1));
  ASSERT_TRUE(machine.SetTarget(Target(3)).ok());
  DeploymentStatusInfo status = machine.Status();
  EXPECT_EQ(status.status, DeploymentStatus::kUpscaling);
  EXPECT_EQ(status.status_trigger, DeploymentStatusTrigger::kConfigUpdateStarted);
  EXPECT_EQ(status.message, "Upscaling from 1 to 3 replicas.");
  StartAll(machine, machine.Tick());
  machine.Tick();
  EXPECT_EQ(machine.Status().status_trigger, DeploymentStatusTrigger::kUpscaleCompleted);
  // The same target again is no change at all.
  const uint64_t generation = machine.records_generation();
  ASSERT_TRUE(machine.SetTarget(Target(3)).ok());
  EXPECT_EQ(machine.records_generation(), generation);
}

// --- Stopping -------------------------------------------------------------------------------

TEST_F(DeploymentStateTest, GracefulStopThenForceKillAfterTheTimeout) {
  DeploymentStateMachine machine = NewMachine();
  Deploy(machine, Target(2));
  ASSERT_TRUE(machine.SetTarget(Target(1)).ok());
  EXPECT_EQ(machine.Status().status, DeploymentStatus::kDownscaling);
  const std::vector<StopReplica> stops = Of<StopReplica>(machine.Tick());
  ASSERT_THAT(stops, SizeIs(1));
  EXPECT_EQ(stops[0].graceful_deadline, clock_.Now() + absl::Seconds(20));
  EXPECT_EQ(InState(machine, ReplicaState::kStopping), 1);

  clock_.Advance(absl::Seconds(19));
  EXPECT_THAT(Of<ForceKill>(machine.Tick()), IsEmpty());
  clock_.Advance(absl::Seconds(1));
  EXPECT_THAT(IdsOf<ForceKill>(machine.Tick()), ElementsAre(stops[0].replica_id));
  EXPECT_THAT(Of<ForceKill>(machine.Tick()), IsEmpty());  // once

  ASSERT_TRUE(machine.OnReplicaStopped(stops[0].replica_id));
  machine.Tick();
  EXPECT_EQ(machine.Status().status, DeploymentStatus::kHealthy);
  EXPECT_EQ(machine.Status().status_trigger, DeploymentStatusTrigger::kDownscaleCompleted);
}

TEST_F(DeploymentStateTest, DownscaleStopsReplicasNotYetPlacedFirst) {
  DeploymentStateMachine machine = NewMachine();
  ASSERT_TRUE(machine.SetTarget(Target(3)).ok());
  const std::vector<std::string> ids = IdsOf<StartReplica>(machine.Tick());
  ASSERT_TRUE(machine.OnReplicaStarted(ids[0], "node-1"));
  ASSERT_TRUE(machine.OnReplicaScheduled(ids[1], "node-2"));
  ASSERT_TRUE(machine.SetTarget(Target(1)).ok());
  const std::vector<ReplicaAction> actions = machine.Tick();
  // Both starting replicas go, without a graceful stop; the running one stays.
  EXPECT_THAT(IdsOf<ForceKill>(actions), UnorderedElementsAre(ids[1], ids[2]));
  EXPECT_THAT(Of<StopReplica>(actions), IsEmpty());
}

// --- Waiting for resources ------------------------------------------------------------------

TEST_F(DeploymentStateTest, ReplicasWaitingForResourcesAreExplainedAfter30Seconds) {
  DeploymentStateMachine machine = NewMachine();
  ASSERT_TRUE(machine.SetTarget(Target(1)).ok());
  const std::string id = IdsOf<StartReplica>(machine.Tick())[0];
  ASSERT_TRUE(machine.OnReplicaPending(id, "needs {GPU: 1}: no node has a free GPU"));
  clock_.Advance(absl::Seconds(30));
  machine.Tick();
  EXPECT_THAT(machine.Status().message, Not(HasSubstr("30s")));
  clock_.Advance(absl::Seconds(1));
  machine.Tick();
  const std::string message = machine.Status().message;
  EXPECT_THAT(message, HasSubstr("Deployment 'd' in application 'app' has 1 replicas that have "
                                 "taken more than 30s to be scheduled."));
  EXPECT_THAT(message, HasSubstr("needs {GPU: 1}: no node has a free GPU"));
  EXPECT_EQ(machine.Status().status, DeploymentStatus::kUpdating);  // Serve keeps waiting

  ASSERT_TRUE(machine.OnReplicaScheduled(id, "node-9"));
  machine.Tick();
  EXPECT_THAT(machine.Status().message, HasSubstr("have taken more than 30s to initialize"));
}

TEST_F(DeploymentStateTest, EachReplicaShowsItsStateNodeAndWhyItIsNotPlaced) {
  DeploymentStateMachine machine = NewMachine();
  ASSERT_TRUE(machine.SetTarget(Target(2)).ok());
  const absl::Time started = clock_.Now();
  const std::vector<std::string> ids = IdsOf<StartReplica>(machine.Tick());
  ASSERT_TRUE(machine.OnReplicaPending(ids[0], "waiting for resources: {CPU: 1}"));
  clock_.Advance(absl::Seconds(5));
  ASSERT_TRUE(machine.OnReplicaStarted(ids[1], "node-2"));
  const std::vector<ReplicaDetails> replicas = machine.Replicas();
  ASSERT_EQ(replicas.size(), 2u);
  EXPECT_EQ(replicas[0].replica_id, ids[0]);
  EXPECT_EQ(replicas[0].state, ReplicaState::kStarting);
  EXPECT_EQ(replicas[0].node_id, "");
  EXPECT_EQ(replicas[0].state_since, started);
  EXPECT_EQ(replicas[0].pending_explanation, "waiting for resources: {CPU: 1}");
  EXPECT_EQ(replicas[1].state, ReplicaState::kRunning);
  EXPECT_EQ(replicas[1].node_id, "node-2");
  EXPECT_EQ(replicas[1].state_since, started + absl::Seconds(5));
  EXPECT_EQ(replicas[1].pending_explanation, "");
  // Placed, it no longer waits for resources.
  ASSERT_TRUE(machine.OnReplicaScheduled(ids[0], "node-1"));
  EXPECT_EQ(machine.Replicas()[0].pending_explanation, "");
  EXPECT_EQ(machine.Replicas()[0].node_id, "node-1");
}

// --- Recovery -------------------------------------------------------------------------------

TEST_F(DeploymentStateTest, RecoveryRebuildsFromTheRecords) {
  DeploymentStateMachine before = NewMachine();
  const std::vector<std::string> ids = Deploy(before, Target(3));
  ASSERT_TRUE(before.SetTarget(Target(2)).ok());
  const std::vector<std::string> stopping = IdsOf<StopReplica>(before.Tick());
  ASSERT_THAT(stopping, SizeIs(1));
  const DeploymentRecords records = before.Records();
  ASSERT_THAT(records.replicas, SizeIs(3));

  DeploymentStateMachine after = NewMachine();
  ASSERT_TRUE(after.Recover(records).ok());
  EXPECT_EQ(after.Records(), records);
  EXPECT_EQ(InState(after, ReplicaState::kRecovering), 2);
  EXPECT_EQ(InState(after, ReplicaState::kStopping), 1);
  EXPECT_THAT(after.RunningReplicas(), IsEmpty());

  const std::vector<ReplicaAction> actions = after.Tick();
  EXPECT_THAT(Of<StartReplica>(actions), IsEmpty());  // recovering replicas count
  EXPECT_THAT(IdsOf<StopReplica>(actions), ElementsAre(stopping[0]));
  const std::vector<CheckHealth> checks = Of<CheckHealth>(actions);
  ASSERT_THAT(checks, SizeIs(2));
  for (const CheckHealth& check : checks) {
    ASSERT_TRUE(after.OnHealthCheckResult(check.replica_id, check.check, true, ""));
  }
  EXPECT_EQ(InState(after, ReplicaState::kRunning), 2);
  ASSERT_TRUE(after.OnReplicaStopped(stopping[0]));
  after.Tick();
  EXPECT_EQ(after.Status().status, DeploymentStatus::kHealthy);

  // New replicas never reuse an id of the previous controller's.
  ASSERT_TRUE(after.SetTarget(Target(4)).ok());
  for (const std::string& id : IdsOf<StartReplica>(after.Tick())) {
    EXPECT_THAT(ids, Not(Contains(id)));
  }
}

TEST_F(DeploymentStateTest, ARecoveringReplicaThatNeverAnswersIsReplaced) {
  DeploymentStateMachine before = NewMachine();
  Deploy(before, Target(1));
  DeploymentStateMachine after = NewMachine();
  ASSERT_TRUE(after.Recover(before.Records()).ok());
  const std::string id = IdsOf<CheckHealth>(after.Tick())[0];
  clock_.Advance(absl::Seconds(31));
  EXPECT_THAT(IdsOf<ForceKill>(after.Tick()), ElementsAre(id));
  EXPECT_THAT(Of<StartReplica>(after.Tick()), SizeIs(1));  // the next control loop replaces it
}

TEST_F(DeploymentStateTest, RecoverNeedsAFreshMachineAndSoundRecords) {
  DeploymentStateMachine machine = NewMachine();
  DeploymentRecords records;
  records.target = Target(1);
  records.replicas = {ReplicaRecord{.replica_id = "app#d#a", .code_version = "v1"},
                      ReplicaRecord{.replica_id = "app#d#a", .code_version = "v1"}};
  EXPECT_EQ(machine.Recover(records).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(machine.Tick(), IsEmpty());
  records.replicas.pop_back();
  ASSERT_TRUE(machine.Recover(records).ok());
  EXPECT_EQ(machine.Recover(records).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(DeploymentStateTest, AFailedDeployStaysFailedAfterRecovery) {
  DeploymentStateMachine before = NewMachine();
  ASSERT_TRUE(before.SetTarget(Target(1)).ok());
  for (int attempt = 0; attempt < 3; ++attempt) {
    const std::string id = IdsOf<StartReplica>(before.Tick())[0];
    ASSERT_TRUE(before.OnReplicaStartFailed(id, "boom"));
    ASSERT_TRUE(before.OnReplicaStopped(id));
  }
  before.Tick();
  ASSERT_EQ(before.Status().status, DeploymentStatus::kDeployFailed);
  DeploymentStateMachine after = NewMachine();
  ASSERT_TRUE(after.Recover(before.Records()).ok());
  EXPECT_THAT(Of<StartReplica>(after.Tick()), IsEmpty());
  EXPECT_EQ(after.Status().status, DeploymentStatus::kDeployFailed);
}

// --- Autoscaling ----------------------------------------------------------------------------

DeploymentTarget Autoscaled(int min, int max) {
  DeploymentTarget target = Target(1);
  AutoscalingConfig config;
  config.min_replicas = min;
  config.max_replicas = max;
  config.upscale_delay_s = 0;
  config.downscale_delay_s = 0;
  target.autoscaling_config = config;
  return target;
}

TEST_F(DeploymentStateTest, AutoscalingSetsTheTargetFromTheSamples) {
  DeploymentStateMachine machine = NewMachine();
  Deploy(machine, Autoscaled(1, 5));
  ASSERT_TRUE(machine.RecordAutoscalingSample("handle-1", clock_.Now(), 6).ok());
  const std::vector<ReplicaAction> actions = machine.Tick();  // 6 / (2 × 1): 3 replicas
  EXPECT_THAT(Of<StartReplica>(actions), SizeIs(2));
  DeploymentStatusInfo status = machine.Status();
  EXPECT_EQ(status.status, DeploymentStatus::kUpscaling);
  EXPECT_EQ(status.status_trigger, DeploymentStatusTrigger::kAutoscaling);
  EXPECT_EQ(status.message, "Upscaling from 1 to 3 replicas.");
  const DeploymentMetrics metrics = machine.Metrics();
  EXPECT_TRUE(metrics.autoscaling);
  EXPECT_EQ(metrics.autoscaling_target_replicas, 3);
  EXPECT_EQ(metrics.autoscaling_total_requests, 6);
  EXPECT_EQ(metrics.autoscaling_target_ongoing_requests, 2);

  StartAll(machine, actions);
  machine.Tick();
  EXPECT_EQ(machine.Status().status, DeploymentStatus::kHealthy);
  EXPECT_EQ(machine.Status().status_trigger, DeploymentStatusTrigger::kUpscaleCompleted);
}

TEST_F(DeploymentStateTest, ColdStartFromZeroReplicas) {
  DeploymentStateMachine machine = NewMachine();
  ASSERT_TRUE(machine.SetTarget(Autoscaled(0, 5)).ok());
  EXPECT_THAT(machine.Tick(), IsEmpty());  // min 0: nothing runs until a request waits
  ASSERT_TRUE(machine.RecordAutoscalingSample("proxy-1", clock_.Now(), 1).ok());
  EXPECT_THAT(Of<StartReplica>(machine.Tick()), SizeIs(1));
  EXPECT_EQ(machine.target_num_replicas(), 1);
}

TEST_F(DeploymentStateTest, NoAutoscalingWhileReplicasRecover) {
  DeploymentStateMachine before = NewMachine();
  Deploy(before, Autoscaled(1, 5));
  DeploymentStateMachine after = NewMachine();
  ASSERT_TRUE(after.Recover(before.Records()).ok());
  ASSERT_TRUE(after.RecordAutoscalingSample("handle-1", clock_.Now(), 100).ok());
  const std::vector<ReplicaAction> actions = after.Tick();
  EXPECT_THAT(Of<StartReplica>(actions), IsEmpty());
  EXPECT_EQ(after.target_num_replicas(), 1);
  const CheckHealth check = Of<CheckHealth>(actions)[0];
  ASSERT_TRUE(after.OnHealthCheckResult(check.replica_id, check.check, true, ""));
  EXPECT_THAT(Of<StartReplica>(after.Tick()), SizeIs(4));  // recovered: 100 ongoing wants 5
}

// --- Delete ---------------------------------------------------------------------------------

TEST_F(DeploymentStateTest, DeleteStopsEverythingThenIsDeleted) {
  DeploymentStateMachine machine = NewMachine();
  const std::vector<std::string> ids = Deploy(machine, Target(2));
  machine.Delete();
  EXPECT_EQ(machine.Status().status, DeploymentStatus::kUpdating);
  EXPECT_EQ(machine.Status().status_trigger, DeploymentStatusTrigger::kDeleting);
  EXPECT_TRUE(machine.Records().deleting);
  const std::vector<std::string> stopped = IdsOf<StopReplica>(machine.Tick());
  EXPECT_THAT(stopped, UnorderedElementsAre(ids[0], ids[1]));
  EXPECT_FALSE(machine.Deleted());
  ASSERT_TRUE(machine.OnReplicaStopped(ids[0]));
  EXPECT_FALSE(machine.Deleted());
  ASSERT_TRUE(machine.OnReplicaStopped(ids[1]));
  EXPECT_TRUE(machine.Deleted());
  EXPECT_THAT(machine.Tick(), IsEmpty());
}

// --- Status transitions and metrics ---------------------------------------------------------

TEST(ApplyStatusEvent, FollowsRaysTransitions) {
  DeploymentStatusInfo info;  // UPDATING, CONFIG_UPDATE_STARTED
  ApplyStatusEvent(info, StatusEvent::kManuallyIncreaseNumReplicas, "ignored");
  EXPECT_EQ(info.status, DeploymentStatus::kUpdating);
  EXPECT_EQ(info.message, "");
  ApplyStatusEvent(info, StatusEvent::kHealthCheckFailed, "sick");
  EXPECT_EQ(info.status, DeploymentStatus::kDeployFailed);
  EXPECT_EQ(info.status_trigger, DeploymentStatusTrigger::kHealthCheckFailed);
  ApplyStatusEvent(info, StatusEvent::kHealthy);
  EXPECT_EQ(info.status, DeploymentStatus::kHealthy);
  EXPECT_EQ(info.status_trigger, DeploymentStatusTrigger::kUnspecified);
  ApplyStatusEvent(info, StatusEvent::kAutoscaleUp, "up");
  EXPECT_EQ(info.status, DeploymentStatus::kUpscaling);
  EXPECT_EQ(info.status_trigger, DeploymentStatusTrigger::kAutoscaling);
  ApplyStatusEvent(info, StatusEvent::kManuallyDecreaseNumReplicas, "down");
  EXPECT_EQ(info.status, DeploymentStatus::kDownscaling);
  EXPECT_EQ(info.status_trigger, DeploymentStatusTrigger::kConfigUpdateStarted);
  ApplyStatusEvent(info, StatusEvent::kReplicaStartupFailed, "boom");
  EXPECT_EQ(info.status, DeploymentStatus::kUnhealthy);
  EXPECT_EQ(info.status_trigger, DeploymentStatusTrigger::kReplicaStartupFailed);
  ApplyStatusEvent(info, StatusEvent::kInternalError, "bug");
  EXPECT_EQ(info.status_trigger, DeploymentStatusTrigger::kInternalError);
  ApplyStatusEvent(info, StatusEvent::kDelete);
  EXPECT_EQ(info.status, DeploymentStatus::kUpdating);
  EXPECT_EQ(info.status_trigger, DeploymentStatusTrigger::kDeleting);
}

TEST(ApplyStatusEvent, HealthyStaysHealthyWithItsMessage) {
  DeploymentStatusInfo info;
  info.status = DeploymentStatus::kHealthy;
  info.message = "kept";
  ApplyStatusEvent(info, StatusEvent::kHealthy);
  ApplyStatusEvent(info, StatusEvent::kReplicaStartupFailed, "ignored");
  EXPECT_EQ(info.status, DeploymentStatus::kHealthy);
  EXPECT_EQ(info.message, "kept");
}

TEST_F(DeploymentStateTest, MetricsReportHealthAndStarts) {
  DeploymentStateMachine machine = NewMachine();
  const std::vector<std::string> ids = Deploy(machine, Target(2));
  clock_.Advance(absl::Seconds(10));
  const std::vector<CheckHealth> checks = Of<CheckHealth>(machine.Tick());
  ASSERT_THAT(checks, SizeIs(2));
  ASSERT_TRUE(machine.OnHealthCheckResult(checks[0].replica_id, checks[0].check, false, "x"));
  const DeploymentMetrics metrics = machine.Metrics();
  EXPECT_EQ(metrics.replica_starts, 2u);
  EXPECT_EQ(metrics.replica_states, machine.Status().replica_states);
  EXPECT_FALSE(metrics.autoscaling);
  std::map<std::string, bool> healthy;
  for (const ReplicaHealth& replica : metrics.replica_healthy) {
    healthy[replica.replica_id] = replica.healthy;
  }
  EXPECT_THAT(healthy, UnorderedElementsAre(Pair(checks[0].replica_id, false),
                                            Pair(checks[1].replica_id, true)));
}

TEST(ControllerMetricNames, AreRaysValidPrometheusNames) {
  for (std::string_view name :
       {kReplicaHealthyMetric, kReplicaStartsMetric, kControlLoopsMetric,
        kAutoscalingTargetReplicasMetric, kAutoscalingDesiredReplicasMetric,
        kAutoscalingTotalRequestsMetric, kAutoscalingTargetOngoingRequestsMetric}) {
    EXPECT_TRUE(metrics::ValidateMetricName(name).ok()) << name;
    EXPECT_THAT(std::string(name), StartsWith("ray_serve_"));
  }
  // Where Ray has none, the project's prefix.
  EXPECT_TRUE(metrics::ValidateMetricName(kReplicaStatesMetric).ok());
  EXPECT_THAT(std::string(kReplicaStatesMetric), StartsWith("tessera_serve_"));
}

}  // namespace
}  // namespace tessera::serve

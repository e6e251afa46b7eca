#include "node/agent_state.h"

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hardware/node_label_keys.h"
#include "node/agent_test_util.h"
#include "node/worker_env.h"

namespace tessera {
namespace {

using node_testing::MakeState;
using node_testing::Res;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

LeaseAsk Ask(std::string_view resources) {
  LeaseAsk ask;
  ask.resources = Res(resources);
  return ask;
}

LeaseRecord Grant(AgentState& state, const LeaseAsk& ask) {
  auto decision = state.TryLease(ask);
  EXPECT_TRUE(decision.ok()) << decision.status();
  EXPECT_EQ(decision->status, ScheduleStatus::kPlaced) << decision->explanation;
  return *decision->lease;
}

const DeviceGrant* GrantOf(const Allocation& a, std::string_view resource) {
  for (const DeviceGrant& g : a.devices) {
    if (g.resource == resource) return &g;
  }
  return nullptr;
}

TEST(AgentStateTest, NodeSpecCarriesNodeIdLabelAndDevices) {
  auto state = MakeState("h100-sxm-8.yaml", "gpu-a");
  EXPECT_EQ(state->spec().labels.at(std::string(labels::kNodeId)), "gpu-a");
  EXPECT_EQ(state->spec().resources.Get("GPU"), Quantity::FromInt(8));
  ASSERT_TRUE(state->spec().devices.contains("GPU"));
  EXPECT_EQ(state->spec().devices.at("GPU")->count, 8);
}

TEST(AgentStateTest, RefusesABadNodeId) {
  auto loaded = node_testing::LoadExample("cpu-only.yaml");
  auto state = AgentState::Create(NodeId("bad id!"), loaded.hardware);
  EXPECT_EQ(state.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(state.status().message(), HasSubstr("node id"));
}

TEST(AgentStateTest, GrantsWholeGpusWithDeviceIdsAndIsolationEnv) {
  auto state = MakeState("h100-sxm-8.yaml");
  LeaseRecord lease = Grant(*state, Ask("CPU=1,GPU=2"));
  const DeviceGrant* gpus = GrantOf(lease.allocation, "GPU");
  ASSERT_NE(gpus, nullptr);
  ASSERT_EQ(gpus->instances.size(), 2u);
  EXPECT_EQ(state->Available().Get("GPU"), Quantity::FromInt(6));

  auto env = LeaseIsolationEnv(state->hardware(), lease.allocation);
  ASSERT_TRUE(env.ok()) << env.status();
  const auto map = IsolationEnvMap(*env);
  EXPECT_EQ(map.at("CUDA_VISIBLE_DEVICES"),
            absl::StrCat(gpus->instances[0], ",", gpus->instances[1]));

  // The worker record exists from the grant on, and names the lease.
  auto worker = state->FindWorker(lease.worker);
  ASSERT_TRUE(worker.has_value());
  EXPECT_EQ(worker->lease, lease.id);
  EXPECT_EQ(worker->state, WorkerState::kStarting);
}

TEST(AgentStateTest, LeaseIdsAreUniqueAndCarryThePrefix) {
  LoadedNode loaded = node_testing::LoadExample("cpu-only.yaml");
  auto state = AgentState::Create(loaded.id, loaded.hardware, AgentStateOptions{"abc123"});
  ASSERT_TRUE(state.ok());
  LeaseRecord a = Grant(**state, Ask("CPU=1"));
  LeaseRecord b = Grant(**state, Ask("CPU=1"));
  EXPECT_NE(a.id, b.id);
  EXPECT_NE(a.worker, b.worker);
  EXPECT_THAT(a.id.value(), HasSubstr("abc123"));
  EXPECT_THAT(a.worker.value(), HasSubstr("abc123"));
}

TEST(AgentStateTest, FractionalGpusShareOneDeviceAndWholeOnesAvoidIt) {
  auto state = MakeState("h100-sxm-8.yaml");
  LeaseRecord a = Grant(*state, Ask("GPU=0.5"));
  LeaseRecord b = Grant(*state, Ask("GPU=0.5"));
  const DeviceGrant* ga = GrantOf(a.allocation, "GPU");
  const DeviceGrant* gb = GrantOf(b.allocation, "GPU");
  ASSERT_NE(ga, nullptr);
  ASSERT_NE(gb, nullptr);
  EXPECT_EQ(ga->instances, gb->instances);  // best fit: the half-used device first
  EXPECT_THAT(ga->amounts, ElementsAre(Quantity::Parse("0.5").value()));
  // Both workers see that one device.
  auto env = LeaseIsolationEnv(state->hardware(), b.allocation);
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(IsolationEnvMap(*env).at("CUDA_VISIBLE_DEVICES"), absl::StrCat(ga->instances[0]));

  // Seven whole GPUs are left, none of them the shared one.
  LeaseRecord whole = Grant(*state, Ask("GPU=7"));
  const DeviceGrant* gw = GrantOf(whole.allocation, "GPU");
  ASSERT_NE(gw, nullptr);
  EXPECT_THAT(gw->instances, ::testing::Not(::testing::Contains(ga->instances[0])));
  auto more = state->TryLease(Ask("GPU=1"));
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(more->status, ScheduleStatus::kPending);
}

TEST(AgentStateTest, RefusesMalformedRequests) {
  auto state = MakeState("h100-sxm-8.yaml");
  auto bad = state->TryLease(Ask("GPU=1.5"));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(state->Leases(), IsEmpty());
}

TEST(AgentStateTest, SpillbackDecision) {
  auto state = MakeState("h100-sxm-8.yaml");
  // Busy: pending here, another node may take it.
  Grant(*state, Ask("GPU=8"));
  auto busy = state->TryLease(Ask("GPU=1"));
  ASSERT_TRUE(busy.ok());
  EXPECT_EQ(busy->status, ScheduleStatus::kPending);
  EXPECT_THAT(busy->explanation, HasSubstr("n1"));
  EXPECT_EQ(NextStepAfterLocal(*busy, 0, 4), LeaseNextStep::kAskHead);
  // The hop limit: answered here with the explanation.
  EXPECT_EQ(NextStepAfterLocal(*busy, 4, 4), LeaseNextStep::kAnswerHere);

  // More than this node has: infeasible here, ask the head.
  auto big = state->TryLease(Ask("GPU=16"));
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(NextStepAfterLocal(*big, 1, 4), LeaseNextStep::kAskHead);

  // A label selector this node does not match.
  LeaseAsk tpu = Ask("CPU=1");
  tpu.selectors =
      FallbackList::FromSelectors({*ParseLabelSelector("tessera.io/accelerator-type=TPU-V6E")});
  auto mismatch = state->TryLease(tpu);
  ASSERT_TRUE(mismatch.ok());
  EXPECT_EQ(mismatch->status, ScheduleStatus::kInfeasible);
  EXPECT_THAT(mismatch->explanation, HasSubstr("TPU-V6E"));
  EXPECT_EQ(NextStepAfterLocal(*mismatch, 0, 4), LeaseNextStep::kAskHead);

  // A placed lease is granted whatever the hops.
  LocalDecision placed;
  placed.status = ScheduleStatus::kPlaced;
  EXPECT_EQ(NextStepAfterLocal(placed, 9, 4), LeaseNextStep::kGranted);
}

TEST(AgentStateTest, SelectorOnNodeIdMatchesThisNode) {
  auto state = MakeState("cpu-only.yaml", "cpu-7");
  LeaseAsk ask = Ask("CPU=1");
  ask.selectors = FallbackList::FromSelectors({*ParseLabelSelector("tessera.io/node-id=cpu-7")});
  Grant(*state, ask);
}

TEST(AgentStateTest, WorkerExitReleasesLeaseAndKeepsReason) {
  auto state = MakeState("h100-sxm-8.yaml");
  LeaseRecord lease = Grant(*state, Ask("GPU=8"));
  ASSERT_TRUE(state->WorkerStarted(lease.worker, 1234, {"/bin/true"}, {}, "/o", "/e").ok());
  EXPECT_EQ(state->running_workers(), 1);
  EXPECT_FALSE(state->AwaitWorkerExit(lease.worker, absl::ZeroDuration()));

  WorkerExitInfo exit{-1, 9, false, "killed by signal 9 (SIGKILL)"};
  ASSERT_TRUE(state->WorkerExited(lease.worker, exit).ok());
  EXPECT_THAT(state->Leases(), IsEmpty());
  EXPECT_EQ(state->Available().Get("GPU"), Quantity::FromInt(8));
  auto worker = state->FindWorker(lease.worker);
  ASSERT_TRUE(worker.has_value());
  EXPECT_EQ(worker->state, WorkerState::kExited);
  EXPECT_EQ(worker->exit, exit);
  EXPECT_EQ(worker->pid, 1234);
  EXPECT_TRUE(state->AwaitWorkerExit(lease.worker, absl::ZeroDuration()));
  EXPECT_EQ(state->running_workers(), 0);

  // A second exit report changes nothing; the GPUs can be leased again.
  ASSERT_TRUE(state->WorkerExited(lease.worker, WorkerExitInfo{0, 0, false, "x"}).ok());
  EXPECT_EQ(state->FindWorker(lease.worker)->exit, exit);
  Grant(*state, Ask("GPU=8"));
  EXPECT_EQ(state->WorkerExited(WorkerId("nope"), exit).code(), absl::StatusCode::kNotFound);
}

TEST(AgentStateTest, AReturnedLeaseFreesWhatItHeldWhileTheWorkerRunsOn) {
  auto state = MakeState("h100-sxm-8.yaml");
  const Quantity cpus = state->Available().Get("CPU");
  LeaseRecord lease = Grant(*state, Ask("CPU=2"));
  ASSERT_TRUE(state->WorkerStarted(lease.worker, 1234, {"/bin/true"}, {}, "/o", "/e").ok());
  ASSERT_TRUE(state->ReturnLease(lease.worker).ok());
  EXPECT_THAT(state->Leases(), IsEmpty());
  EXPECT_EQ(state->Available().Get("CPU"), cpus);
  auto worker = state->FindWorker(lease.worker);
  ASSERT_TRUE(worker.has_value());
  EXPECT_EQ(worker->state, WorkerState::kRunning);
  EXPECT_TRUE(worker->lease_returned);
  EXPECT_TRUE(worker->allocation.resources.empty());
  // Only once; its exit later releases nothing more.
  EXPECT_EQ(state->ReturnLease(lease.worker).code(), absl::StatusCode::kFailedPrecondition);
  Grant(*state, Ask("CPU=2"));
  ASSERT_TRUE(state->WorkerExited(lease.worker, WorkerExitInfo{0, 0, false, "exited"}).ok());
  EXPECT_EQ(state->Available().Get("CPU").raw(), cpus.raw() - Quantity::FromInt(2).raw());
  EXPECT_EQ(state->ReturnLease(lease.worker).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(state->ReturnLease(WorkerId("nope")).code(), absl::StatusCode::kNotFound);
}

TEST(AgentStateTest, AWorkerWhoseLeaseHoldsDevicesKeepsIt) {
  auto state = MakeState("h100-sxm-8.yaml");
  LeaseRecord lease = Grant(*state, Ask("GPU=1"));
  ASSERT_TRUE(state->WorkerStarted(lease.worker, 1234, {"/bin/true"}, {}, "/o", "/e").ok());
  const absl::Status refused = state->ReturnLease(lease.worker);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("holds devices"));
  EXPECT_EQ(state->Leases().size(), 1u);
  EXPECT_EQ(state->Available().Get("GPU"), Quantity::FromInt(7));
}

TEST(AgentStateTest, ExitBeforeStartRecordIsKept) {
  auto state = MakeState("cpu-only.yaml");
  LeaseRecord lease = Grant(*state, Ask("CPU=1"));
  ASSERT_TRUE(
      state->WorkerExited(lease.worker, WorkerExitInfo{0, 0, false, "exited with code 0"}).ok());
  ASSERT_TRUE(state->WorkerStarted(lease.worker, 77, {"true"}, {}, "/o", "/e").ok());
  EXPECT_EQ(state->FindWorker(lease.worker)->state, WorkerState::kExited);
}

TEST(AgentStateTest, FailedStartReleasesTheLease) {
  auto state = MakeState("h100-sxm-8.yaml");
  LeaseRecord lease = Grant(*state, Ask("GPU=1"));
  state->WorkerFailedToStart(lease.worker, "cannot execute /nope: No such file or directory");
  EXPECT_THAT(state->Leases(), IsEmpty());
  auto worker = state->FindWorker(lease.worker);
  ASSERT_TRUE(worker.has_value());
  EXPECT_EQ(worker->exit->reason, "cannot execute /nope: No such file or directory");
}

TEST(AgentStateTest, AwaitWorkerExitWakesOnExit) {
  auto state = MakeState("cpu-only.yaml");
  LeaseRecord lease = Grant(*state, Ask("CPU=1"));
  std::thread exiter([&] {
    ASSERT_TRUE(state->WorkerExited(lease.worker, WorkerExitInfo{0, 0, false, "ok"}).ok());
  });
  EXPECT_TRUE(state->AwaitWorkerExit(lease.worker, absl::Seconds(60)));
  exiter.join();
  EXPECT_FALSE(state->AwaitWorkerExit(WorkerId("unknown"), absl::Seconds(60)));
}

// The exact instances the head would choose.
BundleAsk Bundle(int index, std::string_view resources, std::vector<int> gpus) {
  BundleAsk ask;
  ask.index = index;
  ask.resources = Res(resources);
  if (!gpus.empty()) {
    DeviceGrant g;
    g.resource = "GPU";
    g.instances = gpus;
    g.amounts.assign(gpus.size(), Quantity::FromInt(1));
    ask.devices.push_back(g);
  }
  return ask;
}

TEST(AgentStateTest, PrepareTakesExactInstancesAndIsIdempotent) {
  auto state = MakeState("h100-sxm-8.yaml");
  ASSERT_TRUE(state->PrepareBundles("pg-1", {Bundle(0, "CPU=2,GPU=2", {4, 5})}).ok());
  EXPECT_EQ(state->Available().Get("GPU"), Quantity::FromInt(6));
  // A retry with the same instances: OK, nothing more taken.
  ASSERT_TRUE(state->PrepareBundles("pg-1", {Bundle(0, "CPU=2,GPU=2", {4, 5})}).ok());
  EXPECT_EQ(state->Available().Get("GPU"), Quantity::FromInt(6));
  const std::vector<BundleRecord> bundles = state->Bundles();
  ASSERT_EQ(bundles.size(), 1u);
  EXPECT_FALSE(bundles[0].committed);
  const DeviceGrant* g = GrantOf(bundles[0].allocation, "GPU");
  ASSERT_NE(g, nullptr);
  EXPECT_THAT(g->instances, ElementsAre(4, 5));

  // The same bundle with other instances conflicts, and changes nothing.
  auto conflict = state->PrepareBundles("pg-1", {Bundle(0, "CPU=2,GPU=2", {6, 7})});
  EXPECT_EQ(conflict.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(state->Available().Get("GPU"), Quantity::FromInt(6));

  // Plain leases never get the reserved devices.
  LeaseRecord lease = Grant(*state, Ask("GPU=6"));
  EXPECT_THAT(GrantOf(lease.allocation, "GPU")->instances, ElementsAre(0, 1, 2, 3, 6, 7));
}

TEST(AgentStateTest, PrepareIsAllOrNothing) {
  auto state = MakeState("h100-sxm-8.yaml");
  LeaseRecord lease = Grant(*state, Ask("GPU=1"));
  const int taken = GrantOf(lease.allocation, "GPU")->instances[0];
  const int free_a = taken == 0 ? 1 : 0;
  // Bundle 0 fits; bundle 1 names the leased device: neither is held afterwards.
  auto status =
      state->PrepareBundles("pg-2", {Bundle(0, "GPU=1", {free_a}), Bundle(1, "GPU=1", {taken})});
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("pg-2/1"));
  EXPECT_THAT(state->Bundles(), IsEmpty());
  EXPECT_EQ(state->Available().Get("GPU"), Quantity::FromInt(7));

  // Grants that do not match the demand.
  auto mismatch = state->PrepareBundles("pg-2", {Bundle(0, "GPU=2", {free_a})});
  EXPECT_EQ(mismatch.code(), absl::StatusCode::kInvalidArgument);
  auto twice =
      state->PrepareBundles("pg-2", {Bundle(0, "GPU=1", {free_a}), Bundle(0, "GPU=1", {free_a})});
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(state->PrepareBundles("", {Bundle(0, "CPU=1", {})}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(state->Bundles(), IsEmpty());
}

TEST(AgentStateTest, CommitMarksHeldBundlesAndIgnoresUnknownOnes) {
  auto state = MakeState("h100-sxm-8.yaml");
  ASSERT_TRUE(
      state->PrepareBundles("pg-1", {Bundle(0, "GPU=1", {0}), Bundle(2, "GPU=1", {1})}).ok());
  state->CommitBundles("pg-1", {0, 2, 7});
  state->CommitBundles("pg-unknown", {0});
  state->CommitBundles("pg-1", {0});  // a retried commit
  auto bundles = state->Bundles();
  ASSERT_EQ(bundles.size(), 2u);
  EXPECT_TRUE(bundles[0].committed);
  EXPECT_TRUE(bundles[1].committed);
  // A retried prepare after commit still matches and keeps it committed.
  ASSERT_TRUE(state->PrepareBundles("pg-1", {Bundle(0, "GPU=1", {0})}).ok());
  EXPECT_TRUE(state->Bundles()[0].committed);
}

TEST(AgentStateTest, CancelReleasesBundlesAndNamesTheirRunningWorkers) {
  auto state = MakeState("h100-sxm-8.yaml");
  ASSERT_TRUE(
      state->PrepareBundles("pg-1", {Bundle(0, "CPU=4,GPU=2", {0, 1}), Bundle(1, "GPU=2", {2, 3})})
          .ok());
  state->CommitBundles("pg-1", {0, 1});
  EXPECT_EQ(state->Available().Get("GPU"), Quantity::FromInt(4));

  LeaseAsk in_bundle = Ask("GPU=1");
  in_bundle.bundle = BundleTarget{"pg-1", 0};
  LeaseRecord lease = Grant(*state, in_bundle);
  ASSERT_TRUE(state->WorkerStarted(lease.worker, 42, {"sleep"}, {}, "/o", "/e").ok());
  LeaseRecord plain = Grant(*state, Ask("GPU=1"));

  std::vector<WorkerId> killed = state->CancelBundles("pg-1", {0});
  EXPECT_THAT(killed, ElementsAre(lease.worker));
  EXPECT_EQ(state->Bundles().size(), 1u);
  EXPECT_EQ(state->Available().Get("GPU"), Quantity::FromInt(5));
  // The lease inside the bundle ended with it; the plain lease did not.
  auto leases = state->Leases();
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].id, plain.id);
  // The killed worker's exit finds its lease gone and is still recorded.
  ASSERT_TRUE(state->WorkerExited(lease.worker, WorkerExitInfo{-1, 15, false, "killed"}).ok());
  EXPECT_EQ(state->Available().Get("GPU"), Quantity::FromInt(5));

  // Cancelling again, or an unknown group, is a no-op; empty indices cancel the whole group.
  EXPECT_THAT(state->CancelBundles("pg-1", {0}), IsEmpty());
  EXPECT_THAT(state->CancelBundles("pg-9", {}), IsEmpty());
  EXPECT_THAT(state->CancelBundles("pg-1", {}), IsEmpty());
  EXPECT_THAT(state->Bundles(), IsEmpty());
  EXPECT_EQ(state->Available().Get("GPU"), Quantity::FromInt(7));
  EXPECT_EQ(state->Available().Get("CPU"), state->spec().resources.Get("CPU"));
}

TEST(AgentStateTest, LeasesInsideBundlesUseOnlyTheReservation) {
  auto state = MakeState("h100-sxm-8.yaml");
  ASSERT_TRUE(
      state->PrepareBundles("pg-1", {Bundle(0, "CPU=2,GPU=2", {6, 7}), Bundle(1, "GPU=1", {3})})
          .ok());
  LeaseAsk ask = Ask("GPU=1");
  ask.bundle = BundleTarget{"pg-1", 0};
  // Prepared but not committed: not served yet.
  auto early = state->TryLease(ask);
  ASSERT_TRUE(early.ok());
  EXPECT_NE(early->status, ScheduleStatus::kPlaced);
  state->CommitBundles("pg-1", {0, 1});

  LeaseRecord a = Grant(*state, ask);
  LeaseRecord b = Grant(*state, ask);
  EXPECT_THAT(GrantOf(a.allocation, "GPU")->instances,
              ::testing::AnyOf(ElementsAre(6), ElementsAre(7)));
  EXPECT_NE(GrantOf(a.allocation, "GPU")->instances, GrantOf(b.allocation, "GPU")->instances);
  EXPECT_EQ(a.bundle, (BundleKey{"pg-1", 0}));
  // Bundle 0 is full now: pending, and only this agent could serve it.
  auto full = state->TryLease(ask);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->status, ScheduleStatus::kPending);
  // The node's free GPUs are untouched by bundle leases.
  EXPECT_EQ(state->Available().Get("GPU"), Quantity::FromInt(5));

  // Any bundle: the first with room (bundle 1).
  LeaseAsk any = Ask("GPU=1");
  any.bundle = BundleTarget{"pg-1", -1};
  LeaseRecord c = Grant(*state, any);
  EXPECT_EQ(c.bundle, (BundleKey{"pg-1", 1}));
  EXPECT_THAT(GrantOf(c.allocation, "GPU")->instances, ElementsAre(3));

  // A worker exit gives the device back to the bundle, not to the node.
  ASSERT_TRUE(state->WorkerExited(a.worker, WorkerExitInfo{0, 0, false, "ok"}).ok());
  EXPECT_EQ(state->Available().Get("GPU"), Quantity::FromInt(5));
  Grant(*state, ask);
}

TEST(AgentStateTest, BundleLeaseForABundleHeldElsewhere) {
  auto state = MakeState("h100-sxm-8.yaml");
  LeaseAsk ask = Ask("GPU=1");
  ask.bundle = BundleTarget{"pg-5", 2};
  auto decision = state->TryLease(ask);
  ASSERT_TRUE(decision.ok());
  EXPECT_EQ(decision->status, ScheduleStatus::kPending);
  EXPECT_THAT(decision->explanation, HasSubstr("does not hold bundle 2 of pg-5"));
  EXPECT_EQ(NextStepAfterLocal(*decision, 0, 4), LeaseNextStep::kAskHead);
  EXPECT_EQ(state->Available().Get("GPU"), Quantity::FromInt(8));
}

TEST(AgentStateTest, ListsLeasesAndWorkers) {
  auto state = MakeState("cpu-only.yaml");
  LeaseRecord a = Grant(*state, Ask("CPU=1"));
  LeaseRecord b = Grant(*state, Ask("CPU=1"));
  EXPECT_EQ(state->Leases().size(), 2u);
  EXPECT_EQ(state->Workers().size(), 2u);
  ASSERT_TRUE(state->ReleaseLease(a.id).ok());
  EXPECT_EQ(state->ReleaseLease(a.id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(state->Leases().size(), 1u);
  EXPECT_EQ(state->Leases()[0].id, b.id);
}

// --- A cancel always wins over a late prepare; bundles reported with their generations. ---

TEST(AgentStateTest, APrepareThatArrivedBeforeItsCancelTakesNothing) {
  auto state = MakeState("h100-sxm-8.yaml");
  const ResourceSet free_before = state->Available();
  // The prepare arrives, then waits; the head gives up and its cancel is processed first.
  PrepareGuard late;
  late.arrived_at = state->BundleWatermark();
  EXPECT_THAT(state->CancelBundles("pg-1", {0}), IsEmpty());
  absl::Status status = state->PrepareBundles("pg-1", {Bundle(0, "CPU=6,GPU=2", {4, 5})}, late);
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
  EXPECT_THAT(status.message(), HasSubstr("pg-1/0 was cancelled on node n1"));
  EXPECT_THAT(state->Bundles(), IsEmpty());
  EXPECT_EQ(state->Available(), free_before) << state->Available().ToString();

  // A prepare sent after the cancel (the head placing the group again) is taken.
  PrepareGuard fresh;
  fresh.arrived_at = state->BundleWatermark();
  ASSERT_TRUE(state->PrepareBundles("pg-1", {Bundle(0, "CPU=6,GPU=2", {4, 5})}, fresh).ok());
  EXPECT_EQ(state->Available().Get("GPU"), Quantity::FromInt(6));
}

TEST(AgentStateTest, AWholeGroupCancelRefusesEveryBundleOfItsLatePrepares) {
  auto state = MakeState("h100-sxm-8.yaml");
  PrepareGuard late;
  late.arrived_at = state->BundleWatermark();
  (void)state->CancelBundles("pg-1", {});
  EXPECT_EQ(state->PrepareBundles("pg-1", {Bundle(3, "GPU=1", {0})}, late).code(),
            absl::StatusCode::kAborted);
  // Other groups are not affected.
  EXPECT_TRUE(state->PrepareBundles("pg-2", {Bundle(3, "GPU=1", {0})}, late).ok());
}

TEST(AgentStateTest, APrepareItsCallerGaveUpOnTakesNothing) {
  auto state = MakeState("h100-sxm-8.yaml");
  PrepareGuard abandoned;
  abandoned.arrived_at = state->BundleWatermark();
  abandoned.abandoned = [] { return true; };
  absl::Status status = state->PrepareBundles("pg-1", {Bundle(0, "GPU=2", {0, 1})}, abandoned);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_THAT(state->Bundles(), IsEmpty());
  EXPECT_EQ(state->Available().Get("GPU"), Quantity::FromInt(8));
}

TEST(AgentStateTest, AReleaseJudgedOnAnOlderReportSparesABundlePreparedAgain) {
  auto state = MakeState("h100-sxm-8.yaml");
  ASSERT_TRUE(state->PrepareBundles("pg-1", {Bundle(0, "GPU=1", {0})}).ok());
  std::vector<HeldBundleState> reported = state->BundleStates();
  ASSERT_EQ(reported.size(), 1u);
  const uint64_t first = reported[0].generation;
  EXPECT_GT(first, 0u);
  // The head prepares it again (a retry) after the report the release was judged on.
  ASSERT_TRUE(state->PrepareBundles("pg-1", {Bundle(0, "GPU=1", {0})}).ok());
  const uint64_t second = state->BundleStates()[0].generation;
  EXPECT_NE(second, first);
  const BundleKey key{"pg-1", 0};
  EXPECT_EQ(state->ReleaseBundleIfGeneration(key, first).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(state->Bundles().size(), 1u);
  // Judged on the current report: released, with the workers inside it to kill.
  state->CommitBundles("pg-1", {0});
  LeaseAsk inside = Ask("GPU=1");
  inside.bundle = BundleTarget{"pg-1", 0};
  LeaseRecord lease = Grant(*state, inside);
  ASSERT_TRUE(state->WorkerStarted(lease.worker, 99, {"sleep"}, {}, "", "").ok());
  auto killed = state->ReleaseBundleIfGeneration(key, second);
  ASSERT_TRUE(killed.ok()) << killed.status();
  EXPECT_THAT(*killed, ElementsAre(lease.worker));
  EXPECT_THAT(state->Bundles(), IsEmpty());
  EXPECT_EQ(state->Available().Get("GPU"), Quantity::FromInt(8));
  EXPECT_EQ(state->ReleaseBundleIfGeneration(key, second).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tessera

// Chaos on a real three-node cluster (issue 5): a driver runs a 10k-task workload and, during
// it, a worker process is SIGKILLed and then a whole machine is lost (its agent and every
// process under it, at once). Every result must arrive exactly once with the right value;
// work lost with the dead processes shows only as counted retries. Also: the workers of an
// agent that dies alone do not outlive it (they would keep their devices).
//
// The kills hit known tasks: a "victim" task writes its pid and node to a file and blocks until
// killed (its retry finds the file and answers at once), so what the test asserts does not
// depend on timing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cluster_client.h"
#include "client/state_folder.h"
#include "integration/api_test_cluster.h"
#include "integration/cluster_harness.h"
#include "tessera/tessera.h"

namespace tessera::testing {
namespace {

// Only the node `node`.
LabelSelector OnNode(const std::string& node) {
  return LabelSelector::Of({{"tessera.io/node-id", SelectorOperator::kIn, {node}}}).value();
}

// Where a victim task leaves its "<pid> <node>" and the file's name for task `x`.
std::string VictimFile(const std::string& dir, int64_t x) {
  return absl::StrCat(dir, "/victim-", x);
}

// About 1 ms of work answering 2x+1. A task whose `victim_dir` is set records where it runs on
// its first run and then waits to be killed; its retry answers like the others.
int64_t Work(int64_t x, std::string victim_dir) {
  if (!victim_dir.empty()) {
    const std::string file = VictimFile(victim_dir, x);
    if (!std::filesystem::exists(file)) {
      {
        std::ofstream out(file + ".tmp");
        out << getpid() << " " << GetRuntimeContext().node_id << "\n";
      }
      std::filesystem::rename(file + ".tmp", file);
      // Killed long before this ends; bounded so a broken test cannot hang forever.
      absl::SleepFor(absl::Seconds(120));
    }
  }
  absl::SleepFor(absl::Milliseconds(1));
  return 2 * x + 1;
}
TESSERA_REMOTE(Work);

struct Victim {
  int pid = 0;
  std::string node;
};

// Waits for victim `x` to report where it runs.
absl::StatusOr<Victim> AwaitVictim(TestCluster& cluster, const std::string& dir, int64_t x) {
  Victim victim;
  absl::Status found = cluster.WaitUntil(
      [&]() -> absl::Status {
        std::ifstream in(VictimFile(dir, x));
        if (!(in >> victim.pid >> victim.node)) {
          return absl::UnavailableError(absl::StrCat("victim task ", x, " has not run yet"));
        }
        return absl::OkStatus();
      },
      kPatience);
  if (!found.ok()) return found;
  return victim;
}

TaskStats Minus(const TaskStats& a, const TaskStats& b) {
  TaskStats d;
  d.submitted = a.submitted - b.submitted;
  d.succeeded = a.succeeded - b.succeeded;
  d.failed = a.failed - b.failed;
  d.retries = a.retries - b.retries;
  d.duplicate_results = a.duplicate_results - b.duplicate_results;
  d.workers_started = a.workers_started - b.workers_started;
  d.workers_died = a.workers_died - b.workers_died;
  d.leases_requested = a.leases_requested - b.leases_requested;
  return d;
}

// cpu1, gpu1 and cpu2, 4 CPUs each.
class ApiChaosTest : public ApiClusterSuite<4, 1> {};

TEST_F(ApiChaosTest, KillAWorkerThenANodeDuringTenThousandTasks) {
  const std::string dir = cluster_->state_dir() + "/chaos";
  ASSERT_TRUE(std::filesystem::create_directories(dir));
  constexpr int64_t kTasks = 10000;
  constexpr int64_t kWorkerVictim = 2000;
  constexpr int64_t kNodeVictim = 5000;
  const TaskStats before = GetTaskStats();

  std::vector<ObjectRef<int64_t>> refs;
  refs.reserve(kTasks);
  for (int64_t i = 0; i < kTasks; ++i) {
    const bool victim = i == kWorkerVictim || i == kNodeVictim;
    refs.push_back(Task(Work).Remote(i, victim ? dir : std::string()));
  }

  // A worker dies: SIGKILL, as the OOM killer or a crash would.
  auto worker = AwaitVictim(*cluster_, dir, kWorkerVictim);
  ASSERT_TRUE(worker.ok()) << worker.status();
  ASSERT_EQ(kill(worker->pid, SIGKILL), 0);

  // A machine is lost: its agent and everything it started, with no goodbye.
  auto node = AwaitVictim(*cluster_, dir, kNodeVictim);
  ASSERT_TRUE(node.ok()) << node.status();
  ASSERT_NE(node->pid, worker->pid);
  auto killed = cluster_->KillMachine(node->node);
  ASSERT_TRUE(killed.ok()) << killed.status();
  EXPECT_THAT(*killed, ::testing::Contains(node->pid));

  // Every result once, with its value.
  auto values = Get(refs, absl::Seconds(180));
  ASSERT_TRUE(values.ok()) << values.status();
  for (int64_t i = 0; i < kTasks; ++i) ASSERT_EQ((*values)[i], 2 * i + 1) << i;

  const TaskStats d = Minus(GetTaskStats(), before);
  std::printf(
      "chaos: killed worker %d, machine %s (%zu processes); retries %lld, duplicates %lld, "
      "workers started %lld, died %lld, leases %lld\n",
      worker->pid, node->node.c_str(), killed->size(), (long long)d.retries,
      (long long)d.duplicate_results, (long long)d.workers_started, (long long)d.workers_died,
      (long long)d.leases_requested);
  EXPECT_EQ(d.submitted, kTasks);
  EXPECT_EQ(d.succeeded, kTasks);
  EXPECT_EQ(d.failed, 0);
  // Both victims were running when their processes died: each ran again.
  EXPECT_GE(d.retries, 2);
  // The victim worker, the node's victim worker, and any other worker of that node.
  EXPECT_GE(d.workers_died, 2);
  // A result that raced its worker's death is counted, never delivered: only retried tasks
  // can have one.
  EXPECT_LE(d.duplicate_results, d.retries);

  // The cluster learns the machine is gone; the workload went on without it.
  ASSERT_OK(cluster_->WaitNodes({node->node}, v1::NODE_STATE_DEAD));
  // Work after the loss is leased from the nodes left.
  auto after = Get(Task(Work).Remote(7, std::string()), kPatience);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(*after, 15);
}

// Its own cluster: the agent killed here is the only one lost.
class ApiAgentDeathTest : public ApiClusterSuite<4, 1> {};

TEST_F(ApiAgentDeathTest, WorkersExitWhenTheirAgentDies) {
  const std::string dir = cluster_->state_dir() + "/orphans";
  ASSERT_TRUE(std::filesystem::create_directories(dir));
  // A task on cpu2 that blocks until killed: its worker is the agent's child.
  ObjectRef<int64_t> ref =
      Task(Work).LabelSelector(OnNode("cpu2")).MaxRetries(0).Remote(int64_t{1}, dir);
  auto victim = AwaitVictim(*cluster_, dir, 1);
  ASSERT_TRUE(victim.ok()) << victim.status();
  ASSERT_EQ(victim->node, "cpu2");
  const std::vector<int> below = TestCluster::DescendantsOf(cluster_->NodePid("cpu2"));
  ASSERT_THAT(below, ::testing::Contains(victim->pid));

  // Only the agent dies (not its machine): what it started must not outlive it.
  ASSERT_OK(cluster_->KillNode("cpu2", SIGKILL));
  ASSERT_OK(cluster_->WaitUntil(
      [&]() -> absl::Status {
        for (int pid : below) {
          if (client::ProcessAlive(pid)) {
            return absl::UnavailableError(
                absl::StrCat("process ", pid, " of the dead agent lives"));
          }
        }
        return absl::OkStatus();
      },
      kPatience));
  // The driver hears of it as a worker death: the task had no retries left.
  auto value = Get(ref, kPatience);
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.status().code(), absl::StatusCode::kUnavailable);
}

// Its own cluster: the machine frozen here is the only one lost.
class ApiSilentMachineTest : public ApiClusterSuite<4, 1> {};

// A machine that vanishes without closing anything (power, network): no connection ends, so
// the driver hears nothing from its agent or its workers. The head declares it dead once its
// heartbeats stop; the driver then retries the work it had there.
TEST_F(ApiSilentMachineTest, WorkOnAMachineThatGoesSilentIsRetriedOnceTheHeadDeclaresItDead) {
  const std::string dir = cluster_->state_dir() + "/silent";
  ASSERT_TRUE(std::filesystem::create_directories(dir));
  const TaskStats before = GetTaskStats();
  // cpu2 first, gpu1 when cpu2 cannot take it (not cpu1: this driver's own agent).
  ObjectRef<int64_t> ref = Task(Work)
                               .LabelSelector(OnNode("cpu2"))
                               .LabelSelector(OnNode("gpu1"))
                               .MaxRetries(1)
                               .Remote(int64_t{5}, dir);
  auto victim = AwaitVictim(*cluster_, dir, 5);
  ASSERT_TRUE(victim.ok()) << victim.status();
  ASSERT_EQ(victim->node, "cpu2");

  ASSERT_OK(cluster_->FreezeMachine("cpu2"));
  auto value = Get(ref, kPatience);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, 11);
  const TaskStats d = Minus(GetTaskStats(), before);
  EXPECT_EQ(d.retries, 1);
  EXPECT_EQ(d.workers_died, 1);
  ASSERT_OK(cluster_->KillMachine("cpu2").status());
}

}  // namespace
}  // namespace tessera::testing

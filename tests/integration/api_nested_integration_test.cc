// Tasks, Puts and actors from inside tasks and actors (issue 5, docs/api.md): the first such call
// in a worker makes the worker a driver of its own (it owns what it submits and puts, leasing
// from its own node's agent). This test binary is the driver and, in worker mode, the workers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "integration/api_test_cluster.h"
#include "integration/cluster_harness.h"
#include "tessera/tessera.h"

namespace tessera::testing {
namespace {

using ::testing::HasSubstr;

// In a task: the value, or an exception carrying the status (the caller's Get reports it).
template <typename T>
T OrThrow(absl::StatusOr<T> value) {
  if (!value.ok()) throw std::runtime_error(value.status().ToString());
  return *std::move(value);
}

int Square(int x) { return x * x; }
TESSERA_REMOTE(Square);

// Fans out n subtasks and waits for them all.
int SumOfSquares(int n) {
  std::vector<ObjectRef<int>> refs;
  for (int i = 1; i <= n; ++i) refs.push_back(Task(Square).Remote(i));
  int sum = 0;
  for (int value : OrThrow(Get(refs, absl::Seconds(60)))) sum += value;
  return sum;
}
TESSERA_REMOTE(SumOfSquares);

// Two levels: n subtasks that each fan out subtasks of their own (and wait for all of them).
int SumOfSums(int n) {
  std::vector<ObjectRef<int>> refs;
  for (int i = 0; i < n; ++i) refs.push_back(Task(SumOfSquares).Remote(3));
  int sum = 0;
  for (int value : OrThrow(Get(refs, absl::Seconds(60)))) sum += value;
  return sum;
}
TESSERA_REMOTE(SumOfSums);

int AddOne(int x) { return x + 1; }
TESSERA_REMOTE(AddOne);

// Puts a value, waits for it, reads it back, and hands its ref to a subtask.
int PutAndPass(int x) {
  ObjectRef<int> put = Put(x * 10);
  if (Wait(std::vector<ObjectRef<int>>{put}, 1, absl::Seconds(60)).ready.size() != 1) {
    throw std::runtime_error("a put is not ready");
  }
  if (OrThrow(Get(put, absl::Seconds(60))) != x * 10)
    throw std::runtime_error("put read back wrong");
  return OrThrow(Get(Task(AddOne).Remote(put), absl::Seconds(60)));
}
TESSERA_REMOTE(PutAndPass);

class Accumulator {
 public:
  explicit Accumulator(int start) : total_(start) {}
  int Add(int x) { return total_ += x; }
  // An actor method that submits tasks of its own.
  int AddSquares(int n) {
    total_ += SumOfSquares(n);
    return total_;
  }

 private:
  int total_;
};
Accumulator MakeAccumulator(int start) { return Accumulator(start); }
TESSERA_ACTOR(MakeAccumulator);
TESSERA_ACTOR_METHOD(&Accumulator::Add);
TESSERA_ACTOR_METHOD(&Accumulator::AddSquares);

// Creates an actor, calls it n times, kills it: the last total.
int UseActorInside(int n) {
  ActorHandle<Accumulator> acc = Actor(MakeAccumulator).Remote(100);
  if (!acc.status().ok()) throw std::runtime_error(acc.status().ToString());
  int last = 0;
  for (int i = 1; i <= n; ++i)
    last = OrThrow(Get(acc.Task(&Accumulator::Add).Remote(i), absl::Seconds(60)));
  if (absl::Status killed = Kill(acc); !killed.ok()) throw std::runtime_error(killed.ToString());
  return last;
}
TESSERA_REMOTE(UseActorInside);

// A ref this worker owns, handed back to the driver inside the result.
std::vector<ObjectRef<int>> ReturnOwnRef(int x) { return {Put(x)}; }
TESSERA_REMOTE(ReturnOwnRef);

// The tasks this worker submitted while it ran (its own runtime's stats).
int64_t SubmittedHere(int n) {
  const int64_t before = GetTaskStats().submitted;
  (void)SumOfSquares(n);
  return GetTaskStats().submitted - before;
}
TESSERA_REMOTE(SubmittedHere);

int Pid() { return getpid(); }
TESSERA_REMOTE(Pid);

// This worker's pid and those of the workers running n subtasks of its own.
std::vector<int> PidsDownFrom(int n) {
  std::vector<ObjectRef<int>> refs;
  for (int i = 0; i < n; ++i) refs.push_back(Task(Pid).Remote());
  std::vector<int> pids = OrThrow(Get(refs, absl::Seconds(60)));
  pids.push_back(getpid());
  return pids;
}
TESSERA_REMOTE(PidsDownFrom);

// True while `pid` runs (a zombie has ended).
bool Running(int pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat;
  if (!std::getline(in, stat)) return false;
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

class NestedIntegrationTest : public ApiClusterSuite<8> {};

TEST_F(NestedIntegrationTest, ATaskFansOutTwentySubtasksAndSumsThem) {
  auto sum = Get(Task(SumOfSquares).Remote(20), kPatience);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(*sum, 20 * 21 * 41 / 6);
}

TEST_F(NestedIntegrationTest, SubtasksSubmitSubtasksOfTheirOwn) {
  auto sum = Get(Task(SumOfSums).Remote(2), kPatience);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(*sum, 2 * 14);
}

TEST_F(NestedIntegrationTest, ATaskPutsAValueAndPassesItsRefToASubtask) {
  auto value = Get(Task(PutAndPass).Remote(4), kPatience);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, 41);
}

TEST_F(NestedIntegrationTest, AnActorCreatedInsideATaskIsCalledThere) {
  auto total = Get(Task(UseActorInside).Remote(5), kPatience);
  ASSERT_TRUE(total.ok()) << total.status();
  EXPECT_EQ(*total, 115);
}

TEST_F(NestedIntegrationTest, AnActorMethodSubmitsTasks) {
  ActorHandle<Accumulator> acc = Actor(MakeAccumulator).Remote(1);
  ASSERT_OK(acc.status());
  auto total = Get(acc.Task(&Accumulator::AddSquares).Remote(3), kPatience);
  ASSERT_TRUE(total.ok()) << total.status();
  EXPECT_EQ(*total, 1 + 14);
  ASSERT_OK(Kill(acc));
}

TEST_F(NestedIntegrationTest, GetTaskStatsInAWorkerCountsItsOwnSubmissions) {
  auto submitted = Get(Task(SubmittedHere).Remote(3), kPatience);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_EQ(*submitted, 3);
}

TEST_F(NestedIntegrationTest, TheDriverReadsARefAWorkerMadeAndReturned) {
  auto refs = Get(Task(ReturnOwnRef).Remote(7), kPatience);
  ASSERT_TRUE(refs.ok()) << refs.status();
  ASSERT_EQ(refs->size(), 1u);
  EXPECT_NE(refs->at(0).data().owner.address, Put(1).data().owner.address);
  // Read from the worker, its owner, which kept it past the task's own ref.
  auto value = Get(refs->at(0), kPatience);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, 7);
}

// Once the driver lets its workers go, their own workers see their stream end and exit too:
// only the cluster's servers are left.
TEST_F(NestedIntegrationTest, NoWorkerIsLeftOnceTheDriverLetsThemGo) {
  auto pids = Get(Task(PidsDownFrom).Remote(4), kPatience);
  ASSERT_TRUE(pids.ok()) << pids.status();
  auto total = Get(Task(UseActorInside).Remote(2), kPatience);
  ASSERT_TRUE(total.ok()) << total.status();
  // The servers: processes of this cluster that are not workers (no TESSERA_WORKER_MODE=1).
  auto is_worker = [](int pid) {
    std::ifstream in(absl::StrCat("/proc/", pid, "/environ"));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return text.find(std::string("TESSERA_WORKER_MODE=1") + '\0') != std::string::npos ||
           text.rfind("TESSERA_WORKER_MODE=1", 0) == 0;
  };
  std::vector<int> workers;
  const absl::Time until = absl::Now() + kPatience;
  while (absl::Now() < until) {
    workers.clear();
    for (int pid : cluster_->ProcessesOfThisCluster()) {
      if (is_worker(pid)) workers.push_back(pid);
    }
    if (workers.empty()) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(workers.empty()) << workers.size() << " workers are still alive";
  // The worker that ran the parent task and those that ran its subtasks among them.
  for (int pid : *pids) EXPECT_FALSE(Running(pid)) << "worker " << pid << " is still running";
}

}  // namespace
}  // namespace tessera::testing

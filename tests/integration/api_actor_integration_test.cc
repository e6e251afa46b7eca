// Actors end to end on a real cluster (a head and two node agents as processes): this test binary
// is the driver and, started by the agents in worker mode, each actor's dedicated process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "api/local_worker_channel.h"
#include "integration/api_test_cluster.h"
#include "integration/cluster_harness.h"
#include "rpc/state_names.h"
#include "tessera/placement_group.h"
#include "tessera/tessera.h"

namespace tessera::testing {
namespace {

using ::testing::HasSubstr;

class Counter {
 public:
  explicit Counter(int start) : total_(start) {}
  int Add(int k) { return total_ += k; }
  int Total() const { return total_; }
  void Record(int i) { history_.push_back(i); }
  std::vector<int> History() const { return history_; }
  int Fail(int) { throw std::runtime_error("counter refuses"); }
  int Pid() const { return static_cast<int>(getpid()); }
  // Blocks until `path` exists (the test makes it after it killed this process).
  bool WaitForFile(std::string path) {
    while (!std::filesystem::exists(path)) absl::SleepFor(absl::Milliseconds(5));
    return true;
  }
  // Says it has started (creates `marker`), then blocks for good.
  bool Block(std::string marker) {
    std::ofstream(marker) << "busy\n";
    while (true) absl::SleepFor(absl::Seconds(1));
  }
  std::vector<std::string> Context() const {
    const RuntimeContext& context = GetRuntimeContext();
    auto it = context.accelerator_ids.find("GPU");
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return {it == context.accelerator_ids.end() ? "" : absl::StrJoin(it->second, ","),
            visible == nullptr ? "<unset>" : visible, context.node_id, context.worker_id};
  }
  // Waits (bounded) until `peers` calls run at once; returns the most that ran at once.
  int Overlap(int peers) {
    absl::MutexLock lock(&mu_);
    ++running_;
    most_ = std::max(most_, running_);
    const absl::Time until = absl::Now() + absl::Seconds(20);
    while (running_ < peers && most_ < peers && absl::Now() < until) {
      cv_.WaitWithDeadline(&mu_, until);
    }
    cv_.SignalAll();
    const int most = most_;
    --running_;
    return most;
  }

 private:
  int total_;
  std::vector<int> history_;
  absl::Mutex mu_;
  absl::CondVar cv_;
  int running_ = 0;
  int most_ = 0;
};

std::unique_ptr<Counter> MakeCounter(int start) { return std::make_unique<Counter>(start); }
TESSERA_ACTOR(MakeCounter);
std::unique_ptr<Counter> MakeBrokenCounter(int start) {
  throw std::invalid_argument(absl::StrCat("cannot start at ", start));
}
TESSERA_ACTOR(MakeBrokenCounter);
TESSERA_ACTOR_METHOD(&Counter::Add);
TESSERA_ACTOR_METHOD(&Counter::Total);
TESSERA_ACTOR_METHOD(&Counter::Record);
TESSERA_ACTOR_METHOD(&Counter::History);
TESSERA_ACTOR_METHOD(&Counter::Fail);
TESSERA_ACTOR_METHOD(&Counter::Pid);
TESSERA_ACTOR_METHOD(&Counter::WaitForFile);
TESSERA_ACTOR_METHOD(&Counter::Block);
TESSERA_ACTOR_METHOD(&Counter::Context);
TESSERA_ACTOR_METHOD(&Counter::Overlap);

class ActorIntegrationTest : public ApiClusterSuite<8> {};

// Calls Add on a counter whose process was killed until one fails (until the driver learns of
// the death a call may still go to the dead process; it fails too): that failure, or OK when
// none failed in kPatience.
absl::Status FirstFailedAdd(ActorHandle<Counter>& counter) {
  absl::Status status;
  const absl::Time until = absl::Now() + kPatience;
  while (absl::Now() < until) {
    status = Get(counter.Task(&Counter::Add).Remote(1), kPatience).status();
    if (!status.ok()) break;
  }
  return status;
}

TEST_F(ActorIntegrationTest, CallsKeepStateAcrossCalls) {
  ActorHandle<Counter> counter = Actor(MakeCounter).Remote(10);
  ASSERT_OK(counter.status());
  EXPECT_EQ(*Get(counter.Task(&Counter::Add).Remote(5), kPatience), 15);
  EXPECT_EQ(*Get(counter.Task(&Counter::Add).Remote(1), kPatience), 16);
  EXPECT_EQ(*Get(counter.Task(&Counter::Total).Remote(), kPatience), 16);
  ASSERT_OK(Kill(counter));
}

TEST_F(ActorIntegrationTest, AThousandAsyncCallsRunInSubmissionOrder) {
  ActorHandle<Counter> counter = Actor(MakeCounter).Remote(0);
  std::vector<ObjectRef<void>> refs;
  for (int i = 0; i < 1000; ++i) refs.push_back(counter.Task(&Counter::Record).Remote(i));
  auto history = Get(counter.Task(&Counter::History).Remote(), kPatience);
  ASSERT_TRUE(history.ok()) << history.status();
  ASSERT_EQ(history->size(), 1000u);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ((*history)[i], i);
  for (auto& ref : refs) ASSERT_OK(Get(ref));
  ASSERT_OK(Kill(counter));
}

TEST_F(ActorIntegrationTest, AMethodExceptionReachesTheCallerAndTheActorLivesOn) {
  ActorHandle<Counter> counter = Actor(MakeCounter).Remote(1);
  auto failed = Get(counter.Task(&Counter::Fail).Remote(0), kPatience);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(failed.status().message(),
            "task Counter::Fail failed: std::runtime_error: counter refuses");
  EXPECT_EQ(*Get(counter.Task(&Counter::Add).Remote(1), kPatience), 2);
  ASSERT_OK(Kill(counter));
}

TEST_F(ActorIntegrationTest, AConstructorThatThrowsMakesEveryCallFailWithItsError) {
  ActorHandle<Counter> broken = Actor(MakeBrokenCounter).MaxRestarts(2).Remote(-1);
  for (int i = 0; i < 2; ++i) {
    auto total = Get(broken.Task(&Counter::Total).Remote(), kPatience);
    ASSERT_FALSE(total.ok());
    EXPECT_EQ(total.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(total.status().message(),
                HasSubstr("is dead: its constructor MakeBrokenCounter threw "
                          "std::invalid_argument: cannot start at -1"));
  }
}

TEST_F(ActorIntegrationTest, KilledProcessRestartsWithFreshStateAndRetriesPendingCalls) {
  const std::string file = cluster_->state_dir() + "/actor-go";
  ActorHandle<Counter> counter = Actor(MakeCounter).MaxRestarts(1).MaxTaskRetries(1).Remote(100);
  EXPECT_EQ(*Get(counter.Task(&Counter::Add).Remote(5), kPatience), 105);
  auto pid = Get(counter.Task(&Counter::Pid).Remote(), kPatience);
  ASSERT_TRUE(pid.ok()) << pid.status();
  const TaskStats before = GetTaskStats();
  ObjectRef<bool> blocked = counter.Task(&Counter::WaitForFile).Remote(file);
  ObjectRef<int> pending = counter.Task(&Counter::Add).Remote(1);
  ASSERT_EQ(kill(*pid, SIGKILL), 0);
  std::ofstream(file) << "go";
  auto unblocked = Get(blocked, kPatience);
  ASSERT_TRUE(unblocked.ok()) << unblocked.status();
  auto after_restart = Get(pending, kPatience);
  ASSERT_TRUE(after_restart.ok()) << after_restart.status();
  EXPECT_EQ(*after_restart, 101);  // the constructor ran again: the earlier +5 is gone
  EXPECT_EQ(GetTaskStats().retries - before.retries, 2);
  auto new_pid = Get(counter.Task(&Counter::Pid).Remote(), kPatience);
  ASSERT_TRUE(new_pid.ok()) << new_pid.status();
  EXPECT_NE(*new_pid, *pid);
  ASSERT_OK(Kill(counter));
}

TEST_F(ActorIntegrationTest, AfterTheLastRestartCallsFailDeadWithTheCause) {
  ActorHandle<Counter> counter = Actor(MakeCounter).MaxRestarts(0).Remote(0);
  auto pid = Get(counter.Task(&Counter::Pid).Remote(), kPatience);
  ASSERT_TRUE(pid.ok()) << pid.status();
  ASSERT_EQ(kill(*pid, SIGKILL), 0);
  const absl::Status status = FirstFailedAdd(counter);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(status.message()), HasSubstr("is dead"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("SIGKILL"));
  auto later = Get(counter.Task(&Counter::Add).Remote(1), kPatience);
  EXPECT_THAT(std::string(later.status().message()), HasSubstr("is dead"));
}

TEST_F(ActorIntegrationTest, KillEndsTheActorForGood) {
  ActorHandle<Counter> counter = Actor(MakeCounter).MaxRestarts(3).Remote(0);
  EXPECT_EQ(*Get(counter.Task(&Counter::Add).Remote(1), kPatience), 1);
  ASSERT_OK(Kill(counter));
  auto after = Get(counter.Task(&Counter::Add).Remote(1), absl::Seconds(1));
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(after.status().message()), HasSubstr("killed by tessera::Kill"));
}

TEST_F(ActorIntegrationTest, NamedActorIsFoundByName) {
  ActorHandle<Counter> counter = Actor(MakeCounter).Name("tally").Remote(7);
  ASSERT_OK(counter.status());
  auto found = GetActor<Counter>("tally");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*Get(found->Task(&Counter::Add).Remote(1), kPatience), 8);
  EXPECT_EQ(*Get(counter.Task(&Counter::Total).Remote(), kPatience), 8);
  EXPECT_EQ(GetActor<Counter>("nobody").status().code(), absl::StatusCode::kNotFound);
  ActorHandle<Counter> twin = Actor(MakeCounter).Name("tally").Remote(0);
  EXPECT_EQ(twin.status().code(), absl::StatusCode::kAlreadyExists);
  ASSERT_OK(Kill(counter));
  EXPECT_EQ(GetActor<Counter>("tally").status().code(), absl::StatusCode::kNotFound);
}

// Another driver (this binary run again as a guest, see main) finds the actor by name through the
// head's actor directory and calls it; the owner sees the guest's call in the actor's state.
TEST_F(ActorIntegrationTest, AnotherDriverFindsANamedActorThroughTheHead) {
  ActorHandle<Counter> counter = Actor(MakeCounter).Name("shared").Remote(40);
  EXPECT_EQ(*Get(counter.Task(&Counter::Add).Remote(1), kPatience), 41);
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string command = "TESSERA_ACTOR_TEST_GUEST=shared TESSERA_ACTOR_TEST_STATE='" +
                              cluster_->state_dir() + "' '" + self + "'";
  FILE* guest = popen(command.c_str(), "r");
  ASSERT_NE(guest, nullptr);
  std::string out;
  char buffer[256];
  while (fgets(buffer, sizeof(buffer), guest) != nullptr) out += buffer;
  EXPECT_EQ(pclose(guest), 0) << out;
  EXPECT_EQ(out, "value=42\n");
  EXPECT_EQ(*Get(counter.Task(&Counter::Total).Remote(), kPatience), 42);
  ASSERT_OK(Kill(counter));
}

// A driver killed while its actor is busy inside a method: the actor's process ends with it (the
// agent stops a worker whose owner's watch is gone), it does not run on holding its resources;
// the placement group it owned is removed (the head hears no more from it), the one it created
// detached stays.
TEST_F(ActorIntegrationTest, ADriversActorAndReservationsEndWhenTheDriverIsKilledMidCall) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t guest = fork();
  if (guest == 0) {
    dup2(out[1], 1);
    close(out[0]);
    setenv("TESSERA_ACTOR_TEST_DOOMED", "1", 1);
    setenv("TESSERA_ACTOR_TEST_STATE", cluster_->state_dir().c_str(), 1);
    execl(self.c_str(), self.c_str(), nullptr);
    _exit(127);
  }
  ASSERT_GT(guest, 0);
  close(out[1]);
  // The guest prints its actor's pid once the actor is busy in a call that never returns.
  std::string line;
  char c;
  while (read(out[0], &c, 1) == 1 && c != '\n') line.push_back(c);
  close(out[0]);
  int actor_pid = 0;
  ASSERT_TRUE(absl::SimpleAtoi(line, &actor_pid)) << "guest said: " << line;
  ASSERT_TRUE(client::ProcessAlive(actor_pid));
  ASSERT_EQ(kill(guest, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(guest, &status, 0), guest);
  ASSERT_OK(cluster_->WaitUntil(
      [&] {
        return client::ProcessAlive(actor_pid) ? absl::UnavailableError(absl::StrCat(
                                                     "actor process ", actor_pid, " still runs"))
                                               : absl::OkStatus();
      },
      absl::Seconds(30)));
  // The state of the group named `name`; nullopt when there is none.
  auto group_state =
      [&](const std::string& name) -> absl::StatusOr<std::optional<v1::PlacementGroupState>> {
    auto groups = cluster_->client().ListPlacementGroups();
    if (!groups.ok()) return groups.status();
    for (const auto& g : groups->groups()) {
      if (g.name() == name) return g.state();
    }
    return std::nullopt;
  };
  ASSERT_OK(cluster_->WaitUntil(
      [&]() -> absl::Status {
        const auto state = group_state("doomed-owned");
        if (!state.ok()) return state.status();
        if (!state->has_value()) return absl::OkStatus();
        return absl::UnavailableError(
            absl::StrCat("doomed-owned is ", std::string(rpc::PlacementGroupStateName(**state))));
      },
      absl::Seconds(40)));
  const auto detached = group_state("doomed-detached");
  ASSERT_OK(detached.status());
  EXPECT_EQ(*detached, v1::PLACEMENT_GROUP_STATE_CREATED);
  ASSERT_OK(RemovePlacementGroup(PlacementGroupName("doomed-detached")));
}

TEST_F(ActorIntegrationTest, MaxConcurrencyOverlapsCalls) {
  ActorHandle<Counter> counter = Actor(MakeCounter).MaxConcurrency(4).Remote(0);
  std::vector<ObjectRef<int>> refs;
  for (int i = 0; i < 4; ++i) refs.push_back(counter.Task(&Counter::Overlap).Remote(4));
  auto most = Get(refs, kPatience);
  ASSERT_TRUE(most.ok()) << most.status();
  EXPECT_EQ(*std::max_element(most->begin(), most->end()), 4);
  ASSERT_OK(Kill(counter));
}

TEST_F(ActorIntegrationTest, GpuActorSeesItsDevice) {
  ActorHandle<Counter> counter = Actor(MakeCounter).Resources({{"CPU", 1}, {"GPU", 1}}).Remote(0);
  auto view = Get(counter.Task(&Counter::Context).Remote(), kPatience);
  ASSERT_TRUE(view.ok()) << view.status();
  ASSERT_EQ(view->size(), 4u);
  EXPECT_FALSE((*view)[0].empty());
  EXPECT_EQ((*view)[0], (*view)[1]);
  EXPECT_EQ((*view)[2], "gpu1");
  EXPECT_FALSE((*view)[3].empty());
  ASSERT_OK(Kill(counter));
}

TEST_F(ActorIntegrationTest, BadActorsAreOneLineErrors) {
  ActorHandle<Counter> bad = Actor(MakeCounter).Resources({{"CPU", -1}}).Remote(0);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "resource \"CPU\": quantity -1 is negative");
  auto call = Get(bad.Task(&Counter::Add).Remote(1));
  EXPECT_EQ(call.status().code(), absl::StatusCode::kInvalidArgument);
  ActorHandle<Counter> infeasible =
      Actor(MakeCounter).Resources({{"CPU", 1}, {"GPU", 64}}).Remote(0);
  auto never = Get(infeasible.Task(&Counter::Add).Remote(1), kPatience);
  ASSERT_FALSE(never.ok());
  EXPECT_THAT(std::string(never.status().message()), HasSubstr("infeasible"));
}

// A worker on the driver's host, of the driver's user, gets its task stream on its local socket
// (api/local_worker_channel.h), not gRPC: the calls above all went that way.
TEST_F(ActorIntegrationTest, AnActorOnThisHostIsCalledOverItsLocalStream) {
  ActorHandle<Counter> counter = Actor(MakeCounter).Remote(1);
  ASSERT_OK(counter.status());
  EXPECT_EQ(*Get(counter.Task(&Counter::Add).Remote(1), kPatience), 2);
  EXPECT_GT(api::LocalWorkerChannel::OpenCount(), 0);
  ASSERT_OK(Kill(counter));
}

// InitOptions::local_worker_streams = false: every stream is Worker.PushTasks over gRPC (as for
// workers on other hosts), with the same behaviour.
class ActorOverGrpcStreamTest : public ApiClusterFixture {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions options;
    options.nodes.push_back(NodeSpec{.id = "cpu1", .hardware_yaml = CpuHost(4)});
    StartCluster(options, /*local_worker_streams=*/false);
  }
};

TEST_F(ActorOverGrpcStreamTest, CallsRunInOrderKeepStateAndSurviveErrors) {
  ActorHandle<Counter> counter = Actor(MakeCounter).Remote(0);
  ASSERT_OK(counter.status());
  std::vector<ObjectRef<void>> refs;
  for (int i = 0; i < 300; ++i) refs.push_back(counter.Task(&Counter::Record).Remote(i));
  auto history = Get(counter.Task(&Counter::History).Remote(), kPatience);
  ASSERT_TRUE(history.ok()) << history.status();
  ASSERT_EQ(history->size(), 300u);
  for (int i = 0; i < 300; ++i) EXPECT_EQ((*history)[i], i);
  auto failed = Get(counter.Task(&Counter::Fail).Remote(1), kPatience);
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("counter refuses"));
  EXPECT_EQ(*Get(counter.Task(&Counter::Add).Remote(5), kPatience), 5);
  EXPECT_EQ(api::LocalWorkerChannel::OpenCount(), 0);
  ASSERT_OK(Kill(counter));
}

TEST_F(ActorOverGrpcStreamTest, AKilledProcessFailsItsCallsDead) {
  ActorHandle<Counter> counter = Actor(MakeCounter).MaxRestarts(0).Remote(0);
  auto pid = Get(counter.Task(&Counter::Pid).Remote(), kPatience);
  ASSERT_TRUE(pid.ok()) << pid.status();
  ASSERT_EQ(kill(*pid, SIGKILL), 0);
  EXPECT_THAT(std::string(FirstFailedAdd(counter).message()), HasSubstr("is dead"));
}

}  // namespace
}  // namespace tessera::testing

// The guest driver of AnotherDriverFindsANamedActorThroughTheHead: adds 1 to the named actor.
int RunGuest(const char* name, const char* state_dir) {
  using namespace tessera;  // NOLINT: a test's second main
  InitOptions init;
  init.state_dir = state_dir;
  if (absl::Status s = Init(init); !s.ok()) {
    std::fprintf(stderr, "guest: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  // The owner publishes the actor's address when its worker is ready: wait for it (bounded).
  absl::StatusOr<ActorHandle<tessera::testing::Counter>> found;
  const absl::Time until = absl::Now() + absl::Seconds(30);
  do {
    found = GetActor<tessera::testing::Counter>(name);
    if (!found.ok()) absl::SleepFor(absl::Milliseconds(20));
  } while (!found.ok() && absl::Now() < until);
  int code = 1;
  if (!found.ok()) {
    std::fprintf(stderr, "guest: %s\n", std::string(found.status().message()).c_str());
  } else {
    auto value = Get(found->Task(&tessera::testing::Counter::Add).Remote(1), absl::Seconds(60));
    if (value.ok()) {
      std::printf("value=%d\n", *value);
      code = 0;
    } else {
      std::fprintf(stderr, "guest: %s\n", std::string(value.status().message()).c_str());
    }
  }
  Shutdown();
  return code;
}

// The guest of ADriversActorEndsWhenTheDriverIsKilledMidCall: starts an actor, prints its pid
// once the actor is inside a call that never returns, and waits to be killed.
int RunDoomedOwner(const char* state_dir) {
  using namespace tessera;  // NOLINT: a test's second main
  InitOptions init;
  init.state_dir = state_dir;
  if (absl::Status s = Init(init); !s.ok()) {
    std::fprintf(stderr, "doomed: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  PlacementGroupOptions owned;
  owned.name = PlacementGroupName("doomed-owned");
  owned.bundles = {OneCpu()};
  PlacementGroupOptions detached = owned;
  detached.name = PlacementGroupName("doomed-detached");
  detached.detached = true;
  for (const PlacementGroupOptions& group : {owned, detached}) {
    if (auto created = CreatePlacementGroup(group); !created.ok()) {
      std::fprintf(stderr, "doomed: %s\n", std::string(created.status().message()).c_str());
      return 1;
    }
  }
  ActorHandle<tessera::testing::Counter> counter = Actor(tessera::testing::MakeCounter).Remote(0);
  auto pid = Get(counter.Task(&tessera::testing::Counter::Pid).Remote(), absl::Seconds(60));
  if (!pid.ok()) {
    std::fprintf(stderr, "doomed: %s\n", std::string(pid.status().message()).c_str());
    return 1;
  }
  const std::string marker = absl::StrCat(state_dir, "/test-logs/doomed-", getpid());
  ObjectRef<bool> never = counter.Task(&tessera::testing::Counter::Block).Remote(marker);
  const absl::Time until = absl::Now() + absl::Seconds(60);
  while (!std::filesystem::exists(marker) && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  std::printf("%d\n", *pid);
  std::fflush(stdout);
  (void)Get(never);
  return 0;
}

int main(int argc, char** argv) {
  if (tessera::IsWorkerProcess()) (void)tessera::Init();
  if (std::getenv("TESSERA_ACTOR_TEST_DOOMED") != nullptr) {
    return RunDoomedOwner(std::getenv("TESSERA_ACTOR_TEST_STATE"));
  }
  if (const char* guest = std::getenv("TESSERA_ACTOR_TEST_GUEST"); guest != nullptr) {
    return RunGuest(guest, std::getenv("TESSERA_ACTOR_TEST_STATE"));
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

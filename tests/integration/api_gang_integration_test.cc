// Gangs from the C++ API (include/tessera/gang.h) on a real cluster: a head and two node agents as
// processes; each gang is a job of the head, whose controller starts every rank at once with the
// torchrun environment and restarts the group when one fails.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "integration/api_test_cluster.h"
#include "integration/cluster_harness.h"
#include "tessera/gang.h"
#include "tessera/tessera.h"

namespace tessera::testing {
namespace {

using ::testing::HasSubstr;

class GangTest : public ApiClusterSuite<4> {};

// A rank of an actor gang: reads the environment its gang gave its process.
class RankActor {
 public:
  std::string Describe(int steps) {
    if (Env("FAIL_RANK") == Env("RANK") && Env("TORCHELASTIC_RESTART_COUNT") == "0") {
      if (Env("HOW") == "die") std::_Exit(3);
      throw std::runtime_error("rank " + Env("RANK") + " gave up");
    }
    // The gang's environment reached the actor's process (the test says what to expect).
    if (Env("RANK").empty() || Env("WORLD_SIZE") != Env("EXPECT_WORLD") ||
        Env("MASTER_ADDR").empty() || Env("TESSERA_JOB_ID").empty()) {
      throw std::runtime_error("rank " + Env("RANK") + " has a wrong environment: world " +
                               Env("WORLD_SIZE") + ", master " + Env("MASTER_ADDR"));
    }
    return absl::StrCat("rank=", Env("RANK"), " world=", Env("WORLD_SIZE"),
                        " restart=", Env("TORCHELASTIC_RESTART_COUNT"), " steps=", steps,
                        " pid=", ::getpid());
  }

 private:
  static std::string Env(const char* name) {
    const char* value = std::getenv(name);
    return value == nullptr ? "" : value;
  }
};
std::unique_ptr<RankActor> MakeRankActor() { return std::make_unique<RankActor>(); }
TESSERA_ACTOR(MakeRankActor);
TESSERA_ACTOR_METHOD(&RankActor::Describe);

GangOptions ActorGang(std::string name, int workers) {
  GangOptions options;
  options.name = std::move(name);
  options.workers = workers;
  options.stop_grace = absl::Milliseconds(500);
  return options;
}

GangOptions ShGang(std::string name, int workers, std::string script) {
  GangOptions options;
  options.name = std::move(name);
  options.command = {"/bin/sh", "-c", std::move(script)};
  options.workers = workers;
  options.stop_grace = absl::Milliseconds(500);
  return options;
}

TEST_F(GangTest, EveryRankRunsAtOnceWithItsRankAndTheGangSucceeds) {
  GangOptions options =
      ShGang("hello", 3, "echo rank=$RANK world=$WORLD_SIZE job=$TESSERA_JOB_ID x=$X");
  options.env = {{"X", "42"}};
  auto gang = StartGang(options);
  ASSERT_TRUE(gang.ok()) << gang.status();
  auto done = gang->Wait(kPatience);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state, GangState::kSucceeded) << done->message;
  EXPECT_EQ(done->exit_code, 0);
  EXPECT_EQ(done->world_size, 3);
  ASSERT_EQ(done->ranks.size(), 3u);
  auto logs = gang->Logs();
  ASSERT_TRUE(logs.ok()) << logs.status();
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(*logs, HasSubstr(absl::StrCat("[rank", r, "]: rank=", r,
                                              " world=3 job=", gang->id().value(), " x=42")));
  }
}

TEST_F(GangTest, AFailedRankRestartsTheWholeGangWithTheRestartCountOneHigher) {
  // Rank 1 fails on the first attempt only.
  GangOptions options =
      ShGang("flaky", 2,
             "echo attempt=$TORCHELASTIC_RESTART_COUNT; "
             "if [ \"$RANK\" = 1 ] && [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then exit 3; fi");
  options.max_restarts = 1;
  auto gang = StartGang(options);
  ASSERT_TRUE(gang.ok()) << gang.status();
  auto done = gang->Wait(kPatience);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state, GangState::kSucceeded) << done->message;
  EXPECT_EQ(done->restart_count, 1);
  auto logs = gang->Logs();
  ASSERT_TRUE(logs.ok());
  EXPECT_THAT(*logs, HasSubstr("rank 1 on node"));
  EXPECT_THAT(*logs, HasSubstr("exited with code 3; restarting the gang (restart 1 of 1)"));
  EXPECT_THAT(*logs, HasSubstr("[rank0]: attempt=1"));
  EXPECT_THAT(*logs, HasSubstr("[rank1]: attempt=1"));
}

TEST_F(GangTest, WithoutRestartsLeftTheGangFailsNamingTheRankAndItsCode) {
  auto gang = StartGang(ShGang("failing", 2, "if [ \"$RANK\" = 0 ]; then exit 7; fi; sleep 60"));
  ASSERT_TRUE(gang.ok()) << gang.status();
  auto done = gang->Wait(kPatience);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state, GangState::kFailed);
  EXPECT_EQ(done->exit_code, 7);
  EXPECT_THAT(done->message, HasSubstr("rank 0 on node"));
  EXPECT_THAT(done->message, HasSubstr("exited with code 7; 0 of 0 restarts used"));
}

TEST_F(GangTest, StopEndsEveryRankAndWaitTimesOutWhileItRuns) {
  auto gang = StartGang(ShGang("sleepers", 2, "exec sleep 600"));
  ASSERT_TRUE(gang.ok()) << gang.status();
  auto waited = gang->Wait(absl::Milliseconds(300));
  EXPECT_TRUE(absl::IsDeadlineExceeded(waited.status())) << waited.status();
  absl::StatusOr<GangStatus> running;
  for (absl::Time until = absl::Now() + kPatience; absl::Now() < until;) {
    running = gang->Status();
    ASSERT_TRUE(running.ok()) << running.status();
    if (running->state == GangState::kRunning) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_EQ(running->state, GangState::kRunning);
  auto stopped = gang->Stop();
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(stopped->state, GangState::kStopped);
  EXPECT_EQ(stopped->message, "stopped by its program");
  for (const GangRank& rank : running->ranks) {
    EXPECT_NE(::kill(rank.pid, 0), 0)
        << "rank " << rank.rank << " (pid " << rank.pid << ") outlived its gang";
  }
}

TEST_F(GangTest, BadOptionsAreOneLineErrorsAndStartNothing) {
  GangOptions none;
  none.command = {"true"};
  EXPECT_TRUE(absl::IsInvalidArgument(StartGang(none).status()));
  GangOptions two = ShGang("two", 2, "true");
  two.nodes = 2;
  EXPECT_TRUE(absl::IsInvalidArgument(StartGang(two).status()));
  GangOptions bad = ShGang("bad", 2, "true");
  bad.resources_per_worker = ResourceSet();  // a worker that asks for nothing
  auto refused = StartGang(bad);
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status()));
  EXPECT_THAT(refused.status().message(), HasSubstr("resources_per_worker"));
  GangOptions no_command = ShGang("empty", 2, "true");
  no_command.command.clear();
  EXPECT_TRUE(absl::IsInvalidArgument(StartGang(no_command).status()));
  // A slice is a shape (a type): with workers it is two places; one filled in by hand is checked.
  GangOptions slice_and_workers = ShGang("both", 2, "true");
  slice_and_workers.slice = *MakeSliceShape(TpuGeneration::kV6e, {{4, 4}});
  EXPECT_EQ(StartGang(slice_and_workers).status().message(),
            "gang: give exactly one of slice, workers or nodes");
  GangOptions bad_slice;
  bad_slice.name = "bad-slice";
  bad_slice.command = {"true"};
  bad_slice.slice = SliceShape{.generation = TpuGeneration::kV6e, .topology = {{3, 5}}};
  const absl::Status refused_slice = StartGang(bad_slice).status();
  EXPECT_TRUE(absl::IsInvalidArgument(refused_slice)) << refused_slice;
  EXPECT_THAT(refused_slice.message(),
              HasSubstr("gang: slice: topology \"3x5\" is not a valid v6e slice"));
}

TEST_F(GangTest, AnActorGangRunsEveryRanksCallWithItsEnvironment) {
  GangOptions options = ActorGang("actors", 3);
  options.env = {{"FAIL_RANK", "none"}, {"EXPECT_WORLD", "3"}};
  auto done = RunActorGang(options, MakeRankActor, &RankActor::Describe, 7);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state, GangState::kSucceeded) << done->message;
  EXPECT_EQ(done->world_size, 3);
  EXPECT_EQ(done->restart_count, 0);
}

TEST_F(GangTest, AnActorThatDiesRestartsTheWholeGangNotItselfAlone) {
  GangOptions options = ActorGang("dying", 2);
  options.env = {{"FAIL_RANK", "1"}, {"HOW", "die"}, {"EXPECT_WORLD", "2"}};
  options.max_restarts = 1;
  auto done = RunActorGang(options, MakeRankActor, &RankActor::Describe, 1);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state, GangState::kSucceeded) << done->message;
  EXPECT_EQ(done->restart_count, 1);  // the gang restarted as one; the actor was not alone
}

TEST_F(GangTest, AnActorCallThatFailsWithNoRestartsLeftFailsTheGangNamingTheRank) {
  GangOptions options = ActorGang("throwing", 2);
  options.env = {{"FAIL_RANK", "0"}, {"HOW", "throw"}, {"EXPECT_WORLD", "2"}};
  auto done = RunActorGang(options, MakeRankActor, &RankActor::Describe, 1);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state, GangState::kFailed);
  EXPECT_THAT(done->message, HasSubstr("rank 0 on node"));
  EXPECT_THAT(done->message, HasSubstr("rank 0 gave up"));
}

}  // namespace
}  // namespace tessera::testing

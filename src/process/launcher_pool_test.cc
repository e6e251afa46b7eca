#include "process/launcher_pool.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "process/child_process.h"
#include "process/launch_spec.h"
#include "process/test_support.h"

namespace tessera {
namespace {

using ::tessera::testing::HelperPath;
using ::tessera::testing::LauncherPath;
using ::tessera::testing::ProcessGone;
using ::tessera::testing::WaitUntil;
using ::testing::Contains;
using ::testing::Not;

std::unique_ptr<LauncherPool> MakePool(int idle) {
  auto pool = LauncherPool::Create({LauncherPath(), idle});
  EXPECT_TRUE(pool.ok()) << pool.status();
  return pool.ok() ? std::move(*pool) : nullptr;
}

bool Reaped(pid_t pid) { return ::waitpid(pid, nullptr, WNOHANG) == -1 && errno == ECHILD; }

TEST(LauncherPoolTest, KeepsTheAskedNumberOfLaunchersReady) {
  std::unique_ptr<LauncherPool> pool = MakePool(3);
  ASSERT_NE(pool, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return pool->IdlePids().size() == 3; }));
  for (pid_t pid : pool->IdlePids()) {
    EXPECT_FALSE(ProcessGone(pid));
    EXPECT_EQ(::getsid(pid), pid);
  }
  EXPECT_EQ(pool->stats().started, 3);
}

TEST(LauncherPoolTest, TakeHandsOutTheOldestAndTheRefillReplacesIt) {
  std::unique_ptr<LauncherPool> pool = MakePool(2);
  ASSERT_NE(pool, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return pool->IdlePids().size() == 2; }));
  const pid_t oldest = pool->IdlePids().front();
  auto taken = pool->Take();
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ((*taken)->pid(), oldest);
  EXPECT_EQ(pool->IdlePids().size(), 1u);  // the next one starts when this one is done with
  taken->reset();
  EXPECT_TRUE(WaitUntil([&] { return pool->IdlePids().size() == 2; }));
  EXPECT_THAT(pool->IdlePids(), Not(Contains(oldest)));
  EXPECT_EQ(pool->stats().taken, 1);
  EXPECT_EQ(pool->stats().taken_cold, 0);
}

TEST(LauncherPoolTest, TakeStartsOneWhenNoneIsReady) {
  std::unique_ptr<LauncherPool> pool = MakePool(0);
  ASSERT_NE(pool, nullptr);
  auto first = pool->Take();
  auto second = pool->Take();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE((*first)->pid(), (*second)->pid());
  EXPECT_FALSE((*first)->HasExited());
  EXPECT_TRUE(pool->IdlePids().empty());
  EXPECT_EQ(pool->stats().taken_cold, 2);
}

// A launcher dies with the thread that started it (its parent-death signal follows that thread,
// not the process), so one taken cold by a short-lived thread (a gRPC handler's) must still be
// started by the pool: it then outlives the taker and becomes its worker.
TEST(LauncherPoolTest, ALauncherTakenColdOutlivesTheThreadThatTookIt) {
  std::unique_ptr<LauncherPool> pool = MakePool(0);
  ASSERT_NE(pool, nullptr);
  absl::StatusOr<std::unique_ptr<Launcher>> taken = absl::UnknownError("not taken");
  std::thread taker([&] { taken = pool->Take(); });
  taker.join();
  ASSERT_TRUE(taken.ok()) << taken.status();
  LaunchSpec spec;
  spec.argv = {HelperPath(), "exit", "3"};
  ASSERT_TRUE((*taken)->Send(EncodeLaunchSpec(spec)).ok());
  auto outcome = (*taken)->ReadOutcome();
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(*outcome, "");
  const pid_t pid = (*taken)->pid();
  (void)(*taken)->Adopt();
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the worker was killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 3);
}

TEST(LauncherPoolTest, ALauncherThatDiesWhileIdleIsReapedAndReplaced) {
  std::unique_ptr<LauncherPool> pool = MakePool(2);
  ASSERT_NE(pool, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return pool->IdlePids().size() == 2; }));
  const pid_t victim = pool->IdlePids().front();
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  EXPECT_TRUE(WaitUntil([&] {
    std::vector<pid_t> idle = pool->IdlePids();
    return idle.size() == 2 && std::find(idle.begin(), idle.end(), victim) == idle.end();
  }));
  EXPECT_TRUE(Reaped(victim));
  EXPECT_EQ(pool->stats().died_idle, 1);
  // What is handed out afterwards is alive.
  auto taken = pool->Take();
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_FALSE((*taken)->HasExited());
}

TEST(LauncherPoolTest, ShutdownKillsTheIdleLaunchersAndLeavesNoZombie) {
  std::unique_ptr<LauncherPool> pool = MakePool(2);
  ASSERT_NE(pool, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return pool->IdlePids().size() == 2; }));
  std::vector<pid_t> idle = pool->IdlePids();
  pool->Shutdown();
  for (pid_t pid : idle) EXPECT_TRUE(Reaped(pid)) << pid;
  EXPECT_TRUE(pool->IdlePids().empty());
  EXPECT_EQ(pool->Take().status().code(), absl::StatusCode::kFailedPrecondition);
  pool->Shutdown();  // idempotent
}

TEST(LauncherPoolTest, ASpawnFromThePoolIsOneOfItsLaunchersNotAFork) {
  std::unique_ptr<LauncherPool> pool = MakePool(2);
  ASSERT_NE(pool, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return pool->IdlePids().size() == 2; }));
  std::vector<pid_t> idle = pool->IdlePids();
  ChildSpec spec;
  spec.argv = {HelperPath(), "exit", "5"};
  SpawnOptions options;
  options.launcher_pool = pool.get();
  auto child = ChildProcess::Spawn(spec, options);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_THAT(idle, Contains((*child)->pid()));
  EXPECT_EQ((*child)->Wait()->exit_code, 5);
}

TEST(LauncherPoolTest, BadOptionsAreOneLineErrors) {
  auto missing = LauncherPool::Create({"/nonexistent/tessera-launcher", 2});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "no worker launcher at /nonexistent/tessera-launcher (not an executable file)");
  EXPECT_EQ(LauncherPool::Create({LauncherPath(), -1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera

#include "node/worker_watchdog.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

class FakeProbe : public WorkerProgressProbe {
 public:
  std::optional<WorkerProgress> Sample(int pid, const std::string&, const std::string&) override {
    auto it = progress->find(pid);
    if (it == progress->end()) return std::nullopt;
    return it->second;
  }
  std::shared_ptr<std::map<int, WorkerProgress>> progress =
      std::make_shared<std::map<int, WorkerProgress>>();
};

struct Fixture {
  Fixture() {
    auto probe = std::make_unique<FakeProbe>();
    progress = probe->progress;
    watchdog = std::make_unique<WorkerWatchdog>(
        WatchdogOptions{absl::Seconds(5), absl::Milliseconds(500)}, std::move(probe));
  }
  std::shared_ptr<std::map<int, WorkerProgress>> progress;
  std::unique_ptr<WorkerWatchdog> watchdog;
  absl::Time t0 = absl::FromUnixSeconds(1000);
};

WatchedWorker Owned(const std::string& id) {
  WatchedWorker w;
  w.id = WorkerId(id);
  w.pid = 10;
  w.stop_when_unwatched = true;
  return w;
}

TEST(WorkerWatchdogTest, WorkersWithoutARuleAreNotTracked) {
  Fixture f;
  WatchedWorker plain;
  plain.id = WorkerId("w1");
  f.watchdog->Add(plain, f.t0);
  EXPECT_EQ(f.watchdog->tracked(), 0u);
  EXPECT_THAT(f.watchdog->Check(f.t0 + absl::Hours(1)), IsEmpty());
}

TEST(WorkerWatchdogTest, AnOwnedWorkerNobodyWatchesIsStoppedAfterTheFirstWatchGrace) {
  Fixture f;
  f.watchdog->Add(Owned("w1"), f.t0);
  EXPECT_THAT(f.watchdog->Check(f.t0 + absl::Seconds(4)), IsEmpty());
  auto verdicts = f.watchdog->Check(f.t0 + absl::Seconds(5));
  ASSERT_THAT(verdicts, SizeIs(1));
  EXPECT_EQ(verdicts[0].id, WorkerId("w1"));
  EXPECT_FALSE(verdicts[0].hung);
  EXPECT_THAT(verdicts[0].cause, HasSubstr("nobody watched it"));
  // Reported once.
  EXPECT_THAT(f.watchdog->Check(f.t0 + absl::Seconds(10)), IsEmpty());
}

TEST(WorkerWatchdogTest, AnOwnedWorkerIsStoppedShortlyAfterItsLastWatcherLeaves) {
  Fixture f;
  f.watchdog->Add(Owned("w1"), f.t0);
  f.watchdog->WatchStarted(WorkerId("w1"));
  f.watchdog->WatchStarted(WorkerId("w1"));
  EXPECT_THAT(f.watchdog->Check(f.t0 + absl::Minutes(10)), IsEmpty());
  const absl::Time left = f.t0 + absl::Minutes(10);
  f.watchdog->WatchEnded(WorkerId("w1"), left);
  EXPECT_THAT(f.watchdog->Check(left + absl::Seconds(2)), IsEmpty()) << "one watcher remains";
  f.watchdog->WatchEnded(WorkerId("w1"), left);
  EXPECT_THAT(f.watchdog->Check(left + absl::Milliseconds(100)), IsEmpty());
  auto verdicts = f.watchdog->Check(left + absl::Milliseconds(500));
  ASSERT_THAT(verdicts, SizeIs(1));
  EXPECT_THAT(verdicts[0].cause, HasSubstr("owner stopped watching"));
}

TEST(WorkerWatchdogTest, AWorkerWithNeitherOutputNorCpuTimeForItsTimeoutIsHung) {
  Fixture f;
  WatchedWorker w;
  w.id = WorkerId("w2");
  w.pid = 42;
  w.hang_timeout = absl::Seconds(3);
  (*f.progress)[42] = {100, 10};
  f.watchdog->Add(w, f.t0);
  EXPECT_THAT(f.watchdog->Check(f.t0), IsEmpty());
  // CPU time moves: not hung, and the clock restarts.
  (*f.progress)[42] = {101, 10};
  EXPECT_THAT(f.watchdog->Check(f.t0 + absl::Seconds(2)), IsEmpty());
  EXPECT_THAT(f.watchdog->Check(f.t0 + absl::Seconds(4)), IsEmpty());
  // Output moves.
  (*f.progress)[42] = {101, 11};
  EXPECT_THAT(f.watchdog->Check(f.t0 + absl::Seconds(6)), IsEmpty());
  EXPECT_THAT(f.watchdog->Check(f.t0 + absl::Seconds(8)), IsEmpty());
  auto verdicts = f.watchdog->Check(f.t0 + absl::Seconds(9));
  ASSERT_THAT(verdicts, SizeIs(1));
  EXPECT_TRUE(verdicts[0].hung);
  EXPECT_THAT(verdicts[0].cause, HasSubstr("hung: no output and no CPU time for 3s"));
}

TEST(WorkerWatchdogTest, AGoneProcessIsLeftToItsExit) {
  Fixture f;
  WatchedWorker w;
  w.id = WorkerId("w3");
  w.pid = 7;
  w.hang_timeout = absl::Seconds(1);
  f.watchdog->Add(w, f.t0);
  EXPECT_THAT(f.watchdog->Check(f.t0 + absl::Seconds(30)), IsEmpty());
  f.watchdog->Remove(WorkerId("w3"));
  EXPECT_EQ(f.watchdog->tracked(), 0u);
}

TEST(WorkerWatchdogTest, TheProcProbeSumsTheSessionAndTheLogFiles) {
  const std::string dir = std::filesystem::temp_directory_path() / "watchdog-proc-test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/100");
  std::filesystem::create_directories(dir + "/101");
  std::filesystem::create_directories(dir + "/102");
  // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
  std::ofstream(dir + "/100/stat") << "100 (py thon) S 1 100 100 0 -1 0 0 0 0 0 5 2 0 0\n";
  std::ofstream(dir + "/101/stat") << "101 (child) R 100 100 100 0 -1 0 0 0 0 0 30 3 0 0\n";
  std::ofstream(dir + "/102/stat") << "102 (other) R 1 102 102 0 -1 0 0 0 0 0 900 9 0 0\n";
  std::ofstream(dir + "/out") << "hello";
  std::ofstream(dir + "/err") << "e";
  auto probe = MakeProcProgressProbe(dir);
  auto sample = probe->Sample(100, dir + "/out", dir + "/err");
  ASSERT_TRUE(sample.has_value());
  EXPECT_EQ(sample->cpu_ticks, 5u + 2u + 30u + 3u);
  EXPECT_EQ(sample->output_bytes, 6u);
  EXPECT_FALSE(probe->Sample(555, "", "").has_value());
  std::filesystem::remove_all(dir);
}

TEST(WorkerWatchdogTest, TheProcProbeReadsThisProcess) {
  auto probe = MakeProcProgressProbe();
  auto sample = probe->Sample(::getpid(), "", "");
  ASSERT_TRUE(sample.has_value());
}

}  // namespace
}  // namespace tessera

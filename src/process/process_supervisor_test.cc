#include "process/process_supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "process/launcher_pool.h"
#include "process/test_support.h"

namespace tessera {
namespace {

using ::tessera::testing::FileExists;
using ::tessera::testing::HelperPath;
using ::tessera::testing::LauncherPath;
using ::tessera::testing::Spawning;
using ::tessera::testing::SpawningName;
using ::tessera::testing::TempDir;
using ::tessera::testing::WaitUntil;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Collects exit reports; thread-safe.
class Exits {
 public:
  ExitCallback Callback() {
    return [this](const ChildId& id, const ExitStatus& status) {
      absl::MutexLock lock(&mu_);
      reports_[id.value()].push_back(status);
    };
  }
  size_t Count() {
    absl::MutexLock lock(&mu_);
    size_t n = 0;
    for (const auto& [id, list] : reports_) n += list.size();
    return n;
  }
  std::vector<ExitStatus> For(const std::string& id) {
    absl::MutexLock lock(&mu_);
    return reports_[id];
  }
  bool WaitFor(size_t n) {
    return WaitUntil([&] { return Count() >= n; });
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, std::vector<ExitStatus>> reports_ ABSL_GUARDED_BY(mu_);
};

class ProcessSupervisorTest : public ::testing::TestWithParam<Spawning> {
 protected:
  void SetUp() override {
    if (GetParam() == Spawning::kPooled) {
      auto pool = LauncherPool::Create({LauncherPath(), 2});
      ASSERT_TRUE(pool.ok()) << pool.status();
      pool_ = std::move(*pool);
    }
    auto supervisor = ProcessSupervisor::Create(Options());
    ASSERT_TRUE(supervisor.ok()) << supervisor.status();
    supervisor_ = std::move(*supervisor);
  }
  SupervisorOptions Options() {
    SupervisorOptions options;
    options.vmstat_path = dir_ / "vmstat";  // absent: no host-counter verdicts in these tests
    options.launcher_pool = pool_.get();
    return options;
  }
  ChildSpec Spec(std::vector<std::string> commands) {
    ChildSpec spec;
    spec.argv = {HelperPath()};
    spec.argv.insert(spec.argv.end(), commands.begin(), commands.end());
    spec.env = {{"PATH", "/usr/bin:/bin"}};
    return spec;
  }

  TempDir dir_;
  Exits exits_;
  std::unique_ptr<LauncherPool> pool_;  // pooled runs only; outlives the supervisor
  std::unique_ptr<ProcessSupervisor> supervisor_;
};

INSTANTIATE_TEST_SUITE_P(Spawning, ProcessSupervisorTest,
                         ::testing::Values(Spawning::kDirect, Spawning::kPooled),
                         [](const auto& info) { return SpawningName(info.param); });

TEST_P(ProcessSupervisorTest, ReportsEachExitExactlyOnce) {
  ASSERT_TRUE(supervisor_->Start(ChildId("a"), Spec({"exit", "0"}), exits_.Callback()).ok());
  ASSERT_TRUE(supervisor_->Start(ChildId("b"), Spec({"exit", "3"}), exits_.Callback()).ok());
  ASSERT_TRUE(supervisor_->Start(ChildId("c"), Spec({"kill-self", "9"}), exits_.Callback()).ok());
  ASSERT_TRUE(exits_.WaitFor(3));
  supervisor_->Shutdown(absl::Seconds(5));
  ASSERT_EQ(exits_.Count(), 3u);
  EXPECT_EQ(exits_.For("a")[0].reason, "exited with code 0");
  EXPECT_EQ(exits_.For("b")[0].reason, "exited with code 3");
  EXPECT_EQ(exits_.For("c")[0].reason, "killed by signal 9 (SIGKILL)");
  EXPECT_TRUE(supervisor_->Children().empty());
}

TEST_P(ProcessSupervisorTest, ManyChildrenAtOnce) {
  constexpr int kChildren = 64;
  for (int i = 0; i < kChildren; ++i) {
    auto pid = supervisor_->Start(ChildId("w" + std::to_string(i)),
                                  Spec({"exit", std::to_string(i % 5)}), exits_.Callback());
    ASSERT_TRUE(pid.ok()) << pid.status();
  }
  ASSERT_TRUE(exits_.WaitFor(kChildren));
  supervisor_->Shutdown(absl::Seconds(5));
  EXPECT_EQ(exits_.Count(), static_cast<size_t>(kChildren));
  for (int i = 0; i < kChildren; ++i) {
    std::vector<ExitStatus> reports = exits_.For("w" + std::to_string(i));
    ASSERT_EQ(reports.size(), 1u) << i;
    EXPECT_EQ(reports[0].exit_code, i % 5);
  }
}

TEST_P(ProcessSupervisorTest, TerminateIsGracefulThenForced) {
  std::string polite_ready = dir_ / "polite", stubborn_ready = dir_ / "stubborn";
  ASSERT_TRUE(
      supervisor_
          ->Start(ChildId("polite"), Spec({"touch", polite_ready, "pause"}), exits_.Callback())
          .ok());
  ASSERT_TRUE(supervisor_
                  ->Start(ChildId("stubborn"),
                          Spec({"ignore-term", "touch", stubborn_ready, "pause"}),
                          exits_.Callback())
                  .ok());
  ASSERT_TRUE(WaitUntil([&] { return FileExists(polite_ready) && FileExists(stubborn_ready); }));
  EXPECT_TRUE(supervisor_->Terminate(ChildId("polite"), absl::Seconds(30)).ok());
  EXPECT_TRUE(supervisor_->Terminate(ChildId("stubborn"), absl::Milliseconds(50)).ok());
  ASSERT_TRUE(exits_.WaitFor(2));
  EXPECT_EQ(exits_.For("polite")[0].signal, SIGTERM);
  EXPECT_EQ(exits_.For("stubborn")[0].signal, SIGKILL);
}

TEST_P(ProcessSupervisorTest, SignalAndLookupsByName) {
  std::string ready = dir_ / "ready";
  auto pid = supervisor_->Start(ChildId("w1"), Spec({"touch", ready, "pause"}), exits_.Callback());
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_EQ(supervisor_->Pid(ChildId("w1")), *pid);
  EXPECT_THAT(supervisor_->Children(), ElementsAre(ChildId("w1")));
  EXPECT_EQ(
      supervisor_->Start(ChildId("w1"), Spec({"exit", "0"}), exits_.Callback()).status().code(),
      absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(supervisor_->Signal(ChildId("nobody"), SIGTERM).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(WaitUntil([&] { return FileExists(ready); }));
  EXPECT_TRUE(supervisor_->Signal(ChildId("w1"), SIGINT).ok());
  ASSERT_TRUE(exits_.WaitFor(1));
  EXPECT_EQ(exits_.For("w1")[0].reason, "killed by signal 2 (SIGINT)");
  EXPECT_EQ(supervisor_->Pid(ChildId("w1")), std::nullopt);
  EXPECT_EQ(supervisor_->Signal(ChildId("w1"), SIGTERM).code(), absl::StatusCode::kNotFound);
}

TEST_P(ProcessSupervisorTest, SpawnErrorsComeFromStartWithNoCallback) {
  ChildSpec spec = Spec({});
  spec.argv = {dir_ / "missing"};
  auto pid = supervisor_->Start(ChildId("bad"), spec, exits_.Callback());
  EXPECT_THAT(pid.status().message(), HasSubstr("No such file or directory"));
  supervisor_->Shutdown(absl::Seconds(5));
  EXPECT_EQ(exits_.Count(), 0u);
}

TEST_P(ProcessSupervisorTest, ACallbackMayRestartTheSameId) {
  absl::Mutex mu;
  std::vector<int> codes;
  ExitCallback callback;
  callback = [&](const ChildId& id, const ExitStatus& status) {
    absl::MutexLock lock(&mu);
    codes.push_back(status.exit_code);
    if (codes.size() == 1) {
      EXPECT_TRUE(supervisor_->Start(id, Spec({"exit", "2"}), callback).ok());
    }
  };
  ASSERT_TRUE(supervisor_->Start(ChildId("again"), Spec({"exit", "1"}), callback).ok());
  ASSERT_TRUE(WaitUntil([&] {
    absl::MutexLock lock(&mu);
    return codes.size() == 2;
  }));
  supervisor_->Shutdown(absl::Seconds(5));
  EXPECT_THAT(codes, ElementsAre(1, 2));
}

TEST_P(ProcessSupervisorTest, ShutdownTerminatesEveryChildAndReportsIt) {
  std::string stubborn_ready = dir_ / "stubborn";
  ASSERT_TRUE(supervisor_->Start(ChildId("a"), Spec({"pause"}), exits_.Callback()).ok());
  ASSERT_TRUE(supervisor_
                  ->Start(ChildId("b"), Spec({"ignore-term", "touch", stubborn_ready, "pause"}),
                          exits_.Callback())
                  .ok());
  ASSERT_TRUE(WaitUntil([&] { return FileExists(stubborn_ready); }));
  supervisor_->Shutdown(absl::Milliseconds(50));
  EXPECT_EQ(exits_.Count(), 2u);
  EXPECT_EQ(exits_.For("b")[0].signal, SIGKILL);
  EXPECT_EQ(
      supervisor_->Start(ChildId("c"), Spec({"exit", "0"}), exits_.Callback()).status().code(),
      absl::StatusCode::kFailedPrecondition);
  supervisor_->Shutdown(absl::Seconds(1));  // idempotent
}

// A start runs without the supervisor's lock. Here a child's stdout and stderr are FIFOs, which
// its start opens in turn and which block until a reader comes: once the test has read-opened
// the first, the start is under way and stuck on the second. Shutdown then waits for it, and the
// child it finally starts is terminated and reported like the others.
TEST_P(ProcessSupervisorTest, AStartThatEndsAfterShutdownBeganIsTerminatedAndReported) {
  const std::string out = dir_ / "out.fifo", err = dir_ / "err.fifo";
  ASSERT_EQ(::mkfifo(out.c_str(), 0644), 0);
  ASSERT_EQ(::mkfifo(err.c_str(), 0644), 0);
  ChildSpec slow = Spec({"pause"});
  slow.stdout_path = out;
  slow.stderr_path = err;
  absl::StatusOr<pid_t> started = absl::UnknownError("not yet");
  std::thread starter(
      [&] { started = supervisor_->Start(ChildId("slow"), slow, exits_.Callback()); });
  std::atomic<int> out_reader{-1};
  std::thread out_opener([&] { out_reader = ::open(out.c_str(), O_RDONLY | O_CLOEXEC); });
  bool under_way = WaitUntil([&] { return out_reader.load() >= 0; });
  if (!under_way)
    ::close(::open(out.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));  // unblock the opener
  out_opener.join();
  std::thread stopper([&] { supervisor_->Shutdown(absl::Seconds(20)); });
  EXPECT_TRUE(WaitUntil([&] {
    // No program: refused by the spawn (starting nothing) until Shutdown refuses it first.
    return supervisor_->Start(ChildId("late"), ChildSpec(), exits_.Callback()).status().code() ==
           absl::StatusCode::kFailedPrecondition;
  }));
  int err_reader = ::open(err.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // the start goes on
  ASSERT_GE(err_reader, 0);
  starter.join();
  stopper.join();
  ::close(err_reader);
  ::close(out_reader);
  ASSERT_TRUE(under_way) << "the start never opened its stdout";
  ASSERT_TRUE(started.ok()) << started.status();
  ASSERT_EQ(exits_.For("slow").size(), 1u);
  EXPECT_EQ(exits_.For("slow")[0].signal, SIGTERM);
  EXPECT_TRUE(supervisor_->Children().empty());
}

TEST_P(ProcessSupervisorTest, EachChildGetsItsOwnCgroupNamedAfterIt) {
  auto parent = FindWorkerCgroupParent({});
  if (!parent.ok()) GTEST_SKIP() << "cgroup v2 not usable here: " << parent.status().message();
  TempDir dir;
  SupervisorOptions options = Options();
  options.cgroup_parent = *parent;
  auto supervisor = ProcessSupervisor::Create(options);
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  Exits exits;
  std::string id = "sup-" + std::to_string(::getpid());
  std::string ready = dir / "ready";
  ChildSpec spec;
  spec.argv = {HelperPath(), "touch", ready, "pause"};
  auto pid = (*supervisor)->Start(ChildId(id), spec, exits.Callback());
  ASSERT_TRUE(pid.ok()) << pid.status();
  std::string cgroup = parent->dir + "/tessera-worker-" + id;
  EXPECT_EQ(::tessera::testing::ReadText(cgroup + "/cgroup.procs"), std::to_string(*pid) + "\n");
  EXPECT_TRUE((*supervisor)->Terminate(ChildId(id), absl::Seconds(20)).ok());
  ASSERT_TRUE(exits.WaitFor(1));
  EXPECT_EQ(exits.For(id)[0].signal, SIGTERM);
  EXPECT_FALSE(FileExists(cgroup));
}

TEST_P(ProcessSupervisorTest, NeverReapsChildrenItDidNotStart) {
  pid_t mine = ::fork();
  if (mine == 0) ::_exit(42);
  ASSERT_GT(mine, 0);
  ASSERT_TRUE(supervisor_->Start(ChildId("w"), Spec({"exit", "0"}), exits_.Callback()).ok());
  ASSERT_TRUE(exits_.WaitFor(1));
  supervisor_->Shutdown(absl::Seconds(5));
  int status = 0;
  ASSERT_EQ(::waitpid(mine, &status, 0), mine);
  EXPECT_EQ(WEXITSTATUS(status), 42);
}

}  // namespace
}  // namespace tessera

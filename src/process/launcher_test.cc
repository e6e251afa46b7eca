#include "process/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "process/launch_spec.h"
#include "process/launch_wire.h"
#include "process/test_support.h"

namespace tessera {
namespace {

using ::tessera::testing::HelperPath;
using ::tessera::testing::LauncherPath;
using ::tessera::testing::ProcessGone;
using ::tessera::testing::ReadText;
using ::tessera::testing::TempDir;
using ::tessera::testing::WaitUntil;
using ::tessera::testing::WriteText;

namespace wire = launch_wire;

std::set<std::string> OpenFds(pid_t pid) {
  std::set<std::string> fds;
  std::error_code ec;
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    fds.insert(entry.path().filename().string());
  }
  return fds;
}

std::unique_ptr<Launcher> StartLauncher() {
  auto launcher = Launcher::Start(LauncherPath());
  EXPECT_TRUE(launcher.ok()) << launcher.status();
  return launcher.ok() ? std::move(*launcher) : nullptr;
}

TEST(LauncherTest, BecomesTheWorkerAndTheChannelClosesWithNothingSent) {
  TempDir dir;
  std::unique_ptr<Launcher> launcher = StartLauncher();
  ASSERT_NE(launcher, nullptr);
  const pid_t pid = launcher->pid();
  LaunchSpec spec;
  spec.argv = {HelperPath(), "out", "from the worker", "exit", "7"};
  spec.stdout_path = dir / "logs/w.out";
  ASSERT_TRUE(launcher->Send(EncodeLaunchSpec(spec)).ok());
  auto outcome = launcher->ReadOutcome();
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(*outcome, "");
  UniqueFd pidfd = launcher->Adopt();
  EXPECT_TRUE(pidfd.valid());
  launcher.reset();  // adopted: the process is ours to reap, not killed
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
  EXPECT_EQ(ReadText(dir / "logs/w.out"), "from the worker\n");
}

TEST(LauncherTest, WaitsInItsOwnSessionWithOnlyItsChannelAndDevNull) {
  // A descriptor a careless library left inheritable must not stay open in idle launchers.
  int leaked = ::open("/dev/zero", O_RDONLY);
  ASSERT_GE(leaked, 0);
  std::unique_ptr<Launcher> launcher = StartLauncher();
  ::close(leaked);
  ASSERT_NE(launcher, nullptr);
  const pid_t pid = launcher->pid();
  EXPECT_TRUE(WaitUntil([&] { return OpenFds(pid) == std::set<std::string>{"0", "1", "2", "3"}; }));
  EXPECT_EQ(::getsid(pid), pid);
  EXPECT_EQ(::getpgid(pid), pid);
  const std::string proc = "/proc/" + std::to_string(pid) + "/fd/";
  for (const char* fd : {"0", "1", "2"}) {
    EXPECT_EQ(std::filesystem::read_symlink(proc + fd).string(), "/dev/null") << fd;
  }
  EXPECT_FALSE(launcher->HasExited());
}

TEST(LauncherTest, RefusesAMalformedSpecWithItsReason) {
  std::unique_ptr<Launcher> launcher = StartLauncher();
  ASSERT_NE(launcher, nullptr);
  ASSERT_TRUE(launcher->Send("this is not a launch spec").ok());
  auto outcome = launcher->ReadOutcome();
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  wire::Report report;
  char error[128];
  ASSERT_TRUE(wire::ParseReport(reinterpret_cast<const unsigned char*>(outcome->data()),
                                outcome->size(), &report, error, sizeof(error)))
      << error;
  EXPECT_EQ(report.stage, wire::kStageSpec);
  EXPECT_EQ(std::string(report.detail, report.detail_size), "launch spec has a wrong magic number");
  const pid_t pid = launcher->pid();
  launcher->Reap();
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(LauncherTest, DestroyingAnUnusedLauncherKillsAndReapsIt) {
  std::unique_ptr<Launcher> launcher = StartLauncher();
  ASSERT_NE(launcher, nullptr);
  const pid_t pid = launcher->pid();
  launcher.reset();
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(LauncherTest, SendingToALauncherThatDiedIsUnavailable) {
  std::unique_ptr<Launcher> launcher = StartLauncher();
  ASSERT_NE(launcher, nullptr);
  ASSERT_EQ(::kill(launcher->pid(), SIGKILL), 0);
  ASSERT_TRUE(WaitUntil([&] { return launcher->HasExited(); }));
  LaunchSpec spec;
  spec.argv = {"/bin/true"};
  EXPECT_EQ(launcher->Send(EncodeLaunchSpec(spec)).code(), absl::StatusCode::kUnavailable);
}

// Forks a stand-in for the agent, which runs `start` (the pid of the process to watch, -1 when
// it could not start it), reports that pid and waits until killed; then kills the stand-in and
// expects the watched process to go too.
void ExpectGoneWhenItsAgentDies(const std::function<pid_t()>& start) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  pid_t agent = ::fork();
  if (agent == 0) {
    pid_t pid = start();
    ssize_t ignored = ::write(pipe_fds[1], &pid, sizeof(pid));
    (void)ignored;
    ::pause();
    ::_exit(0);
  }
  ASSERT_GT(agent, 0);
  ::close(pipe_fds[1]);
  pid_t watched = -1;
  ASSERT_EQ(::read(pipe_fds[0], &watched, sizeof(watched)), static_cast<ssize_t>(sizeof(watched)));
  ::close(pipe_fds[0]);
  ASSERT_GT(watched, 0);
  EXPECT_FALSE(ProcessGone(watched));
  ::kill(agent, SIGKILL);
  ASSERT_EQ(::waitpid(agent, nullptr, 0), agent);
  EXPECT_TRUE(WaitUntil([&] { return ProcessGone(watched); }));
}

// The agent dies (here: a child process that started a launcher and was killed): the launcher
// sees its channel close and exits by itself, without waiting for anything.
TEST(LauncherTest, ExitsWhenTheProcessThatStartedItDies) {
  ExpectGoneWhenItsAgentDies([]() -> pid_t {
    auto launcher = Launcher::Start(LauncherPath());
    // Kept (leaked) in the stand-in: destroying the handle would end the launcher itself.
    return launcher.ok() ? launcher->release()->pid() : -1;
  });
}

// A machine loss without the machine: the agent that started a launcher dies after the launcher
// became a worker. The worker must not outlive it (it would keep its devices): the parent-death
// signal the launcher set is kept through exec.
TEST(LauncherTest, TheWorkerItBecameDiesWithTheProcessThatStartedIt) {
  ExpectGoneWhenItsAgentDies([]() -> pid_t {
    auto launcher = Launcher::Start(LauncherPath());
    if (!launcher.ok()) return -1;
    LaunchSpec spec;
    spec.argv = {HelperPath(), "pause"};
    if (!(*launcher)->Send(EncodeLaunchSpec(spec)).ok()) return -1;
    auto outcome = (*launcher)->ReadOutcome();
    if (!outcome.ok() || !outcome->empty()) return -1;
    const pid_t pid = (*launcher)->pid();
    (void)(*launcher)->Adopt();
    return pid;
  });
}

// Log files directly in --log-dir are the two the launcher made while it waited, linked in
// under their names; an existing log is appended to; a log elsewhere is created.
TEST(LauncherTest, NewLogsInItsLogFolderAreTheFilesItMadeAhead) {
  TempDir dir;
  WriteText(dir / "old.err", "before\n");
  auto started = Launcher::Start(LauncherPath(), dir.path());
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<Launcher> launcher = std::move(*started);
  const std::string fd_dir = "/proc/" + std::to_string(launcher->pid()) + "/fd/";
  auto is_spare = [&](const std::string& fd) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(fd_dir + fd, ec).string();
    return !ec && target.rfind(dir.path() + "/", 0) == 0 && target.ends_with(" (deleted)");
  };
  ASSERT_TRUE(WaitUntil([&] { return is_spare("4") && is_spare("5"); }));
  struct stat spare;
  ASSERT_EQ(::stat((fd_dir + "4").c_str(), &spare), 0);
  LaunchSpec spec;
  spec.argv = {HelperPath(), "out", "new", "err", "appended"};
  spec.stdout_path = dir / "w.out";
  spec.stderr_path = dir / "old.err";
  ASSERT_TRUE(launcher->Send(EncodeLaunchSpec(spec)).ok());
  auto outcome = launcher->ReadOutcome();
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_EQ(*outcome, "");
  const pid_t pid = launcher->pid();
  UniqueFd pidfd = launcher->Adopt();
  ASSERT_EQ(::waitpid(pid, nullptr, 0), pid);
  struct stat out;
  ASSERT_EQ(::stat(spec.stdout_path.c_str(), &out), 0);
  EXPECT_EQ(out.st_ino, spare.st_ino);
  EXPECT_EQ(out.st_mode & 0777, 0600u);
  EXPECT_EQ(ReadText(spec.stdout_path), "new\n");
  EXPECT_EQ(ReadText(spec.stderr_path), "before\nappended\n");
}

TEST(LauncherTest, AMissingProgramIsAnError) {
  auto launcher = Launcher::Start("/nonexistent/tessera-launcher");
  ASSERT_FALSE(launcher.ok());
  EXPECT_EQ(
      launcher.status().message(),
      "cannot start the worker launcher /nonexistent/tessera-launcher: No such file or directory");
}

}  // namespace
}  // namespace tessera

#include "process/child_process.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "process/launcher_pool.h"
#include "process/test_support.h"

namespace tessera {
namespace {

using ::tessera::testing::FileExists;
using ::tessera::testing::HelperPath;
using ::tessera::testing::LauncherPath;
using ::tessera::testing::ProcessGone;
using ::tessera::testing::ReadPidFile;
using ::tessera::testing::ReadText;
using ::tessera::testing::Spawning;
using ::tessera::testing::SpawningName;
using ::tessera::testing::TempDir;
using ::tessera::testing::WaitUntil;
using ::tessera::testing::WriteText;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
using ::testing::UnorderedElementsAreArray;

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

class ChildProcessTest : public ::testing::TestWithParam<Spawning> {
 protected:
  void SetUp() override {
    if (GetParam() == Spawning::kPooled) {
      // Logs directly in dir_ take the launchers' ready-made files; deeper ones are created.
      auto pool = LauncherPool::Create({LauncherPath(), 2, dir_.path()});
      ASSERT_TRUE(pool.ok()) << pool.status();
      pool_ = std::move(*pool);
    }
  }
  ChildSpec Spec(std::vector<std::string> commands) {
    ChildSpec spec;
    spec.argv = {HelperPath()};
    spec.argv.insert(spec.argv.end(), commands.begin(), commands.end());
    spec.env = {{"PATH", "/usr/bin:/bin"}};
    spec.stdout_path = dir_ / "out.log";
    spec.stderr_path = dir_ / "err.log";
    return spec;
  }
  // Options with a host OOM counter the test controls, so the real one cannot interfere.
  SpawnOptions Options() {
    WriteText(vmstat_, "pgfault 10\noom_kill 5\n");
    SpawnOptions options;
    options.vmstat_path = vmstat_;
    options.launcher_pool = pool_.get();
    return options;
  }
  ExitStatus Run(const ChildSpec& spec) {
    auto child = ChildProcess::Spawn(spec, Options());
    EXPECT_TRUE(child.ok()) << child.status();
    if (!child.ok()) return ExitStatus{};
    auto status = (*child)->Wait();
    EXPECT_TRUE(status.ok()) << status.status();
    return status.ok() ? *status : ExitStatus{};
  }

  TempDir dir_;
  std::string vmstat_ = dir_ / "vmstat";
  std::unique_ptr<LauncherPool> pool_;  // pooled runs only
};

INSTANTIATE_TEST_SUITE_P(Spawning, ChildProcessTest,
                         ::testing::Values(Spawning::kDirect, Spawning::kPooled),
                         [](const auto& info) { return SpawningName(info.param); });

TEST_P(ChildProcessTest, EnvironmentIsExactlyTheOneGiven) {
  ChildSpec spec = Spec({"env"});
  spec.env = {{"PATH", "/usr/bin:/bin"},
              {"A", "1"},
              {"SPACED", "two words"},
              {"EMPTY", ""},
              {"CUDA_VISIBLE_DEVICES", "2,5"}};
  EXPECT_TRUE(Run(spec).success());
  EXPECT_THAT(Lines(ReadText(spec.stdout_path)),
              UnorderedElementsAre("PATH=/usr/bin:/bin", "A=1", "SPACED=two words",
                                   "EMPTY=", "CUDA_VISIBLE_DEVICES=2,5"));
}

TEST_P(ChildProcessTest, EmptyEnvironmentGivesNoVariables) {
  ChildSpec spec = Spec({"env"});
  spec.env.clear();
  EXPECT_TRUE(Run(spec).success());
  EXPECT_EQ(ReadText(spec.stdout_path), "");
}

TEST_P(ChildProcessTest, WorkingDirectoryIsTheOneGiven) {
  std::string work = dir_ / "work dir";
  ASSERT_EQ(::mkdir(work.c_str(), 0755), 0);
  ChildSpec spec = Spec({"cwd"});
  spec.cwd = work;
  EXPECT_TRUE(Run(spec).success());
  EXPECT_EQ(ReadText(spec.stdout_path), std::filesystem::canonical(work).string() + "\n");
}

TEST_P(ChildProcessTest, OutputGoesToLogFilesCreatedWithTheirFoldersAndAppended) {
  ChildSpec spec = Spec({"out", "to stdout", "err", "to stderr"});
  spec.stdout_path = dir_ / "nodes/n1/workers/w1.out";
  spec.stderr_path = dir_ / "nodes/n1/workers/w1.err";
  // Whatever the umask, a worker's output is its owner's alone.
  const mode_t saved_umask = ::umask(0);
  EXPECT_TRUE(Run(spec).success());
  EXPECT_TRUE(Run(spec).success());
  ::umask(saved_umask);
  EXPECT_EQ(ReadText(spec.stdout_path), "to stdout\nto stdout\n");
  EXPECT_EQ(ReadText(spec.stderr_path), "to stderr\nto stderr\n");
  struct stat st;
  ASSERT_EQ(::stat(spec.stdout_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir_ / "nodes/n1/workers").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat((dir_ / "nodes").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_P(ChildProcessTest, StdoutAndStderrMayShareOneFile) {
  ChildSpec spec = Spec({"out", "one", "err", "two", "out", "three"});
  spec.stderr_path = spec.stdout_path;
  EXPECT_TRUE(Run(spec).success());
  EXPECT_EQ(ReadText(spec.stdout_path), "one\ntwo\nthree\n");
}

TEST_P(ChildProcessTest, StdinIsDevNull) {
  ChildSpec spec = Spec({"stdin"});
  EXPECT_TRUE(Run(spec).success());
  EXPECT_EQ(ReadText(spec.stdout_path), "/dev/null\n");
}

TEST_P(ChildProcessTest, StdinIsItsPathWhenOneIsGiven) {
  ChildSpec spec = Spec({"stdin"});
  const std::string input = dir_ / "input";
  std::ofstream(input) << "fed\n";
  spec.stdin_path = input;
  EXPECT_TRUE(Run(spec).success());
  EXPECT_EQ(ReadText(spec.stdout_path), input + "\n");
}

TEST_P(ChildProcessTest, NoInheritedFileDescriptorReachesTheChild) {
  // Descriptors without close-on-exec, as a careless library (or a gRPC socket) might leave.
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  int socket_fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(socket_fd, 0);
  int high_fd = ::dup2(pipe_fds[0], 900);
  ASSERT_EQ(high_fd, 900);
  ChildSpec spec = Spec({"fds"});
  EXPECT_TRUE(Run(spec).success());
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  ::close(socket_fd);
  ::close(high_fd);
  EXPECT_THAT(Lines(ReadText(spec.stdout_path)), UnorderedElementsAre("0", "1", "2"));
}

TEST_P(ChildProcessTest, ProgramIsFoundInTheChildsPath) {
  std::string bin = dir_ / "bin";
  ASSERT_EQ(::mkdir(bin.c_str(), 0755), 0);
  ASSERT_EQ(::symlink(HelperPath().c_str(), (bin + "/tessera-helper").c_str()), 0);
  ChildSpec spec = Spec({"out", "found"});
  spec.argv[0] = "tessera-helper";
  spec.env["PATH"] = "/nonexistent:" + bin;
  EXPECT_TRUE(Run(spec).success());
  EXPECT_EQ(ReadText(spec.stdout_path), "found\n");
}

TEST_P(ChildProcessTest, ProgramMissingFromPathIsASpawnError) {
  ChildSpec spec = Spec({});
  spec.argv = {"tessera-no-such-program"};
  auto child = ChildProcess::Spawn(spec, Options());
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(child.status().message(), HasSubstr("\"tessera-no-such-program\""));
  EXPECT_THAT(child.status().message(), HasSubstr("PATH (/usr/bin:/bin)"));
}

TEST_P(ChildProcessTest, MissingProgramPathIsASpawnError) {
  ChildSpec spec = Spec({});
  spec.argv = {dir_ / "missing"};
  auto child = ChildProcess::Spawn(spec, Options());
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(child.status().message(),
            "cannot execute " + (dir_ / "missing") + ": No such file or directory");
}

TEST_P(ChildProcessTest, NonExecutableProgramIsASpawnError) {
  std::string script = dir_ / "script.sh";
  WriteText(script, "#!/bin/sh\nexit 0\n");
  ASSERT_EQ(::chmod(script.c_str(), 0644), 0);
  ChildSpec spec = Spec({});
  spec.argv = {script};
  auto child = ChildProcess::Spawn(spec, Options());
  ASSERT_FALSE(child.ok());
  // Root may read anything but still cannot execute a file with no execute bit.
  EXPECT_EQ(child.status().message(), "cannot execute " + script + ": Permission denied");
}

TEST_P(ChildProcessTest, MissingWorkingDirectoryIsASpawnError) {
  ChildSpec spec = Spec({"cwd"});
  spec.cwd = dir_ / "nowhere";
  auto child = ChildProcess::Spawn(spec, Options());
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().message(),
            "cannot change the child's directory to " + spec.cwd + ": No such file or directory");
}

TEST_P(ChildProcessTest, MalformedSpecsAreRefused) {
  ChildSpec empty;
  EXPECT_EQ(ChildProcess::Spawn(empty, Options()).status().message(),
            "child spec has no program (argv is empty)");
  ChildSpec bad_env = Spec({});
  bad_env.env["A=B"] = "1";
  EXPECT_EQ(ChildProcess::Spawn(bad_env, Options()).status().code(),
            absl::StatusCode::kInvalidArgument);
  ChildSpec bad_arg = Spec({std::string("a\0b", 3)});
  EXPECT_EQ(ChildProcess::Spawn(bad_arg, Options()).status().code(),
            absl::StatusCode::kInvalidArgument);
  ChildSpec limited = Spec({});
  limited.memory_max_bytes = 1 << 30;
  EXPECT_EQ(ChildProcess::Spawn(limited, Options()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_P(ChildProcessTest, RefusesToSpawnWhileSigchldIsIgnored) {
  struct sigaction ignore = {}, previous = {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGCHLD, &ignore, &previous), 0);
  auto child = ChildProcess::Spawn(Spec({"exit", "0"}), Options());
  ::sigaction(SIGCHLD, &previous, nullptr);
  EXPECT_EQ(child.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(child.status().message(), HasSubstr("SIGCHLD is ignored"));
}

// An agent blocks SIGTERM in its threads (to wait for it) and may ignore signals; none of that
// may reach a worker through exec.
TEST_P(ChildProcessTest, BlockedAndIgnoredSignalsOfTheParentDoNotReachTheChild) {
  struct sigaction ignore = {}, previous_action = {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGUSR1, &ignore, &previous_action), 0);
  sigset_t term, previous_mask;
  ::sigemptyset(&term);
  ::sigaddset(&term, SIGTERM);
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &term, &previous_mask), 0);
  // Launchers started while the parent is in this state (the fixture's were started before).
  SpawnOptions options = Options();
  std::unique_ptr<LauncherPool> pool;
  if (GetParam() == Spawning::kPooled) {
    auto created = LauncherPool::Create({LauncherPath(), 1});
    ASSERT_TRUE(created.ok()) << created.status();
    pool = std::move(*created);
    options.launcher_pool = pool.get();
  }
  std::string ready = dir_ / "ready";
  auto child = ChildProcess::Spawn(Spec({"touch", ready, "pause"}), options);
  ::pthread_sigmask(SIG_SETMASK, &previous_mask, nullptr);
  ::sigaction(SIGUSR1, &previous_action, nullptr);
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE(WaitUntil([&] { return FileExists(ready); }));
  std::string status = ReadText("/proc/" + std::to_string((*child)->pid()) + "/status");
  EXPECT_THAT(status, HasSubstr("SigBlk:\t0000000000000000\n"));
  EXPECT_THAT(status, HasSubstr("SigIgn:\t0000000000000000\n"));
  ASSERT_TRUE((*child)->Signal(SIGUSR1).ok());
  EXPECT_EQ((*child)->Wait()->signal, SIGUSR1);
}

TEST_P(ChildProcessTest, ExitCodeIsReported) {
  ExitStatus status = Run(Spec({"exit", "3"}));
  EXPECT_EQ(status.exit_code, 3);
  EXPECT_EQ(status.signal, 0);
  EXPECT_FALSE(status.out_of_memory);
  EXPECT_EQ(status.reason, "exited with code 3");
}

TEST_P(ChildProcessTest, DeathBySignalIsReported) {
  ExitStatus status = Run(Spec({"kill-self", "9"}));
  EXPECT_EQ(status.exit_code, -1);
  EXPECT_EQ(status.signal, SIGKILL);
  EXPECT_FALSE(status.out_of_memory);  // the host OOM counter did not move
  EXPECT_EQ(status.reason, "killed by signal 9 (SIGKILL)");
}

TEST_P(ChildProcessTest, ChildHasItsOwnSessionAndProcessGroup) {
  ChildSpec spec = Spec({"touch", dir_ / "ready", "pause"});
  auto child = ChildProcess::Spawn(spec, Options());
  ASSERT_TRUE(child.ok()) << child.status();
  pid_t pid = (*child)->pid();
  EXPECT_EQ(::getpgid(pid), pid);
  EXPECT_EQ(::getsid(pid), pid);
  EXPECT_NE(::getpgid(pid), ::getpgid(0));
}

TEST_P(ChildProcessTest, TryWaitSaysRunningThenReportsTheExit) {
  std::string go = dir_ / "go";
  auto child = ChildProcess::Spawn(Spec({"wait-file", go, "exit", "4"}), Options());
  ASSERT_TRUE(child.ok()) << child.status();
  auto running = (*child)->TryWait();
  ASSERT_TRUE(running.ok());
  EXPECT_FALSE(running->has_value());
  WriteText(go, "");
  std::optional<ExitStatus> exited;
  ASSERT_TRUE(WaitUntil([&] {
    auto status = (*child)->TryWait();
    if (status.ok() && status->has_value()) exited = **status;
    return exited.has_value();
  }));
  EXPECT_EQ(exited->exit_code, 4);
  // The status is kept: waiting again gives the same answer.
  EXPECT_EQ((*child)->Wait()->exit_code, 4);
}

TEST_P(ChildProcessTest, SignalReachesTheGroupAndFailsAfterExit) {
  std::string ready = dir_ / "ready";
  auto child = ChildProcess::Spawn(Spec({"touch", ready, "pause"}), Options());
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE(WaitUntil([&] { return FileExists(ready); }));
  ASSERT_TRUE((*child)->Signal(SIGUSR1).ok());
  ExitStatus status = *(*child)->Wait();
  EXPECT_EQ(status.signal, SIGUSR1);
  EXPECT_EQ(status.reason, "killed by signal 10 (SIGUSR1)");
  EXPECT_EQ((*child)->Signal(SIGTERM).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_P(ChildProcessTest, TerminateKillsGrandchildrenToo) {
  std::string pid_file = dir_ / "grandchild.pid";
  auto child = ChildProcess::Spawn(Spec({"grandchild", pid_file, "pause"}), Options());
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE(WaitUntil([&] { return FileExists(pid_file); }));
  pid_t grandchild = ReadPidFile(pid_file);
  ASSERT_FALSE(ProcessGone(grandchild));
  auto status = (*child)->Terminate(absl::Seconds(20));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->signal, SIGTERM);
  EXPECT_TRUE(WaitUntil([&] { return ProcessGone(grandchild); }));
}

TEST_P(ChildProcessTest, TerminateEscalatesToSigkillAndThatIsNotAnOom) {
  std::string ready = dir_ / "ready";
  auto child = ChildProcess::Spawn(Spec({"ignore-term", "touch", ready, "pause"}), Options());
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE(WaitUntil([&] { return FileExists(ready); }));
  // Even with the host counter rising, a SIGKILL Tessera sent is not an OOM.
  WriteText(vmstat_, "oom_kill 9\n");
  auto status = (*child)->Terminate(absl::Milliseconds(50));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->signal, SIGKILL);
  EXPECT_FALSE(status->out_of_memory);
}

TEST_P(ChildProcessTest, LeftoversOfTheGroupAreKilledWhenTheLeaderExits) {
  std::string pid_file = dir_ / "grandchild.pid";
  ExitStatus status = Run(Spec({"grandchild", pid_file, "exit", "0"}));
  EXPECT_TRUE(status.success());
  pid_t grandchild = ReadPidFile(pid_file);
  EXPECT_TRUE(WaitUntil([&] { return ProcessGone(grandchild); }));
}

TEST_P(ChildProcessTest, LeftoversCanBeLeftRunning) {
  std::string pid_file = dir_ / "grandchild.pid";
  SpawnOptions options = Options();
  options.leftovers = Leftovers::kLeave;
  auto child = ChildProcess::Spawn(Spec({"grandchild", pid_file, "exit", "0"}), options);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_TRUE((*child)->Wait()->success());
  pid_t grandchild = ReadPidFile(pid_file);
  EXPECT_FALSE(ProcessGone(grandchild));
  ::kill(grandchild, SIGKILL);
  EXPECT_TRUE(WaitUntil([&] { return ProcessGone(grandchild); }));
}

TEST_P(ChildProcessTest, DestroyingARunningChildKillsAndReapsIt) {
  std::string ready = dir_ / "ready";
  pid_t pid;
  {
    auto child = ChildProcess::Spawn(Spec({"touch", ready, "pause"}), Options());
    ASSERT_TRUE(child.ok()) << child.status();
    pid = (*child)->pid();
  }
  // Reaped: it is no longer our child at all (no zombie left behind).
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST_P(ChildProcessTest, SigkillWhileTheHostOomCounterRoseIsAHeuristicOom) {
  std::string go = dir_ / "go";
  auto child = ChildProcess::Spawn(Spec({"wait-file", go, "kill-self", "9"}), Options());
  ASSERT_TRUE(child.ok()) << child.status();
  WriteText(vmstat_, "pgfault 10\noom_kill 6\n");
  WriteText(go, "");
  ExitStatus status = *(*child)->Wait();
  EXPECT_EQ(status.signal, SIGKILL);
  EXPECT_TRUE(status.out_of_memory);
  EXPECT_EQ(status.oom_evidence, OomEvidence::kHostCounter);
  EXPECT_THAT(status.reason, HasSubstr("out of memory"));
}

TEST_P(ChildProcessTest, ManyChildrenAtOnce) {
  std::vector<std::unique_ptr<ChildProcess>> children;
  for (int i = 0; i < 32; ++i) {
    ChildSpec spec = Spec({"out", std::to_string(i), "exit", std::to_string(i % 7)});
    spec.stdout_path = dir_ / ("out-" + std::to_string(i));
    auto child = ChildProcess::Spawn(spec, Options());
    ASSERT_TRUE(child.ok()) << child.status();
    children.push_back(std::move(*child));
  }
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(children[i]->Wait()->exit_code, i % 7);
    EXPECT_EQ(ReadText(dir_ / ("out-" + std::to_string(i))), std::to_string(i) + "\n");
  }
}

// A real OOM kill, detected through the host counter: the child moves itself into a cgroup v1
// memory group with a small limit (this host's memory controller is on v1).
TEST_P(ChildProcessTest, RealOomKillIsDetectedThroughTheHostCounter) {
  std::string own = ReadText("/proc/self/cgroup");
  std::string memory_path;
  for (const std::string& line : Lines(own)) {
    std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() == 3 && parts[1] == "memory") memory_path = parts[2];
  }
  std::string base = "/sys/fs/cgroup/memory" + memory_path;
  if (memory_path.empty() || ::access(base.c_str(), W_OK) != 0) {
    GTEST_SKIP() << "no writable cgroup v1 memory hierarchy here to provoke a real OOM kill";
  }
  std::string group = base + "/tessera-oom-test-" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(group.c_str(), 0755), 0) << strerror(errno);
  WriteText(group + "/memory.limit_in_bytes", std::to_string(32 << 20));
  if (ReadText(group + "/memory.limit_in_bytes") != std::to_string(32 << 20) + "\n") {
    ::rmdir(group.c_str());
    GTEST_SKIP() << "could not set a memory limit on " << group;
  }
  ChildSpec spec = Spec({});
  spec.argv = {"/bin/sh", "-c", "echo $$ > " + group + "/cgroup.procs && exec \"$0\" alloc-forever",
               HelperPath()};
  SpawnOptions options;  // the real /proc/vmstat
  options.launcher_pool = pool_.get();
  auto child = ChildProcess::Spawn(spec, options);
  ASSERT_TRUE(child.ok()) << child.status();
  ExitStatus status = *(*child)->Wait();
  WaitUntil([&] { return ::rmdir(group.c_str()) == 0; });
  EXPECT_EQ(status.signal, SIGKILL);
  EXPECT_TRUE(status.out_of_memory) << status.reason;
  EXPECT_EQ(status.oom_evidence, OomEvidence::kHostCounter);
}

// The certain path: the child in its own cgroup v2 with memory.max.
TEST_P(ChildProcessTest, OomInOwnCgroupIsCertain) {
  auto parent = FindWorkerCgroupParent({});
  if (!parent.ok()) GTEST_SKIP() << "cgroup v2 not usable here: " << parent.status().message();
  if (!parent->memory)
    GTEST_SKIP() << "no memory controller for worker cgroups here: " << parent->no_memory_reason;
  SpawnOptions options = Options();
  options.cgroup_parent = *parent;
  options.cgroup_name = *WorkerCgroupName("oom-test-" + std::to_string(::getpid()));
  ChildSpec spec = Spec({"alloc-forever"});
  spec.memory_max_bytes = 32 << 20;
  auto child = ChildProcess::Spawn(spec, options);
  ASSERT_TRUE(child.ok()) << child.status();
  std::string cgroup = (*child)->cgroup_dir();
  EXPECT_TRUE(FileExists(cgroup));
  ExitStatus status = *(*child)->Wait();
  EXPECT_EQ(status.signal, SIGKILL);
  EXPECT_TRUE(status.out_of_memory);
  EXPECT_EQ(status.oom_evidence, OomEvidence::kCgroup);
  EXPECT_EQ(status.reason, "out of memory (killed by the kernel's OOM killer)");
  EXPECT_FALSE(FileExists(cgroup));
}

TEST_P(ChildProcessTest, OwnCgroupHoldsTheChildAndIsRemovedAfterExit) {
  auto parent = FindWorkerCgroupParent({});
  if (!parent.ok()) GTEST_SKIP() << "cgroup v2 not usable here: " << parent.status().message();
  SpawnOptions options = Options();
  options.cgroup_parent = *parent;
  options.cgroup_name = *WorkerCgroupName("cg-test-" + std::to_string(::getpid()));
  std::string ready = dir_ / "ready";
  auto child = ChildProcess::Spawn(Spec({"touch", ready, "pause"}), options);
  ASSERT_TRUE(child.ok()) << child.status();
  std::string cgroup = (*child)->cgroup_dir();
  EXPECT_EQ(ReadText(cgroup + "/cgroup.procs"), std::to_string((*child)->pid()) + "\n");
  ExitStatus status = *(*child)->Terminate(absl::Seconds(20));
  EXPECT_EQ(status.signal, SIGTERM);
  EXPECT_FALSE(status.out_of_memory);
  EXPECT_FALSE(FileExists(cgroup));
}

// A process that left the worker's group (setsid) is out of reach of the group kill; its cgroup
// still holds it, and it dies with the worker.
TEST_P(ChildProcessTest, OwnCgroupKillsProcessesThatLeftTheGroup) {
  auto parent = FindWorkerCgroupParent({});
  if (!parent.ok()) GTEST_SKIP() << "cgroup v2 not usable here: " << parent.status().message();
  SpawnOptions options = Options();
  options.cgroup_parent = *parent;
  options.cgroup_name = *WorkerCgroupName("escape-test-" + std::to_string(::getpid()));
  std::string pid_file = dir_ / "escapee.pid";
  auto child = ChildProcess::Spawn(Spec({"escapee", pid_file, "exit", "0"}), options);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_TRUE((*child)->Wait()->success());
  pid_t escapee = ReadPidFile(pid_file);
  EXPECT_TRUE(WaitUntil([&] { return ProcessGone(escapee); }));
  EXPECT_FALSE(FileExists((*child)->cgroup_dir()));
}

// The other side of the test above: without a cgroup, the group kill cannot reach an escapee.
TEST_P(ChildProcessTest, WithoutACgroupAProcessThatLeftTheGroupSurvives) {
  std::string pid_file = dir_ / "escapee.pid";
  auto child = ChildProcess::Spawn(Spec({"escapee", pid_file, "exit", "0"}), Options());
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_TRUE((*child)->Wait()->success());
  pid_t escapee = ReadPidFile(pid_file);
  EXPECT_EQ(::getsid(escapee), escapee);
  EXPECT_FALSE(ProcessGone(escapee));
  ::kill(escapee, SIGKILL);
  EXPECT_TRUE(WaitUntil([&] { return ProcessGone(escapee); }));
}

TEST_P(ChildProcessTest, AMemoryLimitWithoutTheMemoryControllerIsRefused) {
  SpawnOptions options = Options();
  options.cgroup_parent = CgroupParent{dir_.path(), false, "no memory controller in this test"};
  options.cgroup_name = "tessera-worker-limited";
  ChildSpec spec = Spec({"exit", "0"});
  spec.memory_max_bytes = 1 << 30;
  auto child = ChildProcess::Spawn(spec, options);
  EXPECT_EQ(child.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(child.status().message(),
            "a memory limit cannot be enforced: no memory controller in this test");
  EXPECT_FALSE(FileExists(dir_ / "tessera-worker-limited"));
}

}  // namespace
}  // namespace tessera

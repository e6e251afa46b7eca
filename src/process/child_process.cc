#include "process/child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/ignore_status.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "process/file_util.h"
#include "process/launch_spec.h"
#include "process/launch_wire.h"
#include "process/launcher.h"
#include "process/launcher_pool.h"
#include "process/private_paths.h"

namespace tessera {
namespace {

constexpr char kDefaultPath[] = "/usr/local/bin:/usr/bin:/bin";

namespace wire = launch_wire;

// What the forked child reports through the error pipe when it cannot reach exec (a
// wire::LaunchStage, as a launcher reports it, and the errno).
struct ChildError {
  uint32_t stage;
  int err;
};
// A launcher found dead after it was taken (its spec unsent or unread) is replaced this often.
constexpr int kLaunchAttempts = 3;

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

bool HasNul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

absl::Status ValidateSpec(const ChildSpec& spec, const SpawnOptions& options) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return absl::InvalidArgumentError("child spec has no program (argv is empty)");
  }
  for (const std::string& arg : spec.argv) {
    if (HasNul(arg))
      return absl::InvalidArgumentError(absl::StrCat("argument ", Quote(arg), " holds a NUL byte"));
  }
  for (const auto& [key, value] : spec.env) {
    if (key.empty() || key.find('=') != std::string::npos || HasNul(key) || HasNul(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable name ", Quote(key), " is empty or holds '=' or NUL"));
    }
  }
  if (spec.memory_max_bytes.has_value() && !options.cgroup_parent.has_value()) {
    return absl::FailedPreconditionError(
        "a memory limit needs a cgroup, and no cgroup parent is usable on this host");
  }
  // With SIGCHLD ignored the kernel reaps children itself and their exit status is lost.
  struct sigaction chld;
  if (::sigaction(SIGCHLD, nullptr, &chld) == 0 &&
      (chld.sa_handler == SIG_IGN || (chld.sa_flags & SA_NOCLDWAIT) != 0)) {
    return absl::FailedPreconditionError(
        "SIGCHLD is ignored in this process, so a child's exit status would be lost; restore its "
        "default");
  }
  if (options.cgroup_parent.has_value() && options.cgroup_name.empty()) {
    return absl::InvalidArgumentError("a cgroup parent is given without a cgroup name");
  }
  return absl::OkStatus();
}

std::string ChildPath(const ChildSpec& spec) {
  auto it = spec.env.find("PATH");
  return it != spec.env.end() ? it->second : kDefaultPath;
}

absl::Status NoSuchProgramError(const ChildSpec& spec) {
  return absl::NotFoundError(absl::StrCat("cannot start ", Quote(spec.argv[0]),
                                          ": no executable of that name in PATH (", ChildPath(spec),
                                          ")"));
}

absl::Status LogFolderError(const std::string& path, const std::string& message) {
  return absl::PermissionDeniedError(
      absl::StrCat("cannot create folder ", std::filesystem::path(path).parent_path().string(),
                   " for log file ", path, ": ", message));
}

// The program to exec: argv[0] itself when it holds a '/', else the first executable match in
// the child's PATH. Resolved before the fork, so a miss is a clear error (a launcher resolves
// the same way, launcher_main.cc).
absl::StatusOr<std::string> ResolveProgram(const ChildSpec& spec) {
  const std::string& name = spec.argv[0];
  if (name.find('/') != std::string::npos) {
    if (name[0] != '/' && !spec.cwd.empty()) return absl::StrCat(spec.cwd, "/", name);
    return name;
  }
  const std::string path = ChildPath(spec);
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    // An empty entry means the current directory, which for the child is `cwd`.
    std::string base = dir.empty() ? "." : std::string(dir);
    if (base[0] != '/' && !spec.cwd.empty()) base = absl::StrCat(spec.cwd, "/", base);
    std::string candidate = absl::StrCat(base, "/", name);
    if (IsExecutableFile(candidate)) return candidate;
  }
  return NoSuchProgramError(spec);
}

// Moves `fd` above 2 so dup2 onto 0..2 in the child can never clobber another source.
absl::Status KeepAboveStdio(UniqueFd& fd) {
  if (fd.get() > 2) return absl::OkStatus();
  int moved = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, 3);
  if (moved < 0) return ErrnoStatus(errno, "cannot duplicate a file descriptor");
  fd.Reset(moved);
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> OpenOutput(const std::string& path) {
  if (path.empty()) {
    UniqueFd fd(::open("/dev/null", O_WRONLY | O_CLOEXEC));
    if (!fd.valid()) return ErrnoStatus(errno, "cannot open /dev/null");
    TESSERA_RETURN_IF_ERROR(KeepAboveStdio(fd));
    return fd;
  }
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    // A worker's output is its owner's alone: folders 0700 and files 0600, whatever the umask.
    if (absl::Status made = EnsurePrivateDirectory(parent.string()); !made.ok()) {
      return LogFolderError(path, std::string(made.message()));
    }
  }
  absl::StatusOr<UniqueFd> fd = OpenPrivateFileForAppend(path);
  if (!fd.ok()) {
    return absl::Status(fd.status().code(),
                        absl::StrCat("cannot open log file ", path, ": ", fd.status().message()));
  }
  TESSERA_RETURN_IF_ERROR(KeepAboveStdio(*fd));
  return *std::move(fd);
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// Only async-signal-safe calls from here until exec: the parent may have other threads, whose
// locks (malloc's included) were copied in whatever state they were.
[[noreturn]] void ReportAndExit(int error_fd, wire::LaunchStage stage, int err) {
  ChildError report{stage, err};
  ssize_t ignored = ::write(error_fd, &report, sizeof(report));
  (void)ignored;
  ::_exit(127);
}

void CloseFrom(int low, int high, int max_fd_fallback) {
  if (low > high) return;
  if (::syscall(SYS_close_range, static_cast<unsigned>(low), static_cast<unsigned>(high), 0u) == 0)
    return;
  for (int fd = low; fd <= std::min(high, max_fd_fallback); ++fd) ::close(fd);
}

[[noreturn]] void RunChild(const char* program, char* const* argv, char* const* envp,
                           const char* cwd, int stdin_fd, int stdout_fd, int stderr_fd,
                           int cgroup_procs_fd, int error_fd, int max_fd) {
  // Default dispositions and an empty mask: an ignored SIGPIPE or a blocked SIGTERM of the agent
  // must not be inherited through exec.
  struct sigaction default_action;
  ::memset(&default_action, 0, sizeof(default_action));
  default_action.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    ::sigaction(sig, &default_action, nullptr);
  }
  sigset_t empty;
  ::sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);

  ::setsid();
  if (cgroup_procs_fd >= 0) {
    if (::write(cgroup_procs_fd, "0", 1) != 1) ReportAndExit(error_fd, wire::kStageCgroup, errno);
  }
  if (cwd != nullptr && ::chdir(cwd) != 0) ReportAndExit(error_fd, wire::kStageChdir, errno);
  if (::dup2(stdin_fd, 0) < 0 || ::dup2(stdout_fd, 1) < 0 || ::dup2(stderr_fd, 2) < 0) {
    ReportAndExit(error_fd, wire::kStageStdio, errno);
  }
  // Everything but 0-2 and the error pipe (close-on-exec) goes.
  CloseFrom(3, error_fd - 1, max_fd);
  CloseFrom(error_fd + 1, ~0u >> 1, max_fd);
  ::execve(program, argv, envp);
  ReportAndExit(error_fd, wire::kStageExec, errno);
}

absl::StatusOr<int64_t> ReadHostOomKills(const std::string& vmstat_path) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(vmstat_path));
  return FindKeyedCounter(text, "oom_kill");
}

// The error for a child (forked or launched) that stopped at `stage` with `err`; `program` is
// what it tried to execute, `detail` what a launcher said.
absl::Status LaunchError(uint32_t stage, int err, const std::string& program,
                         std::string_view detail, const ChildSpec& spec) {
  switch (stage) {
    case wire::kStageSpec:
      return absl::InternalError(
          absl::StrCat("the worker launcher refused its launch spec: ", ToAbsl(detail)));
    case wire::kStageResolve: return NoSuchProgramError(spec);
    case wire::kStageStdoutFolder:
      return LogFolderError(spec.stdout_path,
                            std::error_code(err, std::generic_category()).message());
    case wire::kStageStderrFolder:
      return LogFolderError(spec.stderr_path,
                            std::error_code(err, std::generic_category()).message());
    case wire::kStageStdoutOpen:
      return ErrnoStatus(err, absl::StrCat("cannot open log file ", spec.stdout_path));
    case wire::kStageStderrOpen:
      return ErrnoStatus(err, absl::StrCat("cannot open log file ", spec.stderr_path));
    case wire::kStageStdin: return ErrnoStatus(err, "cannot open /dev/null");
    case wire::kStageCgroup: return ErrnoStatus(err, "cannot move the child into its cgroup");
    case wire::kStageChdir:
      return ErrnoStatus(err, absl::StrCat("cannot change the child's directory to ", spec.cwd));
    case wire::kStageStdio:
      return ErrnoStatus(err, "cannot set up the child's stdin/stdout/stderr");
    case wire::kStageExec: break;
    default:
      return absl::InternalError(absl::StrCat("the child failed before exec (stage ", stage, ", ",
                                              ErrnoStatus(err, "errno").message(), ")"));
  }
  absl::Status status = ErrnoStatus(err, absl::StrCat("cannot execute ", program));
  // A missing program is a caller's mistake, not a missing server-side entity.
  if (err == ENOENT || err == EACCES || err == ENOEXEC) {
    return absl::InvalidArgumentError(status.message());
  }
  return status;
}

// Writes `pid` into the cgroup's cgroup.procs.
absl::Status MoveIntoCgroup(const WorkerCgroup& cgroup, pid_t pid) {
  UniqueFd fd(::open(cgroup.procs_path().c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus(errno, absl::StrCat("cannot open ", cgroup.procs_path()));
  const std::string text = absl::StrCat(pid);
  ssize_t n;
  do {
    n = ::write(fd.get(), text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) return ErrnoStatus(errno, "cannot move the child into its cgroup");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(const ChildSpec& spec,
                                                                  const SpawnOptions& options) {
  TESSERA_RETURN_IF_ERROR(ValidateSpec(spec, options));
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->leftovers_ = options.leftovers;
  child->vmstat_path_ = options.vmstat_path;
  if (options.launcher_pool != nullptr) {
    TESSERA_RETURN_IF_ERROR(child->Prepare(spec, options));
    TESSERA_RETURN_IF_ERROR(child->Launch(spec, *options.launcher_pool));
  } else {
    TESSERA_RETURN_IF_ERROR(child->Fork(spec, options));
  }
  return child;
}

absl::Status ChildProcess::Prepare(const ChildSpec& spec, const SpawnOptions& options) {
  if (options.cgroup_parent.has_value()) {
    TESSERA_ASSIGN_OR_RETURN(
        cgroup_,
        WorkerCgroup::Create(*options.cgroup_parent, options.cgroup_name, spec.memory_max_bytes));
  }
  if (cgroup_ == nullptr || !cgroup_->has_memory()) {
    if (absl::StatusOr<int64_t> count = ReadHostOomKills(options.vmstat_path); count.ok()) {
      host_oom_kills_at_start_ = *count;
    }
  }
  return absl::OkStatus();
}

absl::Status ChildProcess::Launch(const ChildSpec& spec, LauncherPool& pool) {
  const std::string bytes = EncodeLaunchSpec(LaunchSpecFromChild(spec));
  absl::Status gone;
  for (int attempt = 0; attempt < kLaunchAttempts; ++attempt) {
    TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<Launcher> launcher, pool.Take());
    // Into the cgroup before the spec goes out: the worker never runs outside it.
    if (cgroup_ != nullptr) {
      absl::Status moved = MoveIntoCgroup(*cgroup_, launcher->pid());
      if (!moved.ok()) {
        if (!launcher->HasExited()) return moved;
        gone = moved;
        continue;
      }
    }
    // A launcher that died after it was taken has exec'd nothing: another one does the work.
    if (absl::Status sent = launcher->Send(bytes); !sent.ok()) {
      gone = sent;
      continue;
    }
    absl::StatusOr<std::string> outcome = launcher->ReadOutcome();
    if (!outcome.ok()) {
      if (!absl::IsUnavailable(outcome.status())) return outcome.status();
      gone = outcome.status();
      continue;
    }
    if (outcome->empty()) {  // exec'd: the launcher is the child now
      pid_ = launcher->pid();
      pidfd_ = launcher->Adopt();
      return absl::OkStatus();
    }
    launcher->Reap();
    {
      absl::MutexLock lock(&mu_);
      reaped_ = true;
    }
    wire::Report report;
    char error[128];
    if (!wire::ParseReport(reinterpret_cast<const unsigned char*>(outcome->data()), outcome->size(),
                           &report, error, sizeof(error))) {
      return absl::InternalError(error);
    }
    const std::string detail(report.detail, report.detail_size);
    return LaunchError(report.stage, static_cast<int>(report.err), detail, detail, spec);
  }
  return absl::UnavailableError(
      absl::StrCat("no worker launcher lived long enough to start the child (", kLaunchAttempts,
                   " tries; last: ", gone.message(), ")"));
}

absl::Status ChildProcess::Fork(const ChildSpec& spec, const SpawnOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(std::string program, ResolveProgram(spec));

  const std::string stdin_path = spec.stdin_path.empty() ? "/dev/null" : spec.stdin_path;
  UniqueFd stdin_fd(::open(stdin_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!stdin_fd.valid()) return ErrnoStatus(errno, absl::StrCat("cannot open ", stdin_path));
  TESSERA_RETURN_IF_ERROR(KeepAboveStdio(stdin_fd));
  TESSERA_ASSIGN_OR_RETURN(UniqueFd stdout_fd, OpenOutput(spec.stdout_path));
  TESSERA_ASSIGN_OR_RETURN(UniqueFd stderr_fd, OpenOutput(spec.stderr_path));

  TESSERA_RETURN_IF_ERROR(Prepare(spec, options));
  UniqueFd cgroup_procs_fd;
  if (cgroup_ != nullptr) {
    cgroup_procs_fd.Reset(::open(cgroup_->procs_path().c_str(), O_WRONLY | O_CLOEXEC));
    if (!cgroup_procs_fd.valid()) {
      return ErrnoStatus(errno, absl::StrCat("cannot open ", cgroup_->procs_path()));
    }
    TESSERA_RETURN_IF_ERROR(KeepAboveStdio(cgroup_procs_fd));
  }

  // Everything the child needs is built now: it may not allocate after fork.
  std::vector<std::string> argv_strings = spec.argv;
  std::vector<std::string> env_strings;
  env_strings.reserve(spec.env.size());
  for (const auto& [key, value] : spec.env) env_strings.push_back(absl::StrCat(key, "=", value));
  std::vector<char*> argv = CStrings(argv_strings);
  std::vector<char*> envp = CStrings(env_strings);
  const char* cwd = spec.cwd.empty() ? nullptr : spec.cwd.c_str();
  struct rlimit limit;
  int max_fd = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY
                   ? static_cast<int>(std::min<rlim_t>(limit.rlim_cur, 1 << 20))
                   : 65536;

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return ErrnoStatus(errno, "cannot create a pipe");
  UniqueFd error_read(pipe_fds[0]);
  UniqueFd error_write(pipe_fds[1]);
  TESSERA_RETURN_IF_ERROR(KeepAboveStdio(error_write));

  // No signal handler of the parent may run in the child before it resets them.
  sigset_t all, previous;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &previous);
  pid_t pid = ::fork();
  if (pid == 0) {
    RunChild(program.c_str(), argv.data(), envp.data(), cwd, stdin_fd.get(), stdout_fd.get(),
             stderr_fd.get(), cgroup_procs_fd.get(), error_write.get(), max_fd);
  }
  int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (pid < 0) return ErrnoStatus(fork_errno, "cannot fork");
  error_write.Reset();

  ChildError error{0, 0};
  ssize_t n;
  do {
    n = ::read(error_read.get(), &error, sizeof(error));
  } while (n < 0 && errno == EINTR);
  if (n != 0) {
    // The child never reached exec: reap it here and report why.
    int wait_status = 0;
    while (::waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
    }
    {
      absl::MutexLock lock(&mu_);
      reaped_ = true;
    }
    if (n != static_cast<ssize_t>(sizeof(error)))
      return absl::InternalError("the child failed before exec");
    return LaunchError(error.stage, error.err, program, "", spec);
  }

  pid_ = pid;
  pidfd_.Reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (pidfd_.valid()) ::fcntl(pidfd_.get(), F_SETFD, FD_CLOEXEC);
  return absl::OkStatus();
}

ChildProcess::~ChildProcess() {
  bool reaped;
  {
    absl::MutexLock lock(&mu_);
    reaped = reaped_;
  }
  if (!reaped && pid_ > 0) {
    IgnoreStatus(Signal(SIGKILL), "a child reaped meanwhile needs no kill");
    IgnoreStatus(Wait(), "reaps it; a destructor has no one to tell how it ended");
  }
}

std::string ChildProcess::cgroup_dir() const { return cgroup_ ? cgroup_->dir() : ""; }

absl::Status ChildProcess::Signal(int signal) {
  absl::MutexLock lock(&mu_);
  if (reaped_)
    return absl::FailedPreconditionError(absl::StrCat("process ", pid_, " has already exited"));
  // Until reaped, the leader (perhaps a zombie) holds the group id, so -pid_ is still ours.
  if (::kill(-pid_, signal) != 0 && errno != ESRCH) {
    return ErrnoStatus(
        errno, absl::StrCat("cannot send ", SignalName(signal), " to process group ", pid_));
  }
  if (signal == SIGKILL) {
    sent_sigkill_ = true;
    if (cgroup_) {
      IgnoreStatus(cgroup_->KillAll(),
                   "the group has its SIGKILL; cgroup.kill only reaches further");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ExitStatus> ChildProcess::Finish(int child_code, int child_status) {
  ExitStatus status = ExitStatusFromSiginfo(child_code, child_status);
  bool we_sent_sigkill;
  {
    absl::MutexLock lock(&mu_);
    if (leftovers_ == Leftovers::kKill) {
      // The zombie leader keeps the group id reserved, so this reaches only its own group.
      ::kill(-pid_, SIGKILL);
      if (cgroup_) {
        IgnoreStatus(cgroup_->KillAll(),
                     "the group has its SIGKILL; cgroup.kill only reaches further");
      }
    }
    siginfo_t info;
    int rc;
    do {
      rc = ::waitid(P_PID, pid_, &info, WEXITED);
    } while (rc < 0 && errno == EINTR);
    reaped_ = true;
    we_sent_sigkill = sent_sigkill_;
  }
  if (cgroup_ != nullptr && cgroup_->has_memory()) {
    if (absl::StatusOr<int64_t> kills = cgroup_->OomKills(); kills.ok() && *kills > 0) {
      MarkOutOfMemory(OomEvidence::kCgroup, status);
    }
  } else if (status.signal == SIGKILL && !we_sent_sigkill && host_oom_kills_at_start_.has_value()) {
    if (absl::StatusOr<int64_t> kills = ReadHostOomKills(vmstat_path_);
        kills.ok() && *kills > *host_oom_kills_at_start_) {
      MarkOutOfMemory(OomEvidence::kHostCounter, status);
    }
  }
  if (cgroup_ != nullptr) {
    IgnoreStatus(cgroup_->Remove(absl::Seconds(2)),
                 "the cgroup's destructor tries again, and a new one of its name empties it");
  }
  exit_ = status;
  return status;
}

absl::StatusOr<std::optional<ExitStatus>> ChildProcess::TryWait() {
  if (exit_.has_value()) return exit_;
  siginfo_t info;
  ::memset(&info, 0, sizeof(info));
  // WNOWAIT: look without reaping, so leftovers can be killed while the group id is still ours.
  if (::waitid(P_PID, pid_, &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot wait for process ", pid_));
  }
  if (info.si_pid == 0) return std::optional<ExitStatus>();
  TESSERA_ASSIGN_OR_RETURN(ExitStatus status, Finish(info.si_code, info.si_status));
  return std::optional<ExitStatus>(status);
}

absl::StatusOr<bool> ChildProcess::HasExited() {
  if (exit_.has_value()) return true;
  return WaitForExit(absl::ZeroDuration());
}

absl::StatusOr<ExitStatus> ChildProcess::Wait() {
  if (exit_.has_value()) return *exit_;
  siginfo_t info;
  ::memset(&info, 0, sizeof(info));
  int rc;
  do {
    rc = ::waitid(P_PID, pid_, &info, WEXITED | WNOWAIT);
  } while (rc < 0 && errno == EINTR);
  if (rc != 0) return ErrnoStatus(errno, absl::StrCat("cannot wait for process ", pid_));
  return Finish(info.si_code, info.si_status);
}

absl::StatusOr<bool> ChildProcess::WaitForExit(absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  if (pidfd_.valid()) {
    while (true) {
      absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
      int64_t ms = absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1)));
      struct pollfd pfd = {pidfd_.get(), POLLIN, 0};
      int rc = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(ms, 1 << 30)));
      if (rc > 0) return true;
      if (rc == 0) return false;
      if (errno != EINTR) return ErrnoStatus(errno, "cannot poll a pidfd");
    }
  }
  // No pidfd (Linux before 5.3): look with short, growing pauses.
  absl::Duration pause = absl::Microseconds(500);
  while (true) {
    siginfo_t info;
    ::memset(&info, 0, sizeof(info));
    if (::waitid(P_PID, pid_, &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      return ErrnoStatus(errno, absl::StrCat("cannot wait for process ", pid_));
    }
    if (info.si_pid != 0) return true;
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    std::this_thread::sleep_for(absl::ToChronoNanoseconds(std::min(pause, left)));
    pause = std::min(pause * 2, absl::Milliseconds(50));
  }
}

absl::StatusOr<ExitStatus> ChildProcess::Terminate(absl::Duration grace) {
  if (exit_.has_value()) return *exit_;
  TESSERA_RETURN_IF_ERROR(Signal(SIGTERM));
  TESSERA_ASSIGN_OR_RETURN(bool exited, WaitForExit(grace));
  if (!exited) TESSERA_RETURN_IF_ERROR(Signal(SIGKILL));
  return Wait();
}

}  // namespace tessera

#include "cli/daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "process/private_paths.h"
#include "process/unique_fd.h"

extern char** environ;

namespace tessera::cli {
namespace {

std::string DescribeWaitStatus(int wstatus) {
  if (WIFEXITED(wstatus)) return absl::StrCat("exit code ", WEXITSTATUS(wstatus));
  if (WIFSIGNALED(wstatus)) {
    const int sig = WTERMSIG(wstatus);
    const char* name = sigabbrev_np(sig);
    return absl::StrCat("killed by signal ", sig,
                        name == nullptr ? "" : absl::StrCat(" (SIG", name, ")"));
  }
  return "stopped";
}

}  // namespace

std::string SelfExecutable() {
  std::error_code ec;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("tessera") : path.string();
}

absl::StatusOr<int> SpawnDaemon(const std::vector<std::string>& argv, const std::string& log_file) {
  if (argv.empty()) return absl::InvalidArgumentError("no command to start");
  TESSERA_RETURN_IF_ERROR(
      EnsurePrivateDirectory(std::filesystem::path(log_file).parent_path().string()));
  // Opened here, 0600 whatever the umask; the child gets it as its stdout and stderr.
  TESSERA_ASSIGN_OR_RETURN(UniqueFd log, OpenPrivateFileForAppend(log_file));
  std::vector<std::string> args_copy = argv;
  std::vector<char*> args;
  for (std::string& a : args_copy) args.push_back(a.data());
  args.push_back(nullptr);
  // posix_spawn, not fork: this process may already run gRPC threads, and posix_spawn runs no
  // fork handlers and touches no locks in the child.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, log.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own session: no controlling terminal, and Ctrl-C in the shell that started it does not
  // reach it. Signals blocked or ignored here do not carry over.
  sigset_t none;
  sigemptyset(&none);
  sigset_t defaults;
  sigfillset(&defaults);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("cannot start ", argv[0], ": ", std::strerror(rc)));
  }
  return static_cast<int>(pid);
}

std::string LogTail(const std::string& path, int lines) {
  std::ifstream in(path);
  std::deque<std::string> last;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    last.push_back(line);
    if (static_cast<int>(last.size()) > lines) last.pop_front();
  }
  return absl::StrJoin(last, " | ");
}

absl::Status WaitReady(int pid, const std::string& what, const std::string& log_file,
                       absl::Duration timeout, const std::function<absl::Status()>& ready) {
  const absl::Time until = absl::Now() + timeout;
  absl::Duration poll = absl::Milliseconds(10);
  absl::Status last = absl::OkStatus();
  while (true) {
    last = ready();
    if (last.ok()) return last;
    int wstatus = 0;
    const pid_t done = waitpid(pid, &wstatus, WNOHANG);
    if (done == pid) {
      const std::string tail = LogTail(log_file, 3);
      return absl::FailedPreconditionError(
          absl::StrCat(what, " exited before it was ready (", DescribeWaitStatus(wstatus), "); ",
                       tail.empty() ? "no log output" : tail, " (log: ", log_file, ")"));
    }
    if (absl::Now() >= until) {
      return absl::DeadlineExceededError(absl::StrCat(what, " (pid ", pid, ") was not ready after ",
                                                      absl::FormatDuration(timeout), ": ",
                                                      last.message(), " (log: ", log_file, ")"));
    }
    absl::SleepFor(poll);
    poll = std::min(poll * 2, absl::Milliseconds(200));
  }
}

}  // namespace tessera::cli

#include "process/launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "process/file_util.h"
#include "process/launch_wire.h"

namespace tessera {
namespace {

// posix_spawn's attributes and file actions, destroyed on every path.
class SpawnSetup {
 public:
  SpawnSetup() {
    posix_spawnattr_init(&attr_);
    posix_spawn_file_actions_init(&actions_);
  }
  ~SpawnSetup() {
    posix_spawnattr_destroy(&attr_);
    posix_spawn_file_actions_destroy(&actions_);
  }
  posix_spawnattr_t* attr() { return &attr_; }
  posix_spawn_file_actions_t* actions() { return &actions_; }

 private:
  posix_spawnattr_t attr_;
  posix_spawn_file_actions_t actions_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Launcher>> Launcher::Start(const std::string& path,
                                                          const std::string& log_dir) {
  int sockets[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) {
    return ErrnoStatus(errno, "cannot create a socket pair for a worker launcher");
  }
  UniqueFd mine(sockets[0]);
  UniqueFd theirs(sockets[1]);

  SpawnSetup setup;
  // Default dispositions and an empty mask: an ignored SIGPIPE or the agent's blocked SIGTERM
  // must not reach the worker through exec. Its own session: its pid is the worker's group.
  sigset_t all, none;
  ::sigfillset(&all);
  ::sigemptyset(&none);
  posix_spawnattr_setsigdefault(setup.attr(), &all);
  posix_spawnattr_setsigmask(setup.attr(), &none);
  posix_spawnattr_setflags(setup.attr(),
                           POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSID);
  // The channel first (dup2 onto itself clears close-on-exec), then /dev/null over 0-2, so a
  // channel that happened to be 0-2 here is copied before it is covered.
  posix_spawn_file_actions_adddup2(setup.actions(), theirs.get(), launch_wire::kLauncherChannelFd);
  posix_spawn_file_actions_addopen(setup.actions(), 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(setup.actions(), 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(setup.actions(), 2, "/dev/null", O_WRONLY, 0);

  std::string arg0 = path, flag = "--log-dir", dir = log_dir;
  char* argv[] = {arg0.data(), log_dir.empty() ? nullptr : flag.data(), dir.data(), nullptr};
  char* envp[] = {nullptr};
  pid_t pid = -1;
  int error = ::posix_spawn(&pid, path.c_str(), setup.actions(), setup.attr(), argv, envp);
  if (error != 0)
    return ErrnoStatus(error, absl::StrCat("cannot start the worker launcher ", path));

  std::unique_ptr<Launcher> launcher(new Launcher());
  launcher->pid_ = pid;
  launcher->channel_ = std::move(mine);
  // Our child, not reaped: the pid cannot have been reused. pidfds are close-on-exec.
  launcher->pidfd_.Reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  return launcher;
}

Launcher::~Launcher() {
  if (owned_) {
    channel_.Reset();  // an idle launcher exits on its own at EOF; the kill makes it certain
    ::kill(pid_, SIGKILL);
    Reap();
  }
  Released();
}

void Launcher::Released() {
  if (on_release_) std::exchange(on_release_, nullptr)();
}

bool Launcher::HasExited() const {
  if (!owned_) return true;
  if (pidfd_.valid()) {
    struct pollfd pfd = {pidfd_.get(), POLLIN, 0};
    return ::poll(&pfd, 1, 0) > 0;
  }
  siginfo_t info = {};
  return ::waitid(P_PID, pid_, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid != 0;
}

absl::Status Launcher::Send(std::string_view spec) {
  const char* at = spec.data();
  size_t left = spec.size();
  while (left > 0) {
    // A socket, so a launcher that died gives EPIPE here rather than a SIGPIPE to the agent.
    ssize_t n = ::send(channel_.get(), at, left, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::UnavailableError(absl::StrCat(
          "worker launcher ", pid_, " is gone: ", ErrnoStatus(errno, "send").message()));
    }
    at += n;
    left -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Launcher::ReadOutcome() {
  std::string report;
  char buffer[4096];
  while (true) {
    ssize_t n = ::read(channel_.get(), buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    // A reset: the launcher exited with part of the spec unread, so it never exec'd: after
    // its report (it refused the spec's header), or killed.
    if (n < 0 && errno == ECONNRESET) {
      if (!report.empty()) return report;
      return absl::UnavailableError(absl::StrCat("worker launcher ", pid_, " died before exec"));
    }
    if (n < 0) return ErrnoStatus(errno, absl::StrCat("cannot read from worker launcher ", pid_));
    if (n == 0) return report;
    report.append(buffer, static_cast<size_t>(n));
    if (report.size() > launch_wire::kReportHeaderBytes + launch_wire::kMaxDetailBytes) {
      return absl::InternalError(
          absl::StrCat("worker launcher ", pid_, " sent an oversized report"));
    }
  }
}

UniqueFd Launcher::Adopt() {
  owned_ = false;
  channel_.Reset();
  Released();
  return std::move(pidfd_);
}

void Launcher::Reap() {
  if (!owned_) return;
  owned_ = false;
  channel_.Reset();
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  Released();
}

}  // namespace tessera

#include "process/process_supervisor.h"

#include <errno.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/ignore_status.h"
#include "base/status_macros.h"
#include "process/file_util.h"
#include "process/wakeable_epoll.h"

namespace tessera {
namespace {

constexpr uint64_t kWakeKey = 0;
// How often children without a pidfd are looked at.
constexpr absl::Duration kPollTick = absl::Milliseconds(20);

}  // namespace

absl::StatusOr<std::unique_ptr<ProcessSupervisor>> ProcessSupervisor::Create(
    SupervisorOptions options) {
  auto loop = CreateWakeableEpoll(kWakeKey);
  if (!loop.ok()) return loop.status();
  std::unique_ptr<ProcessSupervisor> supervisor(
      new ProcessSupervisor(std::move(options), std::move(loop->epoll), std::move(loop->wake)));
  supervisor->reaper_ = std::thread([raw = supervisor.get()] { raw->ReaperLoop(); });
  return supervisor;
}

ProcessSupervisor::ProcessSupervisor(SupervisorOptions options, UniqueFd epoll_fd, UniqueFd wake_fd)
    : options_(std::move(options)), epoll_fd_(std::move(epoll_fd)), wake_fd_(std::move(wake_fd)) {}

ProcessSupervisor::~ProcessSupervisor() { Shutdown(absl::Seconds(2)); }

void ProcessSupervisor::Wake() { WakeEventFd(wake_fd_.get()); }

absl::StatusOr<pid_t> ProcessSupervisor::Start(const ChildId& id, const ChildSpec& spec,
                                               ExitCallback on_exit) {
  SpawnOptions spawn;
  spawn.cgroup_parent = options_.cgroup_parent;
  spawn.leftovers = options_.leftovers;
  spawn.vmstat_path = options_.vmstat_path;
  spawn.launcher_pool = options_.launcher_pool;
  if (spawn.cgroup_parent.has_value()) {
    TESSERA_ASSIGN_OR_RETURN(spawn.cgroup_name, WorkerCgroupName(id.value()));
  }
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::FailedPreconditionError("the process supervisor is shutting down");
    if (by_id_.contains(id) || starting_.contains(id)) {
      return absl::AlreadyExistsError(
          absl::StrCat("a child named ", id.value(), " is already supervised"));
    }
    // The id is reserved while the child starts without the lock: a start waits for the exec
    // (the fork's, or a launcher's), and other starts, signals and exit reports need not wait.
    starting_.insert(id);
  }
  absl::StatusOr<std::unique_ptr<ChildProcess>> spawned = ChildProcess::Spawn(spec, spawn);
  absl::MutexLock lock(&mu_);
  starting_.erase(id);
  if (stopping_) Wake();  // the reaper may be waiting for the last start to end
  if (!spawned.ok()) return spawned.status();
  std::unique_ptr<ChildProcess> process = *std::move(spawned);
  uint64_t serial = next_serial_++;
  pid_t pid = process->pid();
  if (process->pidfd() >= 0) {
    struct epoll_event event = {};
    event.events = EPOLLIN;
    event.data.u64 = serial;
    if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, process->pidfd(), &event) != 0) {
      return ErrnoStatus(errno, "cannot watch the child's pidfd");  // the child dies with `process`
    }
  }
  bool polled = process->pidfd() < 0;
  std::optional<absl::Time> kill_at;
  if (stopping_) {
    // Shutdown began while this child started: it goes the way the others went.
    IgnoreStatus(process->Signal(SIGTERM),
                 "FailedPrecondition only for a child reaped already: nothing is left to stop");
    kill_at = shutdown_kill_at_;
  }
  entries_.emplace(serial, Entry{id, std::move(process), std::move(on_exit), kill_at, false});
  by_id_.emplace(id, serial);
  if (polled || kill_at.has_value()) Wake();  // the reaper must start its poll tick or deadline
  return pid;
}

absl::Status ProcessSupervisor::Signal(const ChildId& id, int signal) {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return absl::NotFoundError(absl::StrCat("no child named ", id.value()));
  return entries_.at(it->second).process->Signal(signal);
}

absl::Status ProcessSupervisor::Terminate(const ChildId& id, absl::Duration grace) {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return absl::NotFoundError(absl::StrCat("no child named ", id.value()));
  Entry& entry = entries_.at(it->second);
  if (entry.exited) return absl::OkStatus();
  TESSERA_RETURN_IF_ERROR(entry.process->Signal(SIGTERM));
  absl::Time kill_at = absl::Now() + grace;
  if (!entry.kill_at.has_value() || kill_at < *entry.kill_at) entry.kill_at = kill_at;
  Wake();
  return absl::OkStatus();
}

std::optional<pid_t> ProcessSupervisor::Pid(const ChildId& id) const {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return std::nullopt;
  return entries_.at(it->second).process->pid();
}

std::vector<ChildId> ProcessSupervisor::Children() const {
  absl::MutexLock lock(&mu_);
  std::vector<ChildId> ids;
  ids.reserve(by_id_.size());
  for (const auto& [id, serial] : by_id_) ids.push_back(id);
  return ids;
}

void ProcessSupervisor::Shutdown(absl::Duration grace) {
  absl::MutexLock shutdown_lock(&shutdown_mu_);
  if (joined_) return;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    absl::Time kill_at = absl::Now() + grace;
    shutdown_kill_at_ = kill_at;
    for (auto& [serial, entry] : entries_) {
      if (entry.exited) continue;
      IgnoreStatus(entry.process->Signal(SIGTERM),
                   "FailedPrecondition only for a child reaped already: nothing is left to stop");
      if (!entry.kill_at.has_value() || kill_at < *entry.kill_at) entry.kill_at = kill_at;
    }
  }
  Wake();
  reaper_.join();
  joined_ = true;
}

int ProcessSupervisor::NextTimeoutMs() const {
  std::optional<absl::Duration> wait;
  absl::Time now = absl::Now();
  for (const auto& [serial, entry] : entries_) {
    if (entry.exited) continue;
    if (entry.kill_at.has_value()) {
      absl::Duration left = std::max(*entry.kill_at - now, absl::ZeroDuration());
      wait = wait.has_value() ? std::min(*wait, left) : left;
    }
    if (entry.process->pidfd() < 0)
      wait = wait.has_value() ? std::min(*wait, kPollTick) : kPollTick;
  }
  if (!wait.has_value()) return -1;
  return static_cast<int>(std::min<int64_t>(
      absl::ToInt64Milliseconds(absl::Ceil(*wait, absl::Milliseconds(1))), 1 << 30));
}

void ProcessSupervisor::ReaperLoop() {
  struct epoll_event events[64];
  while (true) {
    int timeout_ms;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_ && entries_.empty() && starting_.empty()) return;
      timeout_ms = NextTimeoutMs();
    }
    int n = ::epoll_wait(epoll_fd_.get(), events, 64, timeout_ms);
    if (n < 0 && errno != EINTR) {
      // epoll itself failing is an impossible state for a valid epoll fd.
      ::abort();
    }
    std::vector<uint64_t> ready;
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == kWakeKey) {
        DrainEventFd(wake_fd_.get());
      } else {
        ready.push_back(events[i].data.u64);
      }
    }

    std::vector<std::pair<uint64_t, ChildProcess*>> exited;
    {
      absl::MutexLock lock(&mu_);
      absl::Time now = absl::Now();
      for (uint64_t serial : ready) {
        auto it = entries_.find(serial);
        if (it == entries_.end() || it->second.exited) continue;
        ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, it->second.process->pidfd(), nullptr);
        it->second.exited = true;
        exited.emplace_back(serial, it->second.process.get());
      }
      for (auto& [serial, entry] : entries_) {
        if (entry.exited) continue;
        if (entry.process->pidfd() < 0) {
          absl::StatusOr<bool> done = entry.process->HasExited();
          if (!done.ok() || *done) {
            entry.exited = true;
            exited.emplace_back(serial, entry.process.get());
            continue;
          }
        }
        if (entry.kill_at.has_value() && *entry.kill_at <= now) {
          IgnoreStatus(
              entry.process->Signal(SIGKILL),
              "FailedPrecondition only for a child reaped already: nothing is left to stop");
          entry.kill_at.reset();
        }
      }
    }

    for (auto& [serial, process] : exited) {
      // Reaping (and removing a cgroup) happens without the lock; the entry stays listed, marked
      // exited, so its id cannot be reused until it is reported.
      absl::StatusOr<ExitStatus> status = process->Wait();
      ExitStatus report;
      if (status.ok()) {
        report = *status;
      } else {
        report.reason = absl::StrCat("exit status unknown: ", status.status().message());
      }
      Entry entry;
      {
        absl::MutexLock lock(&mu_);
        auto it = entries_.find(serial);
        entry = std::move(it->second);
        entries_.erase(it);
        by_id_.erase(entry.id);
      }
      if (entry.on_exit) entry.on_exit(entry.id, report);
    }
  }
}

}  // namespace tessera

#include "process/launcher_pool.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "base/log_line.h"
#include "process/file_util.h"
#include "process/wakeable_epoll.h"

namespace tessera {
namespace {

constexpr uint64_t kWakeKey = 0;

void WakeFd(const UniqueFd& fd) { WakeEventFd(fd.get()); }

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LauncherPool>> LauncherPool::Create(LauncherPoolOptions options) {
  if (options.idle_launchers < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("idle launcher count ", options.idle_launchers, " is negative"));
  }
  if (!IsExecutableFile(options.launcher_path)) {
    return absl::NotFoundError(
        absl::StrCat("no worker launcher at ", options.launcher_path, " (not an executable file)"));
  }
  auto loop = CreateWakeableEpoll(kWakeKey);
  if (!loop.ok()) return loop.status();
  std::unique_ptr<LauncherPool> pool(
      new LauncherPool(std::move(options), std::move(loop->epoll), std::move(loop->wake)));
  pool->refill_ = std::thread([raw = pool.get()] { raw->RefillLoop(); });
  pool->cold_ = std::thread([raw = pool.get()] { raw->ColdLoop(); });
  return pool;
}

LauncherPool::LauncherPool(LauncherPoolOptions options, UniqueFd epoll_fd, UniqueFd wake_fd)
    : options_(std::move(options)),
      epoll_fd_(std::move(epoll_fd)),
      wake_fd_(std::make_shared<const UniqueFd>(std::move(wake_fd))) {}

LauncherPool::~LauncherPool() { Shutdown(); }

void LauncherPool::Wake() { WakeFd(*wake_fd_); }

absl::StatusOr<std::unique_ptr<Launcher>> LauncherPool::Take() {
  std::unique_ptr<Launcher> taken;
  std::vector<std::unique_ptr<Launcher>> dead;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::FailedPreconditionError("the worker launcher pool is shut down");
    while (!idle_.empty() && taken == nullptr) {
      Idle idle = std::move(idle_.front());
      idle_.pop_front();
      if (idle.launcher->pidfd() >= 0) {
        ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, idle.launcher->pidfd(), nullptr);
      }
      // The refill thread may not have seen this death yet.
      if (idle.launcher->HasExited()) {
        ++stats_.died_idle;
        dead.push_back(std::move(idle.launcher));
      } else {
        taken = std::move(idle.launcher);
      }
    }
    if (taken != nullptr) ++stats_.taken;
    refill_failed_ = false;
  }
  if (!dead.empty()) {
    dead.clear();  // kills (already dead) and reaps, without the lock
    Wake();        // their replacements
  }
  if (taken == nullptr) {
    absl::StatusOr<std::unique_ptr<Launcher>> started = StartOnPoolThread();
    if (!started.ok()) {
      Wake();  // the refill thread may have better luck
      return started.status();
    }
    absl::MutexLock lock(&mu_);
    ++stats_.started;
    ++stats_.taken;
    ++stats_.taken_cold;
    taken = *std::move(started);
  }
  taken->OnRelease([wake = wake_fd_] { WakeFd(*wake); });
  return taken;
}

absl::StatusOr<std::unique_ptr<Launcher>> LauncherPool::StartOnPoolThread() {
  absl::StatusOr<std::unique_ptr<Launcher>> started =
      absl::FailedPreconditionError("the worker launcher pool is shut down");
  bool done = false;
  absl::Mutex done_mu;
  {
    absl::MutexLock lock(&cold_mu_);
    if (cold_stopping_) return started;
    cold_jobs_.push_back([&] {
      auto result = Launcher::Start(options_.launcher_path, options_.log_dir);
      absl::MutexLock done_lock(&done_mu);
      started = std::move(result);
      done = true;
    });
  }
  absl::MutexLock done_lock(&done_mu);
  done_mu.Await(absl::Condition(&done));
  return started;
}

void LauncherPool::ColdLoop() {
  while (true) {
    std::function<void()> job;
    {
      absl::MutexLock lock(&cold_mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(cold_mu_) {
        return cold_stopping_ || !cold_jobs_.empty();
      };
      cold_mu_.Await(absl::Condition(&ready));
      if (cold_jobs_.empty()) return;  // stopping, and every waiting caller served
      job = std::move(cold_jobs_.front());
      cold_jobs_.pop_front();
    }
    job();
  }
}

void LauncherPool::DropDead(uint64_t serial, std::vector<std::unique_ptr<Launcher>>& dead) {
  for (auto it = idle_.begin(); it != idle_.end(); ++it) {
    if (it->serial != serial) continue;
    if (!it->launcher->HasExited()) return;  // a stale event
    if (it->launcher->pidfd() >= 0) {
      ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, it->launcher->pidfd(), nullptr);
    }
    ++stats_.died_idle;
    dead.push_back(std::move(it->launcher));
    idle_.erase(it);
    return;
  }
}

void LauncherPool::RefillLoop() {
  struct epoll_event events[16];
  while (true) {
    bool start = false;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      start = !refill_failed_ && static_cast<int>(idle_.size()) < options_.idle_launchers;
    }
    if (start) {
      absl::StatusOr<std::unique_ptr<Launcher>> started =
          Launcher::Start(options_.launcher_path, options_.log_dir);
      absl::MutexLock lock(&mu_);
      if (!started.ok()) {
        ++stats_.refill_failures;
        refill_failed_ = true;
        LogLine(absl::StrCat("worker launcher pool: ", started.status().message()));
        continue;
      }
      ++stats_.started;
      if (stopping_) continue;  // destroyed (killed, reaped) at the end of this scope
      const uint64_t serial = next_serial_++;
      if ((*started)->pidfd() >= 0) {
        struct epoll_event event = {};
        event.events = EPOLLIN;
        event.data.u64 = serial;
        ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, (*started)->pidfd(), &event);
      }
      idle_.push_back(Idle{serial, *std::move(started)});
      continue;
    }
    int n = ::epoll_wait(epoll_fd_.get(), events, 16, -1);
    if (n < 0 && errno != EINTR) ::abort();  // impossible for a valid epoll fd
    std::vector<std::unique_ptr<Launcher>> dead;
    {
      absl::MutexLock lock(&mu_);
      for (int i = 0; i < n; ++i) {
        if (events[i].data.u64 == kWakeKey) {
          DrainEventFd(wake_fd_->get());
        } else {
          DropDead(events[i].data.u64, dead);
        }
      }
    }
    // `dead` is reaped here, without the lock.
  }
}

void LauncherPool::Shutdown() {
  absl::MutexLock shutdown_lock(&shutdown_mu_);
  if (joined_) return;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  Wake();
  refill_.join();
  {
    absl::MutexLock lock(&cold_mu_);
    cold_stopping_ = true;
  }
  cold_.join();
  joined_ = true;
  std::deque<Idle> idle;
  {
    absl::MutexLock lock(&mu_);
    idle.swap(idle_);
  }
  idle.clear();  // each launcher killed and reaped
}

std::vector<pid_t> LauncherPool::IdlePids() const {
  absl::MutexLock lock(&mu_);
  std::vector<pid_t> pids;
  for (const Idle& idle : idle_) pids.push_back(idle.launcher->pid());
  return pids;
}

LauncherPoolStats LauncherPool::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace tessera

// LauncherPool: keeps a few tessera-launcher processes started ahead of time, so starting a
// worker costs sending it a spec instead of forking the (large, multi-threaded) node agent.
//
// A background refill thread keeps `idle_launchers` ready: it starts them with posix_spawn and
// watches each idle one's pidfd, so a launcher that dies while idle (killed by hand, OOM) is
// reaped, dropped and replaced. Take() hands out the oldest idle launcher, or starts one at once
// when none is ready; the refill thread starts the next one behind it once the taken launcher is
// done with (adopted as a worker, or dropped), so starting it never competes with the launch for
// the CPU (on 2 cores it did: a lease took twice as long). Every launcher is started from one of
// the pool's own threads, never the caller's: a launcher (and the worker it becomes) is
// SIGKILLed when the thread that started it exits (PR_SET_PDEATHSIG, so a worker does not
// outlive its agent), and a caller's thread (a gRPC handler's) may exit long before. Shutdown()
// stops the thread, kills every idle launcher and reaps it: no zombie is left. Launchers already
// taken belong to their takers.
//
// Thread-safe: every method may be called from any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "process/launcher.h"
#include "process/unique_fd.h"

namespace tessera {

struct LauncherPoolOptions {
  // The tessera-launcher binary.
  std::string launcher_path;
  // How many launchers are kept started and waiting (0: each Take starts one).
  int idle_launchers = 2;
  // The folder most worker logs go to (the agent's <state>/nodes/<id>/workers); "": none. Each
  // launcher creates its two log files there ahead of time (Launcher::Start).
  std::string log_dir;
};

struct LauncherPoolStats {
  int64_t started = 0;          // launchers started, by the refill thread or by Take
  int64_t taken = 0;            // handed out by Take
  int64_t taken_cold = 0;       // of those, started by Take because none was ready
  int64_t died_idle = 0;        // found dead while idle, reaped and replaced
  int64_t refill_failures = 0;  // starts the refill thread could not make
};

class LauncherPool {
 public:
  // NotFound (one line, naming the path) when `launcher_path` is not an executable file;
  // InvalidArgument for a negative idle count.
  static absl::StatusOr<std::unique_ptr<LauncherPool>> Create(LauncherPoolOptions options);
  LauncherPool(const LauncherPool&) = delete;
  LauncherPool& operator=(const LauncherPool&) = delete;
  ~LauncherPool();  // Shutdown()

  // A live launcher, now the caller's. FailedPrecondition after Shutdown; Launcher::Start's
  // errors when none was ready and none could be started.
  absl::StatusOr<std::unique_ptr<Launcher>> Take();

  // Stops refilling, kills and reaps every idle launcher. Idempotent.
  void Shutdown();

  const std::string& launcher_path() const { return options_.launcher_path; }
  // The idle launchers' pids, oldest first.
  std::vector<pid_t> IdlePids() const;
  LauncherPoolStats stats() const;

 private:
  struct Idle {
    uint64_t serial;  // the key epoll hands back
    std::unique_ptr<Launcher> launcher;
  };

  LauncherPool(LauncherPoolOptions options, UniqueFd epoll_fd, UniqueFd wake_fd);
  void Wake();
  void RefillLoop();
  // Starts a launcher on the cold-start thread (see the top), waiting for it.
  absl::StatusOr<std::unique_ptr<Launcher>> StartOnPoolThread();
  void ColdLoop();
  // Drops the idle launcher of `serial` (dead) into `dead`, to be destroyed without the lock.
  void DropDead(uint64_t serial, std::vector<std::unique_ptr<Launcher>>& dead)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const LauncherPoolOptions options_;
  const UniqueFd epoll_fd_;
  // Shared with the launchers handed out, whose release wakes the refill thread (harmlessly
  // after the pool is gone).
  const std::shared_ptr<const UniqueFd> wake_fd_;
  std::thread refill_;
  std::thread cold_;
  absl::Mutex cold_mu_;
  std::deque<std::function<void()>> cold_jobs_ ABSL_GUARDED_BY(cold_mu_);
  bool cold_stopping_ ABSL_GUARDED_BY(cold_mu_) = false;

  mutable absl::Mutex mu_;
  std::deque<Idle> idle_ ABSL_GUARDED_BY(mu_);
  uint64_t next_serial_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Set when a refill start failed; cleared by Take, so a failing start is retried once per
  // Take instead of in a busy loop.
  bool refill_failed_ ABSL_GUARDED_BY(mu_) = false;
  LauncherPoolStats stats_ ABSL_GUARDED_BY(mu_);
  absl::Mutex shutdown_mu_;  // serializes Shutdown
  bool joined_ ABSL_GUARDED_BY(shutdown_mu_) = false;
};

}  // namespace tessera

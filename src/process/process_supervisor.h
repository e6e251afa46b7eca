// ProcessSupervisor: owns many child processes (the node agent's workers) and reports each exit
// exactly once, from one reaper thread.
//
// The reaper waits on each child's pidfd with epoll (or, on kernels without pidfds, looks at its
// own children every 20 ms) and only ever waits for the pids it started, so it never reaps a
// child that belongs to another part of the process (gRPC, a test, another supervisor).
// Terminate is asynchronous: SIGTERM now, SIGKILL from the reaper when the grace period ends.
// Shutdown terminates every child, delivers every exit callback, and joins the reaper.
//
// Thread-safe: every method may be called from any thread. Exit callbacks run on the reaper
// thread without any lock held, so they may call Start, Signal or Terminate (a child may be
// restarted under the same id from its own callback), but never Shutdown or the destructor.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/strong_id.h"
#include "process/child_process.h"
#include "process/unique_fd.h"

namespace tessera {

// The supervisor's name for a child: the node agent's worker id. It also names the child's
// cgroup (tessera-worker-<id>).
using ChildId = StrongId<struct ChildIdTag, std::string>;

// Called once per child, when it has exited and been reaped (its cgroup removed).
using ExitCallback = std::function<void(const ChildId& id, const ExitStatus& status)>;

struct SupervisorOptions {
  // Each child gets its own cgroup under this parent (FindWorkerCgroupParent); nullopt: none.
  std::optional<CgroupParent> cgroup_parent;
  Leftovers leftovers = Leftovers::kKill;
  std::string vmstat_path = "/proc/vmstat";
  // Children start from this pool's prestarted launchers instead of a fork of this process
  // (SpawnOptions::launcher_pool). Not owned; must outlive the supervisor. nullptr: fork.
  LauncherPool* launcher_pool = nullptr;
};

class ProcessSupervisor {
 public:
  static absl::StatusOr<std::unique_ptr<ProcessSupervisor>> Create(SupervisorOptions options = {});
  ProcessSupervisor(const ProcessSupervisor&) = delete;
  ProcessSupervisor& operator=(const ProcessSupervisor&) = delete;
  // Shutdown with a 2 s grace period when it has not been called.
  ~ProcessSupervisor();

  // Spawns a child (ChildProcess::Spawn's errors) and watches it; `on_exit` is called once when
  // it exits. AlreadyExists when a child of that id is still supervised (or starting);
  // FailedPrecondition after Shutdown began. Starts run concurrently; a start that ends after
  // Shutdown began gets its child terminated like the others (and its exit reported).
  absl::StatusOr<pid_t> Start(const ChildId& id, const ChildSpec& spec, ExitCallback on_exit);

  // Sends `signal` to the child's process group. NotFound for an unknown (or already reported)
  // id.
  absl::Status Signal(const ChildId& id, int signal);
  // SIGTERM now and SIGKILL after `grace` unless it has exited; returns at once.
  absl::Status Terminate(const ChildId& id, absl::Duration grace);

  std::optional<pid_t> Pid(const ChildId& id) const;
  // The children not yet reported, in id order.
  std::vector<ChildId> Children() const;

  // Refuses new children, terminates every child (SIGKILL after `grace`), waits until every
  // exit callback has returned, and joins the reaper. Idempotent.
  void Shutdown(absl::Duration grace);

 private:
  struct Entry {
    ChildId id;
    std::unique_ptr<ChildProcess> process;
    ExitCallback on_exit;
    std::optional<absl::Time> kill_at;  // SIGKILL then, unless it has exited
    bool exited = false;                // seen exited by the reaper, being reported
  };

  ProcessSupervisor(SupervisorOptions options, UniqueFd epoll_fd, UniqueFd wake_fd);
  void Wake();
  void ReaperLoop();
  // The epoll timeout until the next SIGKILL deadline or poll tick, in ms (-1: none).
  int NextTimeoutMs() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SupervisorOptions options_;
  const UniqueFd epoll_fd_;
  const UniqueFd wake_fd_;
  std::thread reaper_;

  mutable absl::Mutex mu_;
  // Keyed by a serial number that never repeats, which is what epoll hands back.
  std::map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::map<ChildId, uint64_t> by_id_ ABSL_GUARDED_BY(mu_);
  // Ids whose child is being started (spawned without the lock).
  std::set<ChildId> starting_ ABSL_GUARDED_BY(mu_);
  // When Shutdown's SIGKILL falls due; for a child whose start ends after Shutdown began.
  absl::Time shutdown_kill_at_ ABSL_GUARDED_BY(mu_);
  uint64_t next_serial_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex shutdown_mu_;  // serializes Shutdown
  bool joined_ ABSL_GUARDED_BY(shutdown_mu_) = false;
};

}  // namespace tessera

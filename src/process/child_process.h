// ChildProcess: one child started from a ChildSpec and owned until it has been reaped.
//
// The child gets exactly the environment, directory and files the spec names: its own session
// and process group (so a signal to the worker reaches everything it started), stdin from
// its stdin_path (else /dev/null), stdout and stderr appended to files (created 0600 with their
// parent folders 0700), and no other file descriptor of the parent (the node agent's sockets never
// leak into workers). Spawn returns only after the exec succeeded; a child that cannot start (no
// such program, not executable, bad directory) is an error from Spawn, never a silent exit 127.
//
// With a cgroup parent, the child runs in its own cgroup v2 (cgroup.kill reaches everything it
// started; with the memory controller also a memory limit and a certain OOM verdict); without
// the memory controller, an OOM is inferred from the host's OOM kill counter (a heuristic, see
// OomEvidence). By default whatever the child leaves running in its process group (and
// cgroup) is killed when it exits, before it is reaped, so the zombie leader still holds the
// group id and no other process can be signalled by mistake.
//
// Two ways to start the child, with the same guarantees and the same errors: by default Spawn
// forks the calling process; with a LauncherPool (SpawnOptions::launcher_pool) the child is a
// prestarted tessera-launcher, moved into its cgroup first, that gets the spec over its channel
// and does the child's side itself (launcher_main.cc): no fork of a large parent on this path.
//
// The hosting process must not ignore SIGCHLD (Spawn refuses): the kernel would discard exit
// statuses.
//
// Thread-safety: pid(), pidfd() and Signal() may be called from any thread at any time; TryWait,
// Wait and Terminate from one thread at a time (the owner, or the supervisor's reaper).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "process/cgroup.h"
#include "process/exit_status.h"
#include "process/unique_fd.h"

namespace tessera {

struct ChildSpec {
  // argv[0] is looked up in the PATH of `env` (default /usr/local/bin:/usr/bin:/bin) unless it
  // holds a '/'; a relative path with a '/' is taken from `cwd`.
  std::vector<std::string> argv;
  // The COMPLETE environment of the child (the caller merges base, additions and isolation).
  std::map<std::string, std::string, std::less<>> env;
  // Working directory; "": the parent's.
  std::string cwd;
  // Files that receive stdout and stderr (appended; created 0600 with missing parent folders 0700);
  // "": /dev/null. Both may name the same file.
  std::string stdout_path;
  std::string stderr_path;
  // The file (or FIFO) stdin reads; "": /dev/null. Opened read-only; a FIFO must already have a
  // writer (the node agent holds one for a worker whose stdin it forwards).
  std::string stdin_path;
  // memory.max of the child's cgroup; needs a cgroup parent with the memory controller.
  std::optional<int64_t> memory_max_bytes;
};

// What happens to processes the child started that are still running when it exits.
enum class Leftovers {
  kKill,   // SIGKILL its process group (and its cgroup) before reaping it
  kLeave,  // leave them running
};

class LauncherPool;

struct SpawnOptions {
  // The child gets its own cgroup <parent>/<cgroup_name> (see cgroup.h). nullopt: no cgroup.
  std::optional<CgroupParent> cgroup_parent;
  // Required with cgroup_parent; WorkerCgroupName(worker id) gives the usual one.
  std::string cgroup_name;
  Leftovers leftovers = Leftovers::kKill;
  // The host OOM counter read without a cgroup (tests point it at a file of their own).
  std::string vmstat_path = "/proc/vmstat";
  // Start the child from this pool's prestarted launchers instead of forking; not owned, must
  // outlive the Spawn call. nullptr: fork.
  LauncherPool* launcher_pool = nullptr;
};

class ChildProcess {
 public:
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(const ChildSpec& spec,
                                                             const SpawnOptions& options = {});
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // A child still running is killed (with its group) and reaped: no zombie, no orphan.
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  // A pidfd (Linux 5.3+) that polls readable once the child has exited; -1 when unsupported.
  int pidfd() const { return pidfd_.get(); }
  // The child's cgroup directory, "" when it has none.
  std::string cgroup_dir() const;

  // Sends `signal` to the child's process group (SIGKILL also reaches its whole cgroup).
  // FailedPrecondition once the child has been reaped.
  absl::Status Signal(int signal);

  // True once the child has exited; does not reap it (Wait then returns at once).
  absl::StatusOr<bool> HasExited();
  // The exit status when the child has exited (reaping it), nullopt while it runs.
  absl::StatusOr<std::optional<ExitStatus>> TryWait();
  // Blocks until the child exits; reaps it. Later calls return the same status.
  absl::StatusOr<ExitStatus> Wait();
  // SIGTERM to the group, SIGKILL after `grace` if the child is still running, then Wait().
  absl::StatusOr<ExitStatus> Terminate(absl::Duration grace);

 private:
  ChildProcess() = default;

  // Creates the cgroup (when asked for) and reads the host OOM counter: what both ways of
  // starting need before the child exists.
  absl::Status Prepare(const ChildSpec& spec, const SpawnOptions& options);
  // Starts the child by forking this process.
  absl::Status Fork(const ChildSpec& spec, const SpawnOptions& options);
  // Starts the child as a launcher taken from `pool` (Prepare first).
  absl::Status Launch(const ChildSpec& spec, LauncherPool& pool);

  // The child has exited (observed without reaping): kill leftovers, reap, decide OOM, remove
  // the cgroup.
  absl::StatusOr<ExitStatus> Finish(int child_code, int child_status);
  // Blocks up to `timeout` for the exit; true when the child has exited (not yet reaped).
  absl::StatusOr<bool> WaitForExit(absl::Duration timeout);

  pid_t pid_ = -1;
  UniqueFd pidfd_;
  Leftovers leftovers_ = Leftovers::kKill;
  std::string vmstat_path_;
  std::optional<int64_t> host_oom_kills_at_start_;
  std::unique_ptr<WorkerCgroup> cgroup_;
  std::optional<ExitStatus> exit_;  // set once reaped; owned by the waiting thread

  mutable absl::Mutex mu_;
  bool reaped_ ABSL_GUARDED_BY(mu_) = false;
  bool sent_sigkill_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tessera

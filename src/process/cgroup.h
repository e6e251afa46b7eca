// Worker cgroups (cgroup v2): each worker can run in its own cgroup
// <parent>/tessera-worker-<id>. That always gives a kill that reaches every process the worker
// started, even ones that left its process group (cgroup.kill); with the memory controller it
// also gives a memory limit (memory.max) and a certain out-of-memory verdict (memory.events
// oom_kill).
//
// The parent must be a cgroup v2 directory the agent may write. The memory controller is used
// when it is available there (cgroup.controllers) and can be enabled for children
// (cgroup.subtree_control). cgroup v2 forbids enabling controllers in a cgroup that holds
// processes itself (the "no internal processes" rule), so an agent started inside a non-root
// cgroup usually needs a delegated, empty parent given explicitly (e.g. systemd Delegate=yes);
// on a hybrid host (memory on cgroup v1) the v2 tree has no memory controller at all. Either way
// the parent is still used for grouping and killing, and CgroupParent says why memory is not.
// When no cgroup is usable, FindWorkerCgroupParent says why and workers run without one.
//
// Thread-compatible: WorkerCgroup has one owner; the free functions are stateless.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tessera {

// The cgroup v2 path of a process from the text of /proc/<pid>/cgroup (the "0::<path>" line).
// NotFound when the process has no cgroup v2 membership (a pure cgroup v1 host).
absl::StatusOr<std::string> ParseCgroupV2Path(std::string_view proc_cgroup);

// The mount point of the cgroup2 file system from the text of /proc/self/mounts (on a hybrid
// host it is /sys/fs/cgroup/unified). NotFound when cgroup2 is not mounted.
absl::StatusOr<std::string> ParseCgroup2MountPoint(std::string_view mounts);

struct CgroupDetectOptions {
  // The parent directory to use. "": <cgroup2 mount>/<this process's own cgroup>.
  std::string parent_dir;
  // Where /proc is (tests point it at a fake tree).
  std::string proc_root = "/proc";
};

// A cgroup v2 directory under which worker cgroups can be created.
struct CgroupParent {
  std::string dir;
  // Whether children get the memory controller (memory.max, memory.events).
  bool memory = false;
  // Why not, when `memory` is false (one line, for logs and errors).
  std::string no_memory_reason;
};

// The usable parent, after enabling the memory controller for its children when it can.
// FailedPrecondition with a one-line reason when no cgroup is usable: cgroup2 not mounted, the
// process in no v2 hierarchy, the directory missing, not writable or not a cgroup.
absl::StatusOr<CgroupParent> FindWorkerCgroupParent(const CgroupDetectOptions& options);

// "tessera-worker-<id>", or InvalidArgument when `id` cannot be one path component.
absl::StatusOr<std::string> WorkerCgroupName(std::string_view id);

// One worker's cgroup directory.
class WorkerCgroup {
 public:
  // Creates <parent>/<name> (name: one path component) and writes memory.max when a limit is
  // given (FailedPrecondition, with the reason, when the parent has no memory controller). A
  // leftover cgroup of the same name (an earlier agent that died) is emptied and
  // replaced.
  static absl::StatusOr<std::unique_ptr<WorkerCgroup>> Create(
      const CgroupParent& parent, std::string_view name, std::optional<int64_t> memory_max_bytes);
  WorkerCgroup(const WorkerCgroup&) = delete;
  WorkerCgroup& operator=(const WorkerCgroup&) = delete;
  // Removes the directory when that has not been done (kills what is left first).
  ~WorkerCgroup();

  const std::string& dir() const { return dir_; }
  // Whether the memory controller applies (memory.max, memory.events).
  bool has_memory() const { return memory_; }
  // The file a process writes "0" to in order to move itself in.
  std::string procs_path() const { return dir_ + "/cgroup.procs"; }

  // memory.events oom_kill: how many processes of this cgroup the OOM killer took.
  absl::StatusOr<int64_t> OomKills() const;
  // True while any process is inside (cgroup.events populated).
  absl::StatusOr<bool> Populated() const;
  // SIGKILL to every process inside (cgroup.kill, Linux 5.14+; Unimplemented before).
  absl::Status KillAll() const;
  // Kills what is left, waits up to `wait` for the cgroup to empty, and removes the directory.
  absl::Status Remove(absl::Duration wait);

 private:
  WorkerCgroup(std::string dir, bool memory) : dir_(std::move(dir)), memory_(memory) {}

  std::string dir_;
  bool memory_ = false;
  bool removed_ = false;
};

}  // namespace tessera

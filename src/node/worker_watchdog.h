// WorkerWatchdog: the node agent's rules for workers that must not linger (WorkerSpec's
// stop_when_unwatched and hang_timeout_ms; docs/train.md).
// - An owned worker (stop_when_unwatched) is stopped when its last WatchWorker stream has been
//   gone for `unwatched_grace`, or nobody has watched it within `first_watch_grace` of its start:
//   the process that owns it (a job controller, a `tessera run` client) died, and a worker whose
//   owner died must not keep its devices.
// - A worker with a hang timeout is killed when neither its log files grew nor its session used
//   CPU time for that long: a stopped (SIGSTOP) or deadlocked rank is not waited on forever.
// Check() decides; the caller (a thread of the agent) kills. Progress comes from a
// WorkerProgressProbe, /proc and the log files in production, a fake in tests.
//
// Thread-safe: one mutex; Check() calls the probe outside it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "node/agent_types.h"

namespace tessera {

// How far a worker has got: CPU time of every process in its session and bytes of output.
struct WorkerProgress {
  uint64_t cpu_ticks = 0;
  uint64_t output_bytes = 0;
  friend bool operator==(const WorkerProgress&, const WorkerProgress&) = default;
};

class WorkerProgressProbe {
 public:
  virtual ~WorkerProgressProbe() = default;
  // nullopt when the process is gone.
  virtual std::optional<WorkerProgress> Sample(int pid, const std::string& stdout_path,
                                               const std::string& stderr_path) = 0;
};

// /proc/<pid>/stat of every process whose session is `pid` (utime + stime), and the sizes of the
// two log files.
std::unique_ptr<WorkerProgressProbe> MakeProcProgressProbe(std::string proc_root = "/proc");

struct WatchedWorker {
  WorkerId id;
  int pid = 0;
  std::string stdout_path;
  std::string stderr_path;
  bool stop_when_unwatched = false;
  absl::Duration hang_timeout = absl::ZeroDuration();  // zero: never
};

// What to do with a worker: stop it, and why (the cause goes into its exit reason).
struct WatchdogVerdict {
  WorkerId id;
  std::string cause;
  bool hung = false;  // hung: SIGKILL at once; unwatched: SIGTERM, then SIGKILL
};

struct WatchdogOptions {
  absl::Duration first_watch_grace = absl::Seconds(5);
  absl::Duration unwatched_grace = absl::Milliseconds(500);
};

class WorkerWatchdog {
 public:
  WorkerWatchdog(WatchdogOptions options, std::unique_ptr<WorkerProgressProbe> probe);

  // Only workers with a rule are tracked; others are ignored.
  void Add(const WatchedWorker& worker, absl::Time now);
  void Remove(const WorkerId& id);
  void WatchStarted(const WorkerId& id);
  void WatchEnded(const WorkerId& id, absl::Time now);

  // The workers to stop now; each is reported once (and forgotten).
  std::vector<WatchdogVerdict> Check(absl::Time now);

  size_t tracked() const;

 private:
  struct Entry {
    WatchedWorker worker;
    int watchers = 0;
    bool ever_watched = false;
    absl::Time unwatched_since;  // start, then the end of the last watch
    std::optional<WorkerProgress> last;
    absl::Time progressed_at;
  };

  const WatchdogOptions options_;
  const std::unique_ptr<WorkerProgressProbe> probe_;
  mutable absl::Mutex mu_;
  std::map<WorkerId, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera

// WorkerStdinPipes: the stdin of workers started with WorkerSpec.stdin_pipe — a FIFO
// <workers>/<worker-id>.in (mode 0600) whose write end the agent holds, so the worker starts at
// once (its open finds a writer), reads what WriteWorkerStdin sends, and reads end of file when
// the writer closes it. A gang's rank 0 reads its foreground client's stdin this way.
//
// Thread-safe: one mutex guards the table; writes never block (what does not fit is left to the
// caller to send again).
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "node/agent_types.h"

namespace tessera {

class WorkerStdinPipes {
 public:
  explicit WorkerStdinPipes(std::string dir) : dir_(std::move(dir)) {}
  ~WorkerStdinPipes();

  // Makes the worker's FIFO and opens its write end; the path for ChildSpec::stdin_path.
  absl::StatusOr<std::string> Open(const WorkerId& worker);
  // Writes as much of `data` as fits now, then closes the pipe when `close` and all of it was
  // taken. NotFound for a worker without an open pipe.
  absl::StatusOr<size_t> Write(const WorkerId& worker, std::string_view data, bool close);
  // The worker is gone: its pipe is closed and removed.
  void Forget(const WorkerId& worker);

 private:
  std::string PathOf(const WorkerId& worker) const;

  const std::string dir_;
  absl::Mutex mu_;
  std::map<WorkerId, int> fds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera

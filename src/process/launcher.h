// Launcher: one prestarted tessera-launcher process (launcher_main.cc) waiting for its launch
// spec, as the agent's side sees it: its pid, a pidfd, and the channel the spec goes down and a
// failure report comes back up. Started with posix_spawn (no copy of the agent's page tables),
// in its own session (so its pid is the worker's process group), with default signal handling,
// an empty signal mask, an empty environment and stdin/stdout/stderr on /dev/null.
//
// Until Adopt() hands it over as a worker, the Launcher owns the process: destroying it kills
// and reaps the launcher, so a dropped launcher never leaves a zombie.
//
// Thread-compatible: one owner at a time (the pool, then the spawning thread).
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "process/unique_fd.h"

namespace tessera {

class Launcher {
 public:
  // Starts `path`. With a `log_dir`, the launcher creates two unnamed log files there while it
  // waits, and a worker log that is new and directly in that folder is one of them, linked in
  // (launcher_main.cc: creating an inode can cost more than the rest of a start). Errors: the
  // program cannot be started (missing, not executable), or no socket, pidfd or process could
  // be made.
  static absl::StatusOr<std::unique_ptr<Launcher>> Start(const std::string& path,
                                                         const std::string& log_dir = "");
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;
  // Kills and reaps the launcher unless it has been adopted.
  ~Launcher();

  pid_t pid() const { return pid_; }
  // Polls readable once the launcher has exited; -1 on kernels without pidfds.
  int pidfd() const { return pidfd_.get(); }

  // True once the process has exited (not reaped: the destructor does that).
  bool HasExited() const;

  // Sends the whole encoded spec. Unavailable when the launcher is gone (it died while idle).
  absl::Status Send(std::string_view spec);

  // Blocks until the launcher either exec'd (the channel closes with nothing sent: returns "")
  // or reported a failure (returns the report's bytes; the launcher exits right after).
  // Unavailable when it died with the spec unread (it never exec'd).
  absl::StatusOr<std::string> ReadOutcome();

  // Hands the process over to its new owner (a ChildProcess: the launcher has become the
  // worker): returns the pidfd; the destructor then leaves the process alone.
  UniqueFd Adopt();

  // Reaps a launcher that has exited or is about to (after its failure report), now.
  void Reap();

  // Called once when this launcher is done with: adopted, reaped or destroyed (its pool starts
  // the next one then, not while this one is still launching).
  void OnRelease(std::function<void()> callback) { on_release_ = std::move(callback); }

 private:
  Launcher() = default;

  pid_t pid_ = -1;
  UniqueFd pidfd_;
  UniqueFd channel_;
  bool owned_ = true;  // false once adopted or reaped
  std::function<void()> on_release_;

  void Released();
};

}  // namespace tessera

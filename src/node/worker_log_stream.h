// StreamWorkerLogs: sends a worker's stdout and stderr to a client as they are written (like
// `tail -f` on both files), until the worker has exited and every byte is sent, or only what is
// there now, or until the client goes away. WatchWorker and ReadLogs share it.
//
// Each file is followed by a LogFollower (inotify, no polling for data) on a thread of its own;
// calls to `send` are serialized. The calling thread waits for the worker's exit and looks at the
// client every `check_interval`.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace tessera {

struct WorkerLogFiles {
  std::string stdout_path;
  std::string stderr_path;
};

struct WorkerLogStreamOptions {
  bool follow = true;  // false: what the files hold now, then stop
  bool want_stdout = true;
  bool want_stderr = true;
  absl::Duration check_interval = absl::Milliseconds(200);
};

struct WorkerLogStreamHooks {
  // Sends one chunk; false when the client is gone. Never called concurrently.
  std::function<bool(bool is_stderr, std::string data)> send;
  // True once the worker has exited (waiting for it at most `timeout`).
  std::function<bool(absl::Duration timeout)> await_exit;
  // True when the client has cancelled the call (or the worker is forgotten).
  std::function<bool()> should_stop;
  // Optional: called every check_interval while following, never at the same time as send
  // (it may send events of its own); false when the client is gone.
  std::function<bool()> tick;
};

// OK once everything was sent (after the exit when following). Cancelled when the client went
// away or should_stop said so; the follower's error (naming the file) when a file cannot be read.
absl::Status StreamWorkerLogs(const WorkerLogFiles& files, const WorkerLogStreamOptions& options,
                              const WorkerLogStreamHooks& hooks);

}  // namespace tessera

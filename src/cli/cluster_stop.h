// Stopping every head and node agent process of one state folder on this machine, and their
// workers: a Shutdown call first, then SIGTERM, then SIGKILL after a grace period. Processes are
// found through the pid files, and only `tessera start` processes are ever signalled (a stale
// pid file whose pid now belongs to another program is ignored). Used by `tessera stop` and
// `tessera down`. Thread-compatible: one call at a time.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/state_folder.h"

namespace tessera::cli {

struct StopOptions {
  // How long a process gets after the Shutdown call, and again after SIGTERM.
  absl::Duration grace = absl::Seconds(5);
};

struct StoppedProcess {
  std::string what;  // "head", "node agent n1", "worker w-3 of n1"
  int pid = 0;
  std::string how;  // "shut down", "SIGTERM", "SIGKILL"
};

struct StopReport {
  std::vector<StoppedProcess> stopped;
};

absl::StatusOr<StopReport> StopCluster(const client::StateFolder& state,
                                       const StopOptions& options);

}  // namespace tessera::cli

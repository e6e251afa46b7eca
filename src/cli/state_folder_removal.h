// Removing a state folder for `tessera down`, once every process of it has stopped. What outlives
// the cluster stays: the jobs' logs (<state>/jobs, docs/train.md) and the daemons' and workers'
// logs, which KeepClusterLogs (kept_logs.h) first moves under <state>/logs/<time>/. Everything
// else goes, and the folder itself when nothing is kept.
//
// Only a folder that holds what a cluster writes is touched, and never `/` or the home folder:
// `down --state-dir ~` by mistake must not delete anything of the user's. A folder holding only
// what an earlier `down` kept (jobs/, logs/) is left as it is.
//
// Thread-compatible: one call at a time per state folder.
#pragma once

#include <cstddef>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/kept_logs.h"
#include "client/state_folder.h"

namespace tessera::cli {

struct RemovalOptions {
  absl::Time now = absl::Now();               // names the kept logs' folder
  size_t keep_logs = kKeptLogFoldersDefault;  // kept log folders left after pruning
};

struct RemovalReport {
  bool nothing_to_remove = false;  // only what an earlier `down` kept was there
  bool removed_folder = false;     // the state folder itself is gone
  bool kept_jobs = false;          // <state>/jobs stays
  KeptLogs logs;                   // what was moved under <state>/logs (folder "" when nothing)
};

// FailedPrecondition (naming the folder) when it does not look like a state folder; the error of
// KeepClusterLogs or of a removal, naming the path. Nothing is removed unless every log was kept.
absl::StatusOr<RemovalReport> RemoveStateFolder(const client::StateFolder& state,
                                                const RemovalOptions& options);

}  // namespace tessera::cli

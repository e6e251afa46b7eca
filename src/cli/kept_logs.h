// Keeping a cluster's daemon and worker logs when `tessera down` removes its state folder:
//
//   <state>/logs/head.log (and any other file directly in logs/)  -> <kept>/head.log
//   <state>/nodes/<id>/agent.log                                    -> <kept>/nodes/<id>/agent.log
//   <state>/nodes/<id>/workers/<worker>.out, .err                   -> <kept>/nodes/<id>/workers/
//
// where <kept> is <state>/logs/<down time, UTC, e.g. 2026-12-03T14-05-09Z> (with "-2", "-3"...
// when that name is taken). <state>/logs/latest, a relative symbolic link, names the newest kept
// folder, and only the newest `keep` kept folders stay: older ones are removed.
//
// Files are moved (renamed within the state folder), never copied. Only regular files are moved
// and only real folders are entered: a symbolic link is never followed, and FIFOs (worker stdin)
// and sockets stay behind. Moved files end with mode 0600 and the folders made with 0700,
// whatever the umask. `latest` is the one link written; it replaces a link or file of that name,
// never a folder.
//
// Thread-compatible: one call at a time per state folder (`tessera down`, after every process of
// the folder has stopped).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/state_folder.h"

namespace tessera::cli {

inline constexpr size_t kKeptLogFoldersDefault = 10;

struct KeepLogsOptions {
  absl::Time now = absl::Now();          // names the kept folder
  size_t keep = kKeptLogFoldersDefault;  // kept folders left after pruning (at least 1)
};

struct KeptLogs {
  std::string folder;                 // the kept folder's path; "" when there was no log to keep
  size_t files = 0;                   // files moved into it
  std::vector<std::string> pruned;    // older kept folders removed, by name
  std::vector<std::string> warnings;  // e.g. "<state>/logs/latest is a folder; not replaced"
};

// Moves the logs as above and prunes. An error (naming the file) when a log cannot be moved: the
// caller must then remove nothing, so no log is lost. Files already moved stay in the new folder.
absl::StatusOr<KeptLogs> KeepClusterLogs(const client::StateFolder& state,
                                         const KeepLogsOptions& options);

// "2026-12-03T14-05-09Z": `t` in UTC, to the second, with no ':' (valid in every file system).
std::string KeptLogsFolderName(absl::Time t);

// True for a name KeepClusterLogs gives a kept folder: KeptLogsFolderName's, optionally followed
// by "-<n>".
bool IsKeptLogsFolderName(std::string_view name);

}  // namespace tessera::cli

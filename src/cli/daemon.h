// Starting a server process in the background: `tessera start` (without --block) runs itself
// again with --block as a daemon (its own session, no terminal, stdin from /dev/null, stdout and
// stderr appended to a log file) and returns once the daemon says it is ready.
// Thread-safe: posix_spawn, no fork handlers run.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tessera::cli {

// The path of the running `tessera` binary (/proc/self/exe).
std::string SelfExecutable();

// Starts `argv` in a new session with stdin from /dev/null and stdout and stderr appended to
// `log_file` (created 0600). Returns the daemon's pid (a child of this process until this
// process exits).
absl::StatusOr<int> SpawnDaemon(const std::vector<std::string>& argv, const std::string& log_file);

// Calls `ready` every few milliseconds (backing off to 200 ms) until it returns OK. Fails when
// the daemon `pid` exits first (the error quotes the end of its log) or after `timeout`.
absl::Status WaitReady(int pid, const std::string& what, const std::string& log_file,
                       absl::Duration timeout, const std::function<absl::Status()>& ready);

// The last `lines` lines of a file, joined with " | " for a one-line error.
std::string LogTail(const std::string& path, int lines);

}  // namespace tessera::cli

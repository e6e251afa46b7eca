// Folders and files private to the user running this process: the cluster's state folder, its
// token, pid and address files, and every log the cluster writes (docs/cluster-runtime.md,
// "Security model"). Modes are set explicitly, so the umask never widens them, and a folder or
// file that another user owns or can write is refused rather than trusted: whoever controls a
// state folder controls the token, the head's address and the pid files the CLI signals.
//
// Thread-safe: stateless functions over the file system.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "process/unique_fd.h"

namespace tessera {

// OK when `path` is a folder this process may trust: it is a folder, owned by the effective
// user, not writable by group or others, and every folder above it is owned by root or by the
// effective user and, when group or others may write it, sticky (as /tmp is), so nobody else can
// rename or replace it. Symbolic links are resolved first and the real path is judged.
// NotFound when it does not exist; PermissionDenied with a one-line reason otherwise.
absl::Status CheckPrivateDirectory(const std::string& path);

// Creates `path` and its missing parents with mode 0700 whatever the umask (existing parents are
// left as they are), then CheckPrivateDirectory.
absl::Status EnsurePrivateDirectory(const std::string& path);

// OK when the open file `fd` (named `path` in errors) is a regular file owned by the effective
// user that group and others can neither read nor write.
absl::Status CheckPrivateFile(int fd, const std::string& path);

// Writes `content` to `path` with mode 0600 through a temporary file beside it, synced and
// renamed, so a reader never sees half of it and it is never readable by others, even for a
// moment. Replaces an existing file (never follows a link at the temporary's name).
absl::Status WritePrivateFileAtomically(const std::string& path, std::string_view content);

// `path` opened for appending, created with mode 0600 when missing (an existing file is kept and
// its mode narrowed to 0600). Never follows a symbolic link at `path`.
absl::StatusOr<UniqueFd> OpenPrivateFileForAppend(const std::string& path);

// The state folder used when none is given: $XDG_STATE_HOME/tessera when that variable holds an
// absolute path, else <home>/.local/state/tessera, <home> being $HOME or the user's home folder
// from the password database. Per user and never in a world-writable folder. The arguments are
// the variables' values (null when unset), so tests need not change the process environment.
std::string DefaultStateDirectory(const char* xdg_state_home, const char* home);

// DefaultStateDirectory of this process's environment.
std::string DefaultStateDirectory();

}  // namespace tessera

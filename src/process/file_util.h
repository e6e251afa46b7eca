// Small file helpers for the process module: whole-file reads of kernel files (/proc, cgroupfs)
// and single writes to control files, with errors that name the path and the errno text.
// Thread-safe: stateless functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera {

// The whole file. Kernel files report size 0, so this reads until EOF rather than stat()ing.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// Writes `text` to an existing file in one write() (how cgroupfs control files want it).
absl::Status WriteControlFile(const std::string& path, std::string_view text);

// The value of `key` in "key value" lines (/proc/vmstat, memory.events, cgroup.events).
// NotFound when no line has that key; InvalidArgument when its value is not an integer.
absl::StatusOr<int64_t> FindKeyedCounter(std::string_view text, std::string_view key);

// An error status for a failed system call: "<what>: <strerror(err)>", with a code chosen from
// errno (ENOENT -> NotFound, EACCES/EPERM -> PermissionDenied, ...).
absl::Status ErrnoStatus(int err, std::string_view what);

}  // namespace tessera

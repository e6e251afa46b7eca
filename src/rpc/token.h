// The cluster token: 32 random bytes from /dev/urandom, hex encoded, kept in a 0600 file in the
// state folder (docs/cluster-runtime.md). It never travels: both ends of every connection prove
// they hold it (rpc/cluster_identity.h).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tessera::rpc {

inline constexpr int kTokenBytes = 32;

// Thread-safe: pure functions and file system calls.

// 64 lowercase hex characters. Internal when /dev/urandom cannot be read.
absl::StatusOr<std::string> GenerateToken();

// Writes `token` to `path` with mode 0600, atomically: a temporary file beside it is written,
// synced and renamed, so a reader never sees a partial token and the file is never readable by
// others, even for a moment. Replaces an existing file.
absl::Status WriteTokenFile(const std::string& path, std::string_view token);

// Reads and trims the token. Refuses (PermissionDenied) a file that the group or others can read
// or write, a missing file (NotFound), and an empty or malformed token (InvalidArgument: only
// printable ASCII, no spaces).
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// Reads the token at `path` when the file exists, else generates one and writes it there.
absl::StatusOr<std::string> ReadOrCreateTokenFile(const std::string& path);

// The scrape token: 64 lowercase hex characters, HMAC-SHA256 of a fixed label keyed by the
// cluster token. The HTTP endpoints take it for /metrics alone, so a scraper (Prometheus)
// that sends it to whoever listens at a target's address (an agent that died, its port taken)
// gives away the metrics, never the token or the job logs. The head keeps it in
// <state>/scrape-token (0600). Internal when the hash fails.
absl::StatusOr<std::string> DeriveScrapeToken(std::string_view token);

}  // namespace tessera::rpc

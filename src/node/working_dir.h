// A job's working directory shipped to every host that runs one of its ranks (`tessera train
// --working-dir DIR`, docs/train.md): the client packs the folder into a DirectoryArchive
// (proto/tessera/v1/jobs.proto), the job carries it, and each node agent unpacks it once per job
// under its node folder before the ranks start there.
//
// Only regular files and folders travel; symbolic links and other special files are skipped and
// named. Unpacking trusts nothing in the archive: paths must be relative and plain (no "..", no
// empty or "." parts, no leading "/"), files are created exclusively without following links,
// and permission bits are limited to rwx (no set-id bits).
//
// Thread-compatible (plain functions); unpacking the same job twice returns the first result.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera {

struct PackedDirectory {
  std::string archive;                // a serialized tessera.v1.DirectoryArchive
  std::vector<std::string> skipped;   // relative paths not packed (links, devices, ...)
  uint64_t bytes = 0;                 // file contents packed
};

// InvalidArgument when `dir` is not a readable folder or its files exceed `limit_bytes`.
absl::StatusOr<PackedDirectory> PackDirectory(const std::string& dir, uint64_t limit_bytes);

// Whether `id` can name a job's working directory: 1 to 128 of [A-Za-z0-9._-], not starting with
// '.' (so never ".", ".." or a path).
bool IsWorkingDirJobId(const std::string& id);

// Unpacks `archive` for `job_id` under `root` (created 0700 when missing) into
// <root>/<job_id>/ and returns that path; a folder already complete for this job is reused.
// InvalidArgument (one line naming the entry) for a malformed archive or an unsafe path, and
// nothing is left behind then.
absl::StatusOr<std::string> UnpackWorkingDir(const std::string& root, const std::string& job_id,
                                             const std::string& archive);

}  // namespace tessera

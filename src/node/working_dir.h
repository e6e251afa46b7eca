// A job's working directory shipped to every host that runs one of its ranks (`tessera train
// --working-dir DIR`, docs/train.md): the client packs the folder into a DirectoryArchive
// (proto/tessera/v1/jobs.proto), the job carries it, and each node agent unpacks it once per job
// under its node folder before the ranks start there.
//
// Only regular files and folders travel; symbolic links and other special files are skipped and
// named. One check, ValidateWorkingDirArchive, judges an archive wherever one arrives: the head's
// job manager runs it on every SubmitJob (ValidateJobSpec, so a bad archive is refused by the
// submit call and no job is made) and every agent runs it again before it unpacks. It trusts
// nothing in the archive: its size, entry count and unpacked size are bounded (the limits below);
// paths must be relative and plain (no "..", no empty or "." parts, no leading "/"), unique, and
// never pass through a file; files are created exclusively without following links, and
// permission bits are limited to rwx (no set-id bits).
//
// Thread-compatible (plain functions); unpacking the same job twice returns the first result.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera {

// The limits of a working-directory archive. The archive travels in SubmitJob and in every
// agent's PrepareWorkingDir, so it stays under gRPC's 4 MiB message limit.
inline constexpr uint64_t kWorkingDirMaxFileBytes = uint64_t{3} << 20;     // file contents in all
inline constexpr uint64_t kWorkingDirMaxArchiveBytes = uint64_t{7} << 19;  // 3.5 MiB serialized
inline constexpr int kWorkingDirMaxEntries = 10000;                        // files and folders
inline constexpr size_t kWorkingDirMaxPathBytes = 4096;                    // one entry's path

struct PackedDirectory {
  std::string archive;               // a serialized tessera.v1.DirectoryArchive
  std::vector<std::string> skipped;  // relative paths not packed (links, devices, ...)
  uint64_t bytes = 0;                // file contents packed
};

// InvalidArgument when `dir` is not a readable folder, when its files exceed `limit_bytes` (at
// most kWorkingDirMaxFileBytes) or it holds more than kWorkingDirMaxEntries entries: one line
// starting with `label` (what the folder was given as) naming the file or folder, its size and
// the limit. Sizes are taken from the folder's listing before any file is read, so a huge (even
// sparse) file is refused at once. `under` non-empty: the entries lie under that one folder
// (a plain name), which the archive holds too (a Python package shipped with its name).
absl::StatusOr<PackedDirectory> PackDirectory(const std::string& dir, uint64_t limit_bytes,
                                              absl::string_view label = "--working-dir",
                                              const std::string& under = "");

// One regular file packed alone under its own name (a module file or a zip), with the limits
// and refusals of PackDirectory.
absl::StatusOr<PackedDirectory> PackFile(const std::string& path, uint64_t limit_bytes,
                                         absl::string_view label);

// The content-addressed id of an archive: "env-" and the SHA-256 of its bytes in hex. An agent
// asked to unpack under an id of this form checks that it is the archive's own, so a folder
// cached under it holds exactly those bytes, whoever asked first (runtime environments' folders
// are unpacked once per node and shared by every driver that ships the same content).
std::string WorkingDirContentId(const std::string& archive);

// Whether `archive` (a serialized DirectoryArchive) may be unpacked: its size (at most
// kWorkingDirMaxArchiveBytes, checked before it is parsed), that it parses, its entry count, its
// file bytes in all, and every path (relative, plain, at most kWorkingDirMaxPathBytes, not
// twice, not under a file). InvalidArgument, one line starting "working dir archive: " that
// names the entry or the figure and the limit.
absl::Status ValidateWorkingDirArchive(const std::string& archive);

// Whether `id` can name a job's working directory: 1 to 128 of [A-Za-z0-9._-], not starting with
// '.' (so never ".", ".." or a path).
bool IsWorkingDirJobId(const std::string& id);

// Unpacks `archive` for `job_id` under `root` (created 0700 when missing) into
// <root>/<job_id>/ and returns that path; a folder already complete for this job is reused. A
// job_id of the content-addressed form ("env-...") must be WorkingDirContentId(archive), else
// InvalidArgument and nothing is made.
// ValidateWorkingDirArchive's InvalidArgument for an archive it refuses, and nothing is made then;
// InvalidArgument naming the entry for one that cannot be written, and nothing is left behind.
absl::StatusOr<std::string> UnpackWorkingDir(const std::string& root, const std::string& job_id,
                                             const std::string& archive);

}  // namespace tessera

// Reading a whole file that a person named (a cluster, requests or hardware file) with a bound
// on its size, checked before anything is read: a huge file, even a sparse one that takes no
// disk, is refused at once instead of being read into memory first.
//
//   TESSERA_ASSIGN_OR_RETURN(std::string text,
//                            ReadFileUpTo(path, kMaxDescriptionFileBytes, "requests file"));
//   // a 3 GiB file: InvalidArgument, "requests file /tmp/r.yaml is 3 GiB (3221225472 bytes);
//   // the limit is 64 MiB"
//
// Thread-safe (plain functions).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera {

// The bound on the files that describe a cluster, its requests or a node's hardware.
inline constexpr uint64_t kMaxDescriptionFileBytes = uint64_t{64} << 20;

// The contents of `path`, which is at most `limit_bytes` long. Its size comes from fstat before
// any byte is read (a pipe or other file without a size is read only up to the limit).
// NotFound ("<what> <path>: cannot read the file: <reason>") when it cannot be opened;
// InvalidArgument, one line naming `what`, the path, its size and the limit, when it is larger
// (or grows past the limit while it is read) or is a folder.
absl::StatusOr<std::string> ReadFileUpTo(const std::string& path, uint64_t limit_bytes,
                                         absl::string_view what);

// "3 GiB (3221225472 bytes)": a size for a refusal, readable and exact.
std::string SizeForRefusal(uint64_t bytes);

}  // namespace tessera

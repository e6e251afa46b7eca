// libFuzzer target: unpacking any bytes as a working directory archive never crashes, never
// writes outside its root, and either fails with InvalidArgument or leaves a complete folder;
// an archive ValidateWorkingDirArchive (the submit-time check) refuses is never unpacked.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "node/working_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  static const std::string base =
      (fs::temp_directory_path() / ("tessera-working-dir-fuzz-" + std::to_string(::getpid())))
          .string();
  static const std::string root = base + "/root";
  const std::string archive(reinterpret_cast<const char*>(data), size);
  auto unpacked = tessera::UnpackWorkingDir(root, "job-1", archive);
  // One check at submission and at unpacking: what submission refuses is never unpacked.
  if (!tessera::ValidateWorkingDirArchive(archive).ok() && unpacked.ok()) std::abort();
  if (!unpacked.ok() && !absl::IsInvalidArgument(unpacked.status())) std::abort();
  if (unpacked.ok() && !fs::exists(*unpacked + "/.tessera-complete")) std::abort();
  if (!unpacked.ok() && fs::exists(root + "/job-1")) std::abort();  // nothing left behind
  std::error_code ec;
  // The base folder holds the root and nothing else: no entry escaped.
  for (const auto& entry : fs::directory_iterator(base, ec)) {
    if (entry.path().filename() != "root") std::abort();
  }
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (entry.path().filename() != "job-1") std::abort();
  }
  fs::remove_all(root + "/job-1", ec);
  return 0;
}

// FileTail: reads what has been appended to a file since the last read (a worker's log while it
// runs). A file that does not exist yet reads as empty until it appears.
// Not thread-safe: one reader owns it.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace tessera {

class FileTail {
 public:
  explicit FileTail(std::string path) : path_(std::move(path)) {}
  ~FileTail();
  FileTail(const FileTail&) = delete;
  FileTail& operator=(const FileTail&) = delete;

  // Up to `max_bytes` of new data ("" when nothing new). Errors name the file.
  absl::StatusOr<std::string> ReadNew(size_t max_bytes = 64 * 1024);

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace tessera

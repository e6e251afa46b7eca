#include "node/file_tail.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tessera {

FileTail::~FileTail() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<std::string> FileTail::ReadNew(size_t max_bytes) {
  if (fd_ < 0) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
      if (errno == ENOENT) return std::string();
      return absl::UnavailableError(
          absl::StrCat("cannot open ", path_, ": ", std::strerror(errno)));
    }
  }
  std::string data(max_bytes, '\0');
  while (true) {
    const ssize_t n = ::read(fd_, data.data(), data.size());
    if (n >= 0) {
      data.resize(static_cast<size_t>(n));
      return data;
    }
    if (errno != EINTR) {
      return absl::UnavailableError(
          absl::StrCat("cannot read ", path_, ": ", std::strerror(errno)));
    }
  }
}

}  // namespace tessera

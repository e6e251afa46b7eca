#include "base/file_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera {
namespace {

// The largest binary unit, at most two decimals ("3 GiB", "1.5 MiB", "512 B").
std::string Readable(uint64_t bytes) {
  static constexpr std::array<const char*, 6> kUnits = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  size_t index = 0;
  long double value = static_cast<long double>(bytes) / 1024;
  while (index + 1 < kUnits.size() && value >= 1024) {
    value /= 1024;
    ++index;
  }
  std::string text = absl::StrFormat("%.2Lf", value);
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return absl::StrCat(text, " ", kUnits[index]);
}

}  // namespace

std::string SizeForRefusal(uint64_t bytes) {
  if (bytes < 1024) return Readable(bytes);
  return absl::StrCat(Readable(bytes), " (", bytes, " bytes)");
}

absl::StatusOr<std::string> ReadFileUpTo(const std::string& path, uint64_t limit_bytes,
                                         absl::string_view what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrCat(what, " ", path, ": cannot read the file: ", std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is a folder, not a file"));
  }
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > limit_bytes) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, " is ", SizeForRefusal(static_cast<uint64_t>(st.st_size)),
                     "; the limit is ", Readable(limit_bytes)));
  }
  // What fstat said (a regular file), else the limit; one byte more shows a file that grew.
  const uint64_t expected = S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : limit_bytes;
  std::string data;
  data.resize(std::min<uint64_t>(expected, limit_bytes) + 1);
  size_t done = 0;
  while (true) {
    if (done == data.size()) {
      if (done > limit_bytes) break;
      data.resize(std::min<uint64_t>(limit_bytes + 1, data.size() * 2));
    }
    const ssize_t n = ::read(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      return absl::NotFoundError(
          absl::StrCat(what, " ", path, ": cannot read the file: ", std::strerror(error)));
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (done > limit_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, " holds more than the limit of ", Readable(limit_bytes)));
  }
  data.resize(done);
  return data;
}

}  // namespace tessera

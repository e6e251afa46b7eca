#include "process/file_util.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/string_util.h"
#include "process/unique_fd.h"

namespace tessera {

absl::Status ErrnoStatus(int err, std::string_view what) {
  std::string message = absl::StrCat(ToAbsl(what), ": ", strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR: return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
    case EROFS: return absl::PermissionDeniedError(message);
    case EEXIST: return absl::AlreadyExistsError(message);
    case EINVAL:
    case E2BIG:
    case ENAMETOOLONG: return absl::InvalidArgumentError(message);
    case EBUSY:
    case EAGAIN:
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case ENOSPC: return absl::ResourceExhaustedError(message);
    default: return absl::InternalError(message);
  }
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus(errno, absl::StrCat("cannot open ", path));
  std::string text;
  char buffer[4096];
  while (true) {
    ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, absl::StrCat("cannot read ", path));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

absl::Status WriteControlFile(const std::string& path, std::string_view text) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus(errno, absl::StrCat("cannot open ", path));
  ssize_t n;
  do {
    n = ::write(fd.get(), text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0)
    return ErrnoStatus(errno, absl::StrCat("cannot write \"", ToAbsl(Trim(text)), "\" to ", path));
  if (static_cast<size_t>(n) != text.size()) {
    return absl::InternalError(absl::StrCat("short write to ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> FindKeyedCounter(std::string_view text, std::string_view key) {
  for (absl::string_view line : absl::StrSplit(ToAbsl(text), '\n')) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() != 2 || fields[0] != ToAbsl(key)) continue;
    int64_t value = 0;
    if (!absl::SimpleAtoi(fields[1], &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("counter ", ToAbsl(key), " has a non-integer value \"", fields[1], "\""));
    }
    return value;
  }
  return absl::NotFoundError(absl::StrCat("no counter named ", ToAbsl(key)));
}

}  // namespace tessera

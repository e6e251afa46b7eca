#include "rpc/token.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/string_util.h"

namespace tessera::rpc {

namespace {

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  int err = errno;
  std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

// Writes all of `data`, retrying short writes and EINTR.
bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

absl::StatusOr<std::string> GenerateToken() {
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open", "/dev/urandom");
  unsigned char bytes[kTokenBytes];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = ::read(fd, bytes + got, sizeof(bytes) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status status = ErrnoError("cannot read", "/dev/urandom");
      ::close(fd);
      return status;
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  token.reserve(2 * kTokenBytes);
  for (unsigned char b : bytes) {
    token.push_back(kHex[b >> 4]);
    token.push_back(kHex[b & 0xf]);
  }
  return token;
}

absl::Status WriteTokenFile(const std::string& path, std::string_view token) {
  std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  // O_EXCL with mode 0600: the file is never readable by others, and a stale temporary from a
  // crashed writer is replaced below rather than reused with unknown permissions.
  ::unlink(tmp.c_str());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("cannot create token file", tmp);
  std::string content = absl::StrCat(ToAbsl(token), "\n");
  bool ok = WriteAll(fd, content) && ::fchmod(fd, 0600) == 0 && ::fsync(fd) == 0;
  absl::Status status = ok ? absl::OkStatus() : ErrnoError("cannot write token file", tmp);
  ::close(fd);
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = ErrnoError("cannot rename token file to", path);
  }
  if (!status.ok()) ::unlink(tmp.c_str());
  return status;
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open token file", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    absl::Status status = ErrnoError("cannot stat token file", path);
    ::close(fd);
    return status;
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    ::close(fd);
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return absl::PermissionDeniedError(
        absl::StrCat("token file ", path, " has mode ", mode,
                     "; it must not be readable by group or others (chmod 600 ", path, ")"));
  }
  std::string content;
  char buf[512];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status status = ErrnoError("cannot read token file", path);
      ::close(fd);
      return status;
    }
    if (n == 0) break;
    content.append(buf, static_cast<size_t>(n));
    if (content.size() > 4096) {
      ::close(fd);
      return absl::InvalidArgumentError(absl::StrCat("token file ", path, " is too large"));
    }
  }
  ::close(fd);
  std::string token(Trim(content));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("token file ", path, " is empty"));
  }
  for (char c : token) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(
          absl::StrCat("token file ", path, " holds a character that is not printable ASCII"));
    }
  }
  return token;
}

absl::StatusOr<std::string> ReadOrCreateTokenFile(const std::string& path) {
  absl::StatusOr<std::string> existing = ReadTokenFile(path);
  if (existing.ok() || existing.status().code() != absl::StatusCode::kNotFound) return existing;
  absl::StatusOr<std::string> token = GenerateToken();
  if (!token.ok()) return token.status();
  absl::Status written = WriteTokenFile(path, *token);
  if (!written.ok()) return written;
  return token;
}

bool TokensEqual(std::string_view a, std::string_view b) {
  // Length is not secret (every token is 64 hex characters); the contents are.
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  // Keep the compiler from turning the loop into an early-exit memcmp.
  volatile unsigned char result = diff;
  return result == 0;
}

}  // namespace tessera::rpc

#include "rpc/token.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "process/private_paths.h"
#include "process/unique_fd.h"

namespace tessera::rpc {

namespace {

constexpr size_t kMaxTokenFileBytes = 4096;

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  int err = errno;
  std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
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
  return WritePrivateFileAtomically(path, absl::StrCat(ToAbsl(token), "\n"));
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError("cannot open token file", path);
  if (absl::Status status = CheckPrivateFile(fd.get(), path); !status.ok()) {
    return absl::PermissionDeniedError(absl::StrCat("token file: ", status.message()));
  }
  std::string content;
  char buf[512];
  while (true) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("cannot read token file", path);
    if (n == 0) break;
    content.append(buf, static_cast<size_t>(n));
    // Bounded while reading: a huge (or endless) file costs at most this much.
    if (content.size() > kMaxTokenFileBytes) {
      return absl::InvalidArgumentError(absl::StrCat("token file ", path, " is larger than ",
                                                     kMaxTokenFileBytes,
                                                     " bytes; a token is one line of text"));
    }
  }
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

absl::StatusOr<std::string> DeriveScrapeToken(std::string_view token) {
  static constexpr std::string_view kLabel = "tessera metrics scrape v1";
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
           reinterpret_cast<const unsigned char*>(kLabel.data()), kLabel.size(), digest,
           &length) == nullptr) {
    return absl::InternalError("cannot derive the scrape token (HMAC-SHA256 failed)");
  }
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), length));
}

}  // namespace tessera::rpc

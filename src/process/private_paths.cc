#include "process/private_paths.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "process/file_util.h"

namespace tessera {

namespace {

std::string Mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

bool WritableByOthers(mode_t mode) { return (mode & (S_IWGRP | S_IWOTH)) != 0; }

// The real path of `path` (links and dot components resolved).
absl::StatusOr<std::string> RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) {
    return ErrnoStatus(errno, absl::StrCat("cannot resolve ", path));
  }
  return std::string(resolved);
}

absl::Status CheckAncestor(const std::string& folder, const std::string& below) {
  struct stat st {};
  if (::stat(folder.c_str(), &st) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot inspect ", folder));
  }
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return absl::PermissionDeniedError(absl::StrCat("refusing ", below, ": the folder above it, ",
                                                    folder, ", belongs to uid ", st.st_uid,
                                                    ", who could replace it"));
  }
  if (WritableByOthers(st.st_mode) && (st.st_mode & S_ISVTX) == 0) {
    return absl::PermissionDeniedError(absl::StrCat("refusing ", below, ": the folder above it, ",
                                                    folder, ", has mode ", Mode(st.st_mode),
                                                    " (writable by others and not sticky)"));
  }
  return absl::OkStatus();
}

std::string HomeFolder(const char* home) {
  if (home != nullptr && home[0] == '/') return home;
  std::vector<char> buffer(16384);
  passwd entry{};
  passwd* found = nullptr;
  if (::getpwuid_r(::geteuid(), &entry, buffer.data(), buffer.size(), &found) == 0 &&
      found != nullptr && found->pw_dir != nullptr && found->pw_dir[0] == '/') {
    return found->pw_dir;
  }
  return "";
}

}  // namespace

absl::Status CheckPrivateDirectory(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(const std::string real, RealPath(path));
  struct stat st {};
  if (::stat(real.c_str(), &st) != 0)
    return ErrnoStatus(errno, absl::StrCat("cannot inspect ", path));
  if (!S_ISDIR(st.st_mode)) {
    return absl::PermissionDeniedError(absl::StrCat("refusing ", path, ": it is not a folder"));
  }
  if (st.st_uid != ::geteuid()) {
    return absl::PermissionDeniedError(absl::StrCat("refusing ", path, ": it belongs to uid ",
                                                    st.st_uid, ", not to you (uid ", ::geteuid(),
                                                    ")"));
  }
  if (WritableByOthers(st.st_mode)) {
    return absl::PermissionDeniedError(
        absl::StrCat("refusing ", path, ": it has mode ", Mode(st.st_mode),
                     " (writable by group or others; chmod 700 ", path, ")"));
  }
  for (size_t slash = real.rfind('/'); slash != std::string::npos && slash > 0;
       slash = real.rfind('/', slash - 1)) {
    TESSERA_RETURN_IF_ERROR(CheckAncestor(real.substr(0, slash), path));
  }
  return CheckAncestor("/", path);
}

absl::Status EnsurePrivateDirectory(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("the folder name is empty");
  for (size_t end = path.find('/', 1);; end = path.find('/', end + 1)) {
    const std::string partial = path.substr(0, end);
    if (!partial.empty() && partial.back() != '/') {
      if (::mkdir(partial.c_str(), 0700) == 0) {
        // The umask may have narrowed it below 0700 (and must never widen it).
        if (::chmod(partial.c_str(), 0700) != 0) {
          return ErrnoStatus(errno, absl::StrCat("cannot set the mode of ", partial));
        }
      } else if (errno != EEXIST) {
        return ErrnoStatus(errno, absl::StrCat("cannot create folder ", partial));
      }
    }
    if (end == std::string::npos) break;
  }
  return CheckPrivateDirectory(path);
}

absl::Status CheckPrivateFile(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return ErrnoStatus(errno, absl::StrCat("cannot inspect ", path));
  if (!S_ISREG(st.st_mode)) {
    return absl::PermissionDeniedError(absl::StrCat("refusing ", path, ": not a regular file"));
  }
  if (st.st_uid != ::geteuid()) {
    return absl::PermissionDeniedError(absl::StrCat("refusing ", path, ": it belongs to uid ",
                                                    st.st_uid, ", not to you (uid ", ::geteuid(),
                                                    ")"));
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "refusing ", path, ": it has mode ", Mode(st.st_mode),
        " (it must not be readable or writable by group or others; chmod 600 ", path, ")"));
  }
  return absl::OkStatus();
}

absl::Status WritePrivateFileAtomically(const std::string& path, std::string_view content) {
  static std::atomic<uint64_t> sequence{0};
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid(), ".", sequence.fetch_add(1));
  ::unlink(tmp.c_str());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return ErrnoStatus(errno, absl::StrCat("cannot create ", tmp));
  absl::Status status;
  if (::fchmod(fd.get(), 0600) != 0) {
    status = ErrnoStatus(errno, absl::StrCat("cannot set the mode of ", tmp));
  }
  for (std::string_view rest = content; status.ok() && !rest.empty();) {
    const ssize_t n = ::write(fd.get(), rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status = ErrnoStatus(errno, absl::StrCat("cannot write ", tmp));
      break;
    }
    rest.remove_prefix(static_cast<size_t>(n));
  }
  if (status.ok() && ::fsync(fd.get()) != 0) {
    status = ErrnoStatus(errno, absl::StrCat("cannot sync ", tmp));
  }
  fd.Reset();
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = ErrnoStatus(errno, absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  if (!status.ok()) ::unlink(tmp.c_str());
  return status;
}

absl::StatusOr<UniqueFd> OpenPrivateFileForAppend(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return ErrnoStatus(errno, absl::StrCat("cannot open ", path));
  if (::fchmod(fd.get(), 0600) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot set the mode of ", path));
  }
  return fd;
}

std::string DefaultStateDirectory(const char* xdg_state_home, const char* home) {
  if (xdg_state_home != nullptr && xdg_state_home[0] == '/') {
    return absl::StrCat(xdg_state_home, "/tessera");
  }
  const std::string folder = HomeFolder(home);
  if (!folder.empty() && folder != "/") return absl::StrCat(folder, "/.local/state/tessera");
  // No home at all (a system account): a per-user name; CheckPrivateDirectory refuses it when
  // someone else created it first.
  return absl::StrCat("/tmp/tessera-", ::geteuid());
}

std::string DefaultStateDirectory() {
  return DefaultStateDirectory(std::getenv("XDG_STATE_HOME"), std::getenv("HOME"));
}

}  // namespace tessera

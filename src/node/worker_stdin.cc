#include "node/worker_stdin.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tessera {

WorkerStdinPipes::~WorkerStdinPipes() {
  absl::MutexLock lock(&mu_);
  for (auto& [worker, fd] : fds_) {
    ::close(fd);
    ::unlink(PathOf(worker).c_str());
  }
}

std::string WorkerStdinPipes::PathOf(const WorkerId& worker) const {
  return absl::StrCat(dir_, "/", worker.value(), ".in");
}

absl::StatusOr<std::string> WorkerStdinPipes::Open(const WorkerId& worker) {
  const std::string path = PathOf(worker);
  ::unlink(path.c_str());  // a worker id is never reused; a leftover is an old agent's
  if (::mkfifo(path.c_str(), 0600) != 0) {
    return absl::InternalError(absl::StrCat("cannot make ", path, ": ", std::strerror(errno)));
  }
  // Read and write: opening never waits for a reader, and the worker's open finds a writer.
  const int fd = ::open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    const int err = errno;
    ::unlink(path.c_str());
    return absl::InternalError(absl::StrCat("cannot open ", path, ": ", std::strerror(err)));
  }
  absl::MutexLock lock(&mu_);
  fds_[worker] = fd;
  return path;
}

absl::StatusOr<size_t> WorkerStdinPipes::Write(const WorkerId& worker, std::string_view data,
                                               bool close) {
  absl::MutexLock lock(&mu_);
  auto it = fds_.find(worker);
  if (it == fds_.end()) {
    return absl::NotFoundError(
        absl::StrCat("worker ", worker.value(), " has no stdin to write (closed, or none)"));
  }
  size_t written = 0;
  while (written < data.size()) {
    const ssize_t n = ::write(it->second, data.data() + written, data.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // full: the worker has not read yet
    written += static_cast<size_t>(n);
  }
  if (close && written == data.size()) {
    ::close(it->second);
    fds_.erase(it);
  }
  return written;
}

void WorkerStdinPipes::Forget(const WorkerId& worker) {
  absl::MutexLock lock(&mu_);
  auto it = fds_.find(worker);
  if (it != fds_.end()) {
    ::close(it->second);
    fds_.erase(it);
  }
  ::unlink(PathOf(worker).c_str());
}

}  // namespace tessera

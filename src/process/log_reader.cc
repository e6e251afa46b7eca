#include "process/log_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "process/file_util.h"

namespace tessera {
namespace {

absl::StatusOr<std::string> PreadUpTo(int fd, const std::string& path, int64_t offset,
                                      size_t max_bytes) {
  std::string data(max_bytes, '\0');
  size_t got = 0;
  while (got < max_bytes) {
    ssize_t n = ::pread(fd, data.data() + got, max_bytes - got, offset + static_cast<int64_t>(got));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, absl::StrCat("cannot read ", path));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  data.resize(got);
  return data;
}

}  // namespace

absl::StatusOr<LogSegment> ReadLog(const std::string& path, int64_t offset, size_t max_bytes) {
  if (offset < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("log offset must not be negative, got ", offset));
  if (max_bytes == 0) return absl::InvalidArgumentError("a log read needs max_bytes > 0");
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus(errno, absl::StrCat("cannot open log file ", path));
  TESSERA_ASSIGN_OR_RETURN(std::string data, PreadUpTo(fd.get(), path, offset, max_bytes));
  return LogSegment{offset, std::move(data)};
}

absl::StatusOr<std::unique_ptr<LogFollower>> LogFollower::Create(std::string path,
                                                                 LogFollowOptions options) {
  if (options.chunk_bytes == 0)
    return absl::InvalidArgumentError("a log follower needs chunk_bytes > 0");
  if (options.recheck_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("a log follower needs a positive recheck interval");
  }
  std::unique_ptr<LogFollower> follower(new LogFollower(std::move(path), options));
  follower->offset_ = std::max<int64_t>(options.offset, 0);
  follower->offset_resolved_ = options.offset >= 0;
  follower->wake_.Reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!follower->wake_.valid()) return ErrnoStatus(errno, "cannot create an eventfd");
  // inotify may be unavailable (limits reached, exotic file systems): polling still works.
  if (options.wait == LogFollowOptions::Wait::kInotify) {
    follower->inotify_.Reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  }
  TESSERA_ASSIGN_OR_RETURN(bool present, follower->OpenIfPresent());
  if (!present && follower->inotify_.valid()) {
    std::filesystem::path parent = std::filesystem::path(follower->path_).parent_path();
    std::string folder = parent.empty() ? std::string(".") : parent.string();
    follower->folder_watch_ = ::inotify_add_watch(follower->inotify_.get(), folder.c_str(),
                                                  IN_CREATE | IN_MOVED_TO | IN_ONLYDIR);
    if (follower->folder_watch_ < 0) follower->inotify_.Reset();
  }
  return follower;
}

absl::StatusOr<bool> LogFollower::OpenIfPresent() {
  if (file_.valid()) return true;
  UniqueFd fd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return false;
    return ErrnoStatus(errno, absl::StrCat("cannot open log file ", path_));
  }
  file_ = std::move(fd);
  if (inotify_.valid()) {
    // Watch by path right after opening: a write between the open and the watch is caught by
    // the read that follows, which always happens before sleeping.
    file_watch_ =
        ::inotify_add_watch(inotify_.get(), path_.c_str(), IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE);
    if (file_watch_ < 0) inotify_.Reset();
    // The folder (other workers' logs) no longer matters.
    if (folder_watch_ >= 0 && inotify_.valid()) ::inotify_rm_watch(inotify_.get(), folder_watch_);
    folder_watch_ = -1;
  }
  if (!offset_resolved_) {
    struct stat st;
    if (::fstat(file_.get(), &st) != 0)
      return ErrnoStatus(errno, absl::StrCat("cannot stat ", path_));
    offset_ = std::max<int64_t>(0, st.st_size + options_.offset);
    offset_resolved_ = true;
  }
  return true;
}

void LogFollower::Stop() {
  stopped_.store(true);
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_.get(), &one, sizeof(one));
  (void)ignored;
}

void LogFollower::WriterExited() {
  writer_exited_.store(true);
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_.get(), &one, sizeof(one));
  (void)ignored;
}

absl::StatusOr<std::optional<LogSegment>> LogFollower::Next() {
  return NextWithin(absl::InfiniteDuration());
}

absl::StatusOr<std::optional<LogSegment>> LogFollower::NextWithin(absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (stopped_.load()) return std::nullopt;
    // Read the flag before reading the file: bytes written before the writer exited are then
    // certainly in the file when the read comes back short.
    bool writer_exited = writer_exited_.load();
    TESSERA_ASSIGN_OR_RETURN(bool present, OpenIfPresent());
    if (present) {
      struct stat st;
      if (::fstat(file_.get(), &st) != 0)
        return ErrnoStatus(errno, absl::StrCat("cannot stat ", path_));
      // A file that shrank was truncated: start again from its beginning, as tail -f does.
      if (st.st_size < offset_) offset_ = 0;
      TESSERA_ASSIGN_OR_RETURN(std::string data,
                               PreadUpTo(file_.get(), path_, offset_, options_.chunk_bytes));
      if (!data.empty()) {
        LogSegment segment{offset_, std::move(data)};
        offset_ = segment.end();
        poll_pause_ = absl::Milliseconds(1);
        return segment;
      }
    }
    if (writer_exited) return std::nullopt;
    if (absl::Now() >= deadline) return LogSegment{offset_, ""};
    TESSERA_RETURN_IF_ERROR(WaitForChange(deadline));
  }
}

absl::Status LogFollower::WaitForChange(absl::Time deadline) {
  absl::Duration wait = inotify_.valid() ? options_.recheck_interval
                                         : std::min(poll_pause_, options_.recheck_interval);
  if (!inotify_.valid()) poll_pause_ = std::min(poll_pause_ * 2, options_.recheck_interval);
  wait = std::min(wait, std::max(deadline - absl::Now(), absl::ZeroDuration()));
  struct pollfd fds[2] = {{wake_.get(), POLLIN, 0}, {inotify_.get(), POLLIN, 0}};
  int count = inotify_.valid() ? 2 : 1;
  int ms = static_cast<int>(std::min<int64_t>(
      absl::ToInt64Milliseconds(absl::Ceil(wait, absl::Milliseconds(1))), 1 << 30));
  int rc = ::poll(fds, count, ms);
  if (rc < 0 && errno != EINTR) return ErrnoStatus(errno, "cannot poll for log changes");
  if (rc > 0 && (fds[0].revents & POLLIN)) {
    uint64_t value;
    ssize_t ignored = ::read(wake_.get(), &value, sizeof(value));
    (void)ignored;
  }
  if (rc > 0 && count == 2 && (fds[1].revents & POLLIN)) {
    alignas(struct inotify_event) char buffer[4096];
    while (::read(inotify_.get(), buffer, sizeof(buffer)) > 0) {
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera

#include "train/job_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/string_util.h"

namespace tessera::train {
namespace {

void WriteAll(int fd, std::string_view data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a full disk loses log lines, never the job
    done += static_cast<size_t>(n);
  }
}

// Creates `dir` 0700, or checks that the one there is a folder of this user (not a link).
// `tighten`: an existing folder is made 0700 too (the job's own; never a parent given to us).
absl::Status MakePrivateFolder(const std::string& dir, bool tighten) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", dir, ": ", std::strerror(errno)));
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
    return absl::PermissionDeniedError(
        absl::StrCat(dir, " is not a folder of this user (a link, or someone else's)"));
  }
  if (tighten) ::chmod(dir.c_str(), 0700);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<JobLog>> JobLog::Create(const std::string& dir) {
  const size_t slash = dir.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    if (absl::Status s = MakePrivateFolder(dir.substr(0, slash), false); !s.ok()) return s;
  }
  if (absl::Status s = MakePrivateFolder(dir, true); !s.ok()) return s;
  const std::string path = dir + "/job.log";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  struct stat st {};
  ::fstat(fd, &st);
  auto log = std::unique_ptr<JobLog>(new JobLog(dir, fd));
  absl::MutexLock lock(&log->mu_);
  log->size_ = static_cast<uint64_t>(st.st_size);
  if (log->size_ > 0) log->stretches_[log->size_] = false;
  return log;
}

JobLog::~JobLog() {
  Close();
  ::close(fd_);
  absl::MutexLock lock(&mu_);
  for (auto& [rank, fd] : rank_files_) ::close(fd);
  for (auto& [rank, fd] : offset_files_) ::close(fd);
}

void JobLog::AppendLocked(std::string_view data, bool is_stderr) {
  if (data.empty()) return;
  WriteAll(fd_, data);
  const uint64_t end = size_ + data.size();
  auto last = stretches_.empty() ? stretches_.end() : std::prev(stretches_.end());
  if (last != stretches_.end() && last->second == is_stderr) stretches_.erase(last);
  stretches_[end] = is_stderr;
  size_ = end;
}

void JobLog::WriteRankFileLocked(int rank, std::string_view data) {
  auto it = rank_files_.find(rank);
  if (it == rank_files_.end()) {
    const std::string path = absl::StrCat(dir_, "/rank-", rank, ".log");
    const int fd =
        ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return;
    it = rank_files_.emplace(rank, fd).first;
  }
  WriteAll(it->second, data);
}

void JobLog::WriteOffsetsLocked(int rank) {
  auto it = offset_files_.find(rank);
  if (it == offset_files_.end()) {
    const std::string path = absl::StrCat(dir_, "/rank-", rank, ".offsets");
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return;
    it = offset_files_.emplace(rank, fd).first;
  }
  auto logged = [&](bool is_stderr) {
    mu_.AssertHeld();  // run right here, under this function's lock
    return received_[{rank, is_stderr}] - partial_[{rank, is_stderr}].size();
  };
  // Fixed width: each write replaces the whole file's content in place.
  const std::string line = absl::StrFormat("%020u %020u\n", logged(false), logged(true));
  (void)::pwrite(it->second, line.data(), line.size(), 0);
}

void JobLog::RankOutput(int rank, bool is_stderr, std::string_view data) {
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  uint64_t& skip = skip_[{rank, is_stderr}];
  const size_t skipped = static_cast<size_t>(std::min<uint64_t>(skip, data.size()));
  skip -= skipped;
  data.remove_prefix(skipped);
  if (data.empty()) return;
  received_[{rank, is_stderr}] += data.size();
  std::string& partial = partial_[{rank, is_stderr}];
  const std::string prefix = absl::StrCat("[rank", rank, "]: ");
  std::string lines;
  std::string plain;
  size_t start = 0;
  while (start < data.size()) {
    const size_t newline = data.find('\n', start);
    if (newline == std::string_view::npos) {
      partial.append(data.substr(start));
      break;
    }
    const std::string_view line = data.substr(start, newline + 1 - start);
    absl::StrAppend(&lines, prefix, partial, ToAbsl(line));
    absl::StrAppend(&plain, partial, ToAbsl(line));
    partial.clear();
    start = newline + 1;
  }
  if (plain.empty()) return;
  AppendLocked(lines, is_stderr);
  WriteRankFileLocked(rank, plain);
  WriteOffsetsLocked(rank);
}

void JobLog::BeginRank(int rank) {
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  for (bool is_stderr : {false, true}) {
    received_[{rank, is_stderr}] = 0;
    skip_[{rank, is_stderr}] = 0;
    partial_[{rank, is_stderr}].clear();
  }
  WriteOffsetsLocked(rank);
}

void JobLog::ResumeRank(int rank) {
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  const std::string path = absl::StrCat(dir_, "/rank-", rank, ".offsets");
  std::string text(64, '\0');
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  const ssize_t n = fd < 0 ? 0 : ::pread(fd, text.data(), text.size(), 0);
  if (fd >= 0) ::close(fd);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  std::vector<std::string> fields =
      absl::StrSplit(absl::StripAsciiWhitespace(text), ' ', absl::SkipEmpty());
  uint64_t logged[2] = {0, 0};
  if (fields.size() == 2) {
    (void)absl::SimpleAtoi(fields[0], &logged[0]);
    (void)absl::SimpleAtoi(fields[1], &logged[1]);
  }
  for (bool is_stderr : {false, true}) {
    received_[{rank, is_stderr}] = logged[is_stderr];
    skip_[{rank, is_stderr}] = logged[is_stderr];
    partial_[{rank, is_stderr}].clear();
  }
}

void JobLog::EndRank(int rank) {
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  for (bool is_stderr : {false, true}) {
    auto it = partial_.find({rank, is_stderr});
    if (it == partial_.end() || it->second.empty()) continue;
    AppendLocked(absl::StrCat("[rank", rank, "]: ", it->second, "\n"), is_stderr);
    WriteRankFileLocked(rank, absl::StrCat(it->second, "\n"));
    it->second.clear();
  }
  WriteOffsetsLocked(rank);
}

void JobLog::Note(std::string_view line) {
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  AppendLocked(absl::StrCat("tessera: ", ToAbsl(line), "\n"), true);
}

uint64_t JobLog::size() const {
  absl::MutexLock lock(&mu_);
  return size_;
}

std::vector<LogChunk> JobLog::Read(uint64_t offset, size_t max_bytes) const {
  std::vector<LogChunk> chunks;
  std::map<uint64_t, bool> stretches;
  uint64_t size = 0;
  {
    absl::MutexLock lock(&mu_);
    size = size_;
    for (auto it = stretches_.upper_bound(offset); it != stretches_.end(); ++it) {
      stretches.insert(*it);
      if (it->first >= offset + max_bytes) break;
    }
  }
  const uint64_t end = offset + std::min<uint64_t>(max_bytes, size > offset ? size - offset : 0);
  const std::string path = dir_ + "/job.log";
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return chunks;
  uint64_t at = offset;
  for (const auto& [stretch_end, is_stderr] : stretches) {
    if (at >= end) break;
    const uint64_t until = std::min(stretch_end, end);
    if (until <= at) continue;
    LogChunk chunk;
    chunk.is_stderr = is_stderr;
    chunk.data.resize(until - at);
    const ssize_t n = ::pread(fd, chunk.data.data(), chunk.data.size(), static_cast<off_t>(at));
    if (n <= 0) break;
    chunk.data.resize(static_cast<size_t>(n));
    at += static_cast<uint64_t>(n);
    chunks.push_back(std::move(chunk));
  }
  ::close(fd);
  return chunks;
}

bool JobLog::AwaitGrowth(uint64_t offset, absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  auto grown = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return size_ > offset || closed_; };
  mu_.AwaitWithDeadline(absl::Condition(&grown), deadline);
  return size_ > offset;
}

void JobLog::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

bool JobLog::closed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

}  // namespace tessera::train

#include "hardware/plugins/common/kernel_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/string_util.h"

namespace tessera {
namespace {

// A /dev/kmsg record is at most about 8 KiB (its text and dictionary); a smaller buffer makes
// read() fail with EINVAL.
constexpr size_t kReadBuffer = 16 * 1024;
// A line longer than this without its end is not a record: dropped.
constexpr size_t kMaxLine = 64 * 1024;

}  // namespace

KernelLog::KernelLog(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) {
    error_ = absl::StrCat("cannot read the kernel log ", path_, ": ", std::strerror(errno));
    return;
  }
  // Only what is written from now on; a FIFO cannot seek and has no history anyway.
  (void)::lseek(fd_, 0, SEEK_END);
}

KernelLog::~KernelLog() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<KernelLogRecord> KernelLog::ReadNew(size_t max_records) {
  std::vector<KernelLogRecord> out;
  if (fd_ < 0) return out;
  std::vector<char> buffer(kReadBuffer);
  // Each read is one /dev/kmsg record, or a chunk of a file's lines: bounded either way.
  for (size_t reads = 0; reads < max_records && out.size() < max_records; ++reads) {
    const ssize_t n = ::read(fd_, buffer.data(), buffer.size());
    if (n == 0) break;  // the end of a file, or a FIFO without a writer
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;
      if (errno == EPIPE) {  // overwritten before we read it; the next read resumes
        ++lost_;
        continue;
      }
      error_ = absl::StrCat("cannot read the kernel log ", path_, ": ", std::strerror(errno));
      ::close(fd_);
      fd_ = -1;
      break;
    }
    partial_.append(buffer.data(), static_cast<size_t>(n));
    size_t start = 0;
    for (size_t end = partial_.find('\n'); end != std::string::npos;
         end = partial_.find('\n', start)) {
      TakeLine(std::string_view(partial_).substr(start, end - start), out);
      start = end + 1;
    }
    partial_.erase(0, start);
    if (partial_.size() > kMaxLine) partial_.clear();
  }
  return out;
}

void KernelLog::TakeLine(std::string_view line, std::vector<KernelLogRecord>& out) {
  if (line.empty() || line[0] == ' ') return;  // a continuation line (" KEY=VALUE")
  const size_t semicolon = line.find(';');
  if (semicolon == std::string_view::npos) return;
  // prio,seq,ts_usec,flags[,more]
  const std::vector<absl::string_view> header =
      absl::StrSplit(ToAbsl(line.substr(0, semicolon)), ',');
  uint64_t seq = 0;
  if (header.size() < 4 || !absl::SimpleAtoi(header[1], &seq)) return;
  if (have_seq_ && seq > last_seq_ + 1) lost_ += seq - last_seq_ - 1;
  have_seq_ = true;
  last_seq_ = seq;
  out.push_back(KernelLogRecord{seq, std::string(line.substr(semicolon + 1))});
}

std::string KernelLogPath(const DeviceErrorContext& context) {
  if (!context.options.kernel_log.empty()) return context.options.kernel_log;
  return context.sysroot.is_live() ? "/dev/kmsg" : "";
}

}  // namespace tessera

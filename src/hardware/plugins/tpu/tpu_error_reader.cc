#include "hardware/plugins/tpu/tpu_error_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/string_util.h"

namespace tessera {
namespace {

constexpr char kFilePrefix[] = "file:";
constexpr size_t kMaxEntriesScanned = 1024;
constexpr size_t kMaxFiles = 64;
constexpr size_t kTailBytes = 4096;
constexpr size_t kMaxLines = 3;
constexpr size_t kMaxLineLength = 200;

struct LogFile {
  std::string name;
  uint64_t size = 0;
  absl::Time modified;
};

bool Trusted(const struct stat& st) {
  return S_ISREG(st.st_mode) && (st.st_uid == ::geteuid() || st.st_uid == 0);
}

// The newest kMaxFiles regular files of `dir` that this user may trust, oldest first.
std::vector<LogFile> ListLogs(const std::string& dir) {
  std::vector<LogFile> files;
  std::error_code ec;
  size_t scanned = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (++scanned > kMaxEntriesScanned) break;
    struct stat st {};
    const std::string name = entry.path().filename().string();
    if (::lstat(entry.path().c_str(), &st) != 0 || !Trusted(st)) continue;
    files.push_back(
        LogFile{name, static_cast<uint64_t>(st.st_size), absl::TimeFromTimespec(st.st_mtim)});
  }
  std::sort(files.begin(), files.end(),
            [](const LogFile& a, const LogFile& b) { return a.modified < b.modified; });
  if (files.size() > kMaxFiles) files.erase(files.begin(), files.end() - kMaxFiles);
  return files;
}

// The bytes of `path` from `from` to its end, at most the last kTailBytes of them; through the
// file itself (no link followed, checked again once open). Sets `cut` when the start was cut.
std::string ReadTail(const std::string& path, uint64_t from, bool& cut) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "";
  std::string data;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && Trusted(st) && static_cast<uint64_t>(st.st_size) > from) {
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    const uint64_t start = std::max<uint64_t>(from, size > kTailBytes ? size - kTailBytes : 0);
    cut = start > from;
    data.resize(size - start);
    const ssize_t n = ::pread(fd, data.data(), data.size(), static_cast<off_t>(start));
    data.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(fd);
  return data;
}

// glog's error and fatal lines: "E1203 14:05:09.123456 ..." and "F...".
bool IsErrorLine(std::string_view line) {
  if (line.size() < 5 || (line[0] != 'E' && line[0] != 'F')) return false;
  return std::all_of(line.begin() + 1, line.begin() + 5,
                     [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); });
}

class TpuErrorReader final : public DeviceErrorReader {
 public:
  explicit TpuErrorReader(std::string dir) : dir_(std::move(dir)) {}

  DeviceErrorSnapshot Snapshot(std::span<const Device> /*devices*/, absl::Time now) override {
    DeviceErrorSnapshot snapshot;
    snapshot.taken = now;
    if (dir_.empty()) return snapshot;
    for (const LogFile& file : ListLogs(dir_)) {
      snapshot.marks[absl::StrCat(kFilePrefix, file.name)] = file.size;
    }
    return snapshot;
  }

  DeviceErrorReport MessagesSince(const DeviceErrorSnapshot& snapshot,
                                  std::span<const Device> devices, absl::Time /*now*/) override {
    DeviceErrorReport report;
    if (dir_.empty() || devices.empty()) return report;
    struct Line {
      std::string file;
      std::string text;
    };
    std::vector<Line> lines;
    for (const LogFile& file : ListLogs(dir_)) {
      uint64_t from = 0;
      if (auto mark = snapshot.marks.find(absl::StrCat(kFilePrefix, file.name));
          mark != snapshot.marks.end()) {
        from = mark->second <= file.size ? mark->second : 0;  // smaller: rewritten since
      } else if (file.modified < snapshot.taken) {
        continue;  // not written during the worker's life
      }
      if (file.size <= from) continue;
      bool cut = false;
      const std::string data = ReadTail(absl::StrCat(dir_, "/", file.name), from, cut);
      std::vector<std::string_view> parts;
      for (absl::string_view part : absl::StrSplit(data, '\n')) parts.push_back(ToStd(part));
      for (size_t i = cut ? 1 : 0; i < parts.size(); ++i) {  // a cut start is half a line
        const std::string_view text = Trim(parts[i]);
        if (!text.empty()) lines.push_back(Line{file.name, std::string(text)});
      }
    }
    const bool any_errors =
        std::any_of(lines.begin(), lines.end(), [](const Line& l) { return IsErrorLine(l.text); });
    std::vector<Line> chosen;
    for (Line& line : lines) {
      if (!any_errors || IsErrorLine(line.text)) chosen.push_back(std::move(line));
    }
    if (chosen.size() > kMaxLines) chosen.erase(chosen.begin(), chosen.end() - kMaxLines);
    for (const Line& line : chosen) {
      std::string text = line.text.size() > kMaxLineLength
                             ? line.text.substr(0, kMaxLineLength) + "..."
                             : line.text;
      report.messages.push_back(absl::StrCat("TPU runtime log ", line.file, ": ", text));
    }
    return report;
  }

 private:
  const std::string dir_;
};

}  // namespace

std::string TpuLogDir(const DeviceErrorContext& context) {
  if (!context.options.tpu_log_dir.empty()) return context.options.tpu_log_dir;
  return context.sysroot.is_live() ? "/tmp/tpu_logs" : "";
}

std::unique_ptr<DeviceErrorReader> MakeTpuErrorReader(const DeviceErrorContext& context) {
  return std::make_unique<TpuErrorReader>(TpuLogDir(context));
}

}  // namespace tessera

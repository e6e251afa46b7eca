#include "node/worker_watchdog.h"

#include <dirent.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tessera {
namespace {

std::string Seconds(absl::Duration d) {
  return absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(1)));
}

uint64_t FileSize(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_size);
}

// Session id and utime + stime of /proc/<pid>/stat; false when it cannot be read. The command
// (field 2) may hold spaces and parentheses: the fields after it start after the last ')'.
bool ReadStat(const std::string& path, int64_t* session, uint64_t* ticks) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return false;
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  std::vector<std::string> fields = absl::StrSplit(line.substr(close + 2), ' ');
  // After the command: state(3) ppid(4) pgrp(5) session(6) ... utime(14) stime(15).
  if (fields.size() < 13) return false;
  uint64_t utime = 0;
  uint64_t stime = 0;
  if (!absl::SimpleAtoi(fields[3], session) || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return false;
  }
  *ticks = utime + stime;
  return true;
}

class ProcProgressProbe final : public WorkerProgressProbe {
 public:
  explicit ProcProgressProbe(std::string root) : root_(std::move(root)) {}

  std::optional<WorkerProgress> Sample(int pid, const std::string& stdout_path,
                                       const std::string& stderr_path) override {
    int64_t session = 0;
    uint64_t own = 0;
    if (!ReadStat(absl::StrCat(root_, "/", pid, "/stat"), &session, &own)) return std::nullopt;
    WorkerProgress progress;
    progress.cpu_ticks = own;
    // The worker leads its own session (the launcher's setsid): its children are in it too.
    if (DIR* dir = ::opendir(root_.c_str()); dir != nullptr) {
      while (dirent* entry = ::readdir(dir)) {
        int other = 0;
        if (!absl::SimpleAtoi(entry->d_name, &other) || other == pid) continue;
        int64_t other_session = 0;
        uint64_t ticks = 0;
        if (ReadStat(absl::StrCat(root_, "/", other, "/stat"), &other_session, &ticks) &&
            other_session == pid) {
          progress.cpu_ticks += ticks;
        }
      }
      ::closedir(dir);
    }
    progress.output_bytes = FileSize(stdout_path) + FileSize(stderr_path);
    return progress;
  }

 private:
  const std::string root_;
};

}  // namespace

std::unique_ptr<WorkerProgressProbe> MakeProcProgressProbe(std::string proc_root) {
  return std::make_unique<ProcProgressProbe>(std::move(proc_root));
}

WorkerWatchdog::WorkerWatchdog(WatchdogOptions options, std::unique_ptr<WorkerProgressProbe> probe)
    : options_(options), probe_(std::move(probe)) {}

void WorkerWatchdog::Add(const WatchedWorker& worker, absl::Time now) {
  if (!worker.stop_when_unwatched && worker.hang_timeout <= absl::ZeroDuration()) return;
  absl::MutexLock lock(&mu_);
  Entry& entry = entries_[worker.id];
  entry.worker = worker;
  entry.unwatched_since = now;
  entry.progressed_at = now;
}

void WorkerWatchdog::Remove(const WorkerId& id) {
  absl::MutexLock lock(&mu_);
  entries_.erase(id);
}

void WorkerWatchdog::WatchStarted(const WorkerId& id) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  ++it->second.watchers;
  it->second.ever_watched = true;
}

void WorkerWatchdog::WatchEnded(const WorkerId& id, absl::Time now) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.watchers == 0) return;
  if (--it->second.watchers == 0) it->second.unwatched_since = now;
}

size_t WorkerWatchdog::tracked() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

std::vector<WatchdogVerdict> WorkerWatchdog::Check(absl::Time now) {
  std::vector<WatchedWorker> hang_checked;
  std::vector<WatchdogVerdict> verdicts;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      Entry& e = it->second;
      if (e.worker.stop_when_unwatched && e.watchers == 0) {
        const absl::Duration grace =
            e.ever_watched ? options_.unwatched_grace : options_.first_watch_grace;
        if (now - e.unwatched_since >= grace) {
          verdicts.push_back({e.worker.id,
                              e.ever_watched ? "as its owner stopped watching it"
                                             : absl::StrCat("as nobody watched it within ",
                                                            Seconds(grace), " of its start"),
                              false});
          it = entries_.erase(it);
          continue;
        }
      }
      if (e.worker.hang_timeout > absl::ZeroDuration()) hang_checked.push_back(e.worker);
      ++it;
    }
  }
  // /proc is read without the lock.
  std::vector<std::pair<WorkerId, std::optional<WorkerProgress>>> samples;
  for (const WatchedWorker& w : hang_checked) {
    samples.emplace_back(w.id, probe_->Sample(w.pid, w.stdout_path, w.stderr_path));
  }
  absl::MutexLock lock(&mu_);
  for (auto& [id, sample] : samples) {
    auto it = entries_.find(id);
    if (it == entries_.end() || !sample.has_value()) continue;  // gone: its exit will say so
    Entry& e = it->second;
    if (!e.last.has_value() || *e.last != *sample) {
      e.last = sample;
      e.progressed_at = now;
      continue;
    }
    if (now - e.progressed_at >= e.worker.hang_timeout) {
      verdicts.push_back(
          {id,
           absl::StrCat("as hung: no output and no CPU time for ", Seconds(now - e.progressed_at),
                        " (hang timeout ", Seconds(e.worker.hang_timeout), ")"),
           true});
      entries_.erase(it);
    }
  }
  return verdicts;
}

}  // namespace tessera

// JobLog: the logs of one job, kept in its folder on the head's host (docs/train.md):
//   job.log        every rank's output, line by line, prefixed "[rank3]: " as torchrun's --tee
//                  does, and the controller's own lines ("tessera: ..."), in the order written
//   rank-<R>.log   rank R's own output, unprefixed, across restarts (whole lines, as job.log)
//   rank-<R>.offsets  how many bytes of the stdout and stderr of rank R's current worker are in
//                  the logs (whole lines): a head restarted while the worker runs watches it
//                  again from its start and skips those (ResumeRank), so no line is logged twice
// Readers follow job.log by offset; which stretches of it came from stderr is kept in memory
// (lost with the head: a later reader sees them as stdout).
//
// Thread-safe: one mutex; writers are the rank watchers and the controller, readers the log
// streams.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tessera::train {

struct LogChunk {
  std::string data;
  bool is_stderr = false;
};

class JobLog {
 public:
  // Creates `dir` (mode 0700; a folder that exists must be this user's and not a link) and
  // job.log in it (mode 0600).
  static absl::StatusOr<std::unique_ptr<JobLog>> Create(const std::string& dir);
  ~JobLog();

  const std::string& dir() const { return dir_; }

  // Output of `rank`: complete lines are written at once, a partial line waits for its end (or
  // for EndRank).
  void RankOutput(int rank, bool is_stderr, std::string_view data);
  // A new worker of `rank` starts (an attempt): its streams are counted from their first byte.
  void BeginRank(int rank);
  // The worker of `rank` is watched again by a restarted head, and the watch replays its output
  // from the start: the bytes rank-<R>.offsets says were logged are skipped.
  void ResumeRank(int rank);
  // Writes what is left of the rank's partial lines (a rank that exited, or restarts).
  void EndRank(int rank);
  // One line of the controller's, as "tessera: <line>" (stderr).
  void Note(std::string_view line);

  uint64_t size() const;
  // job.log from `offset`, at most `max_bytes`, split where the stream changes.
  std::vector<LogChunk> Read(uint64_t offset, size_t max_bytes) const;
  // Waits until job.log is longer than `offset`, the log is closed, or `deadline`; true when it
  // grew.
  bool AwaitGrowth(uint64_t offset, absl::Time deadline) const;
  // No more writes; wakes the waiting readers.
  void Close();
  bool closed() const;

 private:
  JobLog(std::string dir, int fd) : dir_(std::move(dir)), fd_(fd) {}
  void AppendLocked(std::string_view data, bool is_stderr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriteRankFileLocked(int rank, std::string_view data) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // rank-<R>.offsets: the bytes of each stream of the rank's worker in the logs.
  void WriteOffsetsLocked(int rank) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string dir_;
  const int fd_;
  mutable absl::Mutex mu_;
  uint64_t size_ ABSL_GUARDED_BY(mu_) = 0;
  // Where each stretch of one stream ends: end offset -> is_stderr (consecutive stretches of
  // the same stream are merged).
  std::map<uint64_t, bool> stretches_ ABSL_GUARDED_BY(mu_);
  // Partial lines per (rank, is_stderr).
  std::map<std::pair<int, bool>, std::string> partial_ ABSL_GUARDED_BY(mu_);
  std::map<int, int> rank_files_ ABSL_GUARDED_BY(mu_);    // rank -> fd
  std::map<int, int> offset_files_ ABSL_GUARDED_BY(mu_);  // rank -> fd
  // Per (rank, is_stderr): bytes of the worker's stream received (partial line included), and
  // bytes of a replayed stream still to skip (ResumeRank).
  std::map<std::pair<int, bool>, uint64_t> received_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<int, bool>, uint64_t> skip_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tessera::train

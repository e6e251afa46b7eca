// Reading worker log files: one bounded read from an offset (ReadLogs without follow), and a
// follower that streams what is appended, like `tail -f`, until it is stopped or the writer is
// known to have exited and every byte has been read (ReadLogs(follow) and WatchWorker).
//
// The follower sleeps on inotify (IN_MODIFY on the file, or IN_CREATE on its folder until the
// file exists) and an eventfd for Stop/WriterExited; it also re-checks the file every
// `recheck_interval` in case an event was missed. Without inotify it polls with a backoff capped
// at that interval. It never spins.
//
// Thread-safety: ReadLog is stateless. A LogFollower's Next is called from one thread at a time;
// Stop and WriterExited may be called from any thread at any time, also while Next blocks.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "process/unique_fd.h"

namespace tessera {

// Bytes of a log file and where they start.
struct LogSegment {
  int64_t offset = 0;
  std::string data;
  int64_t end() const { return offset + static_cast<int64_t>(data.size()); }
};

// Up to `max_bytes` from `offset` (empty at or past the end). NotFound when the file does not
// exist; InvalidArgument for a negative offset or max_bytes of 0.
absl::StatusOr<LogSegment> ReadLog(const std::string& path, int64_t offset, size_t max_bytes);

struct LogFollowOptions {
  // Where to start. Negative: that many bytes before the end of the file as it is now (a tail).
  int64_t offset = 0;
  // The most bytes one Next returns.
  size_t chunk_bytes = 64 * 1024;
  // The longest sleep without looking at the file (a safety net for missed events).
  absl::Duration recheck_interval = absl::Seconds(1);
  // How changes are waited for; polling is the fallback where inotify is not available.
  enum class Wait { kInotify, kPolling };
  Wait wait = Wait::kInotify;
};

class LogFollower {
 public:
  // The file need not exist yet (a worker's log appears when it starts).
  static absl::StatusOr<std::unique_ptr<LogFollower>> Create(std::string path,
                                                             LogFollowOptions options = {});
  LogFollower(const LogFollower&) = delete;
  LogFollower& operator=(const LogFollower&) = delete;

  // The next bytes, waiting for them as long as it takes. nullopt at the end: Stop was called,
  // or the writer exited and everything has been read.
  absl::StatusOr<std::optional<LogSegment>> Next();
  // As Next, but returns an empty segment when nothing came within `timeout` (so a server can
  // check whether its client is still there).
  absl::StatusOr<std::optional<LogSegment>> NextWithin(absl::Duration timeout);

  // Ends the stream now; a blocked Next returns nullopt.
  void Stop();
  // The writer has exited: once the bytes already written are read, Next returns nullopt.
  void WriterExited();

  // Where the next read starts.
  int64_t offset() const { return offset_; }
  // Whether changes are waited for with inotify (else with polling).
  bool uses_inotify() const { return inotify_.valid(); }

 private:
  LogFollower(std::string path, LogFollowOptions options)
      : path_(std::move(path)), options_(options) {}
  // Opens the file and watches it when it exists; false while it does not.
  absl::StatusOr<bool> OpenIfPresent();
  // Sleeps until something may have changed or `deadline` passes.
  absl::Status WaitForChange(absl::Time deadline);

  const std::string path_;
  const LogFollowOptions options_;
  int64_t offset_ = 0;
  bool offset_resolved_ = false;  // a negative start offset is resolved when the file opens
  UniqueFd file_;
  UniqueFd inotify_;
  UniqueFd wake_;
  int file_watch_ = -1;
  int folder_watch_ = -1;
  absl::Duration poll_pause_ = absl::Milliseconds(1);  // without inotify
  std::atomic<bool> stopped_{false};
  std::atomic<bool> writer_exited_{false};
};

}  // namespace tessera

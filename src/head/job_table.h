// JobTable: the jobs `tessera run` records (one per run: its command, node, worker, state and
// end), kept in the StateStore (table "jobs", a v1::JobInfo per job id) and read back by a
// restarted head. Every running job is kept, and the newest max_ended of those that ended; the
// rest are forgotten, in the store too. A job on a node declared dead is failed as presumed
// until its recorder reports its real end, which then replaces the presumption.
//
// Thread-safety: one mutex of its own; taken after the cluster's lock (a node's death fails its
// jobs under it), never before it. Cost: Record O(log n) plus one store write; FailJobsOn
// O(jobs); Page O(page).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "head/event_log.h"
#include "head/store_writer.h"
#include "tessera/v1/head.pb.h"
#include "vocabulary/ids.h"

namespace tessera {

enum class JobState { kRunning, kSucceeded, kFailed };

struct JobRecord {
  JobId job_id;
  std::vector<std::string> argv;
  std::string node_id;
  std::string worker_id;
  JobState state = JobState::kRunning;
  std::string exit_reason;
  int64_t start_time_ms = 0;
  int64_t end_time_ms = 0;
  // Failed by the head (its node was declared dead), not by the job's end.
  bool failure_presumed = false;
};

// What a recorder reports: a new job, or fields that replace the stored ones (empty / 0 /
// nullopt: not given). The id is the protocol's text, as the request carried it (Record makes
// it a JobId once it is known not to be empty).
struct JobReport {
  std::string job_id;
  std::vector<std::string> argv;
  std::string node_id;
  std::string worker_id;
  std::optional<JobState> state;  // a new job without one is running
  std::string exit_reason;
  int64_t start_time_ms = 0;
  int64_t end_time_ms = 0;
};

struct JobTableOptions {
  Clock* clock = nullptr;         // required
  StoreWriter* writer = nullptr;  // required
  EventLog* events = nullptr;     // required
  size_t max_ended = 1000;
};

class JobTable {
 public:
  explicit JobTable(JobTableOptions options) : options_(options) {}

  // Creates or updates the job (see JobReport). A job that ended stays as it ended, except a
  // presumed failure, which the job's real end replaces. InvalidArgument for an empty id;
  // UNAVAILABLE, changing nothing, when the state store does not take the record
  // (StoreWriter::Write). Returns the record as stored (even when retention forgets it at once).
  absl::StatusOr<JobRecord> Record(const JobReport& report) ABSL_LOCKS_EXCLUDED(mu_);
  // Running jobs on `node` fail, as presumed; returns how many.
  int FailJobsOn(const std::string& node, const std::string& reason) ABSL_LOCKS_EXCLUDED(mu_);
  // In the order jobs were first recorded: up to `limit` jobs after position `after` (0: from
  // the start), each with its position; *more says whether others follow.
  std::vector<std::pair<int64_t, JobRecord>> Page(int64_t after, size_t limit, bool* more) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Reads back a previous head's table (ordered by start time). Call once, before serving.
  // DataLoss naming the key when a record cannot be read.
  absl::Status Restore() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    JobRecord record;
    int64_t order = 0;  // when the head first recorded it
  };
  void Persist(const JobRecord& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NoteEnded(const JobId& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgetOldEnded() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  JobTableOptions options_;
  mutable absl::Mutex mu_;
  std::map<JobId, Entry> jobs_ ABSL_GUARDED_BY(mu_);        // by job id
  std::map<int64_t, JobId> in_order_ ABSL_GUARDED_BY(mu_);  // order -> job id
  std::deque<JobId> ended_ ABSL_GUARDED_BY(mu_);            // ended job ids, earliest end first
  int64_t next_order_ ABSL_GUARDED_BY(mu_) = 1;
};

// The protocol's JobInfo (the stored record's format and the RPCs' answer) and its states;
// UNSPECIFIED and unknown numbers are no state.
void JobRecordToProto(const JobRecord& job, v1::JobInfo* info);
v1::JobState JobStateToProto(JobState state);
std::optional<JobState> JobStateFromProto(v1::JobState state);

}  // namespace tessera

// TaskEventStore: the ended task runs drivers report (HeadJobs.ReportTaskEvents), kept per job for
// `tessera timeline`: the newest max_per_job runs of each job, for the max_jobs jobs that
// reported last (a job that has not reported for longest is forgotten first). Every run a job
// reports gets the next index of that job, so a reader pages through with Get(after = the
// previous answer's next) even while older runs are let go. It also counts every run reported,
// by kind and outcome, for the head's /metrics (tessera_tasks_total).
//
// Thread-safety: one mutex of its own (a leaf lock). Cost: Report O(events + log jobs); Get
// O(log jobs + result); Counts O(kinds x outcomes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "tessera/v1/head.pb.h"

namespace tessera {

struct TaskEventStoreOptions {
  size_t max_per_job = 100000;
  size_t max_jobs = 64;
};

struct TaskEventPage {
  std::string job_id;
  std::vector<v1::TaskEvent> events;
  int64_t next = 0;
  bool more = false;
  int64_t dropped = 0;  // reported as dropped, plus let go here
};

class TaskEventStore {
 public:
  explicit TaskEventStore(TaskEventStoreOptions options = {}) : options_(options) {}

  void Report(const std::string& job_id, std::vector<v1::TaskEvent> events, int64_t dropped)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Up to `limit` runs of `job_id` ("" : the job that reported last) from index `after` on.
  // NotFound-like: an empty page with job_id "" when the store has no such job.
  TaskEventPage Get(const std::string& job_id, int64_t after, size_t limit) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Runs reported so far by (kind, outcome class): "ok", "error", "retried", "worker_died",
  // "cancelled" (OutcomeClass).
  std::map<std::pair<std::string, std::string>, int64_t> Counts() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Job {
    std::deque<v1::TaskEvent> events;
    int64_t first_index = 0;  // the index of events.front()
    int64_t dropped = 0;
    std::list<std::string>::iterator recency;
  };

  const TaskEventStoreOptions options_;
  mutable absl::Mutex mu_;
  std::map<std::string, Job, std::less<>> jobs_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> by_recency_ ABSL_GUARDED_BY(mu_);  // the last reporter first
  std::map<std::pair<std::string, std::string>, int64_t> counts_ ABSL_GUARDED_BY(mu_);
};

// The first word of a TaskEvent outcome as a label value: "ok", "error", "retried",
// "worker_died", "cancelled"; "other" for anything else.
std::string OutcomeClass(const std::string& outcome);

}  // namespace tessera

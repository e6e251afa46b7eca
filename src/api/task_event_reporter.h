// TaskEventReporter: the driver's side of timelines. The task submitter hands it the runs that
// ended (Add, a batch at a time, never blocking: one short lock per batch, plain records moved);
// a thread of its own turns what has gathered into TaskEvents and sends them to the head every
// `interval` (HeadJobs.ReportTaskEvents, at most kMaxEventsPerReport a call) and the rest
// at Stop. Timelines are best effort and never slow the work: past max_pending runs waiting to be
// sent, new ones are dropped, and a report the head does not take is dropped too; both are
// counted and the next report tells the head how many (GetTaskEventsResponse.dropped).
//
// Threading: thread-safe. One thread of its own, from construction until Stop (or destruction).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "api/task_run.h"
#include "tessera/v1/head.grpc.pb.h"

namespace tessera::api {

inline constexpr size_t kMaxEventsPerReport = 10000;  // the head's bound (request_limits.h)

struct TaskEventReporterOptions {
  std::string job_id;  // the job the runs belong to (its timeline)
  absl::Duration interval = absl::Seconds(1);
  size_t max_pending = 100000;
};

class TaskEventReporter {
 public:
  // `head` must outlive this object.
  TaskEventReporter(v1::HeadJobs::Stub* head, TaskEventReporterOptions options);
  ~TaskEventReporter();  // Stop()
  TaskEventReporter(const TaskEventReporter&) = delete;
  TaskEventReporter& operator=(const TaskEventReporter&) = delete;

  // Takes the runs (moved out of `runs`, which is left empty).
  void Add(std::vector<TaskRun>& runs) ABSL_LOCKS_EXCLUDED(mu_);
  // Sends what is waiting (each call bounded by a few seconds), then ends the thread.
  // Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // Runs dropped so far (not sent, or not taken by the head).
  int64_t dropped() const ABSL_LOCKS_EXCLUDED(mu_);

  // Sends everything waiting now, in reports of at most kMaxEventsPerReport (a timeline asked
  // for is then complete). Blocks for the calls.
  void Flush() ABSL_LOCKS_EXCLUDED(mu_, flush_mu_);

 private:
  v1::HeadJobs::Stub* const head_;
  const TaskEventReporterOptions options_;
  mutable absl::Mutex mu_;
  std::vector<TaskRun> pending_ ABSL_GUARDED_BY(mu_);
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;             // all so far
  int64_t dropped_unreported_ ABSL_GUARDED_BY(mu_) = 0;  // not yet told to the head
  absl::Mutex flush_mu_;  // one flush at a time (the thread's, or Stop's last)
  // The runs of the report being sent; emptied after, its capacity kept for the next swap.
  std::vector<TaskRun> sending_ ABSL_GUARDED_BY(flush_mu_);
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace tessera::api

// EventLog: the head's stream of cluster changes, newest last, the oldest dropped past a bound.
// Two sorts share one stream:
// - notices (Record): what needs a user's attention — nodes declared dead and what ran on them,
//   reservations lost or restored, bundles released by reconciliation, drivers gone, failed
//   state-store writes, agents refused;
// - changes (RecordChange): the ordinary life of the cluster — nodes joining, reservations made
//   and removed, jobs starting and ending, gang ranks starting, failing and restarting.
// Each event has a sequence number (from 1, never reused while the head runs), the time it was
// recorded and a kind ("node", "reservation", "job", "worker", "actor", "driver", "head"), so a
// reader follows the stream with Since(last seen). `tessera status` shows the notices;
// `tessera events` and the dashboard follow the whole stream.
//
// Thread-safety: one mutex of its own, held only to copy events (a leaf lock: taken after any
// other head lock, never before one). Cost: Record O(1), List O(events), Since O(log + result).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"

namespace tessera {

struct HeadEvent {
  int64_t seq = 0;
  absl::Time time;
  std::string kind;
  std::string message;
  bool notice = true;  // Record (a notice) rather than RecordChange
};

class EventLog {
 public:
  // Events are stamped by `clock` (not owned; the head's).
  EventLog(size_t max_events, Clock* clock) : max_events_(max_events), clock_(clock) {}

  // A notice.
  void Record(std::string message, std::string kind = "head") ABSL_LOCKS_EXCLUDED(mu_);
  // A change: in the stream (Since), not among the notices (List).
  void RecordChange(std::string message, std::string kind) ABSL_LOCKS_EXCLUDED(mu_);
  // The notices' messages, oldest first.
  std::vector<std::string> List() const ABSL_LOCKS_EXCLUDED(mu_);
  // Up to `limit` events with seq > after, oldest first; *next is the seq to ask after next time
  // (the last one returned, or `after` when none; the newest seq when `after` was dropped).
  std::vector<HeadEvent> Since(int64_t after, size_t limit, int64_t* next) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The newest event's seq (0 before the first): how many were recorded since the head started.
  int64_t last_seq() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return last_seq_;
  }

 private:
  void Add(std::string kind, std::string message, bool notice) ABSL_LOCKS_EXCLUDED(mu_);

  const size_t max_events_;
  Clock* const clock_;
  mutable absl::Mutex mu_;
  std::deque<HeadEvent> events_ ABSL_GUARDED_BY(mu_);
  int64_t last_seq_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera

// EventLog: what the head did on its own that users should hear of — nodes declared dead and
// what ran on them, bundles released by reconciliation, reservations lost or restored, failed
// state-store writes — newest last, the oldest dropped past a bound. `tessera status` shows it.
//
// Thread-safety: one mutex of its own, held only to copy strings (a leaf lock: taken after any
// other head lock, never before one). Cost: Record O(1), List O(events).
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tessera {

class EventLog {
 public:
  explicit EventLog(size_t max_events) : max_events_(max_events) {}

  void Record(std::string event) ABSL_LOCKS_EXCLUDED(mu_);
  // Oldest first.
  std::vector<std::string> List() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const size_t max_events_;
  mutable absl::Mutex mu_;
  std::deque<std::string> events_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera

// DriverTable: the drivers (programs using the API) that own reservations or actors, and when
// each was last heard from (KeepDriverAlive, or a create naming it as owner). A driver silent
// for the timeout is gone: the head releases what it owns (HeadParts::Reconcile). Gone drivers
// (exited or silent) are remembered for a while so that heartbeats can tell every agent, whose
// object stores free what they owned.
//
// Thread-safety: one mutex of its own (a leaf lock). Cost: NoteAlive/Forget O(log n),
// TakeExpired O(drivers).
#pragma once

#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tessera {

class DriverTable {
 public:
  explicit DriverTable(absl::Duration timeout) : timeout_(timeout) {}

  absl::Duration timeout() const { return timeout_; }
  // `driver` is alive at `now`; "" (no owner) is ignored.
  void NoteAlive(const std::string& driver, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  void Forget(const std::string& driver) ABSL_LOCKS_EXCLUDED(mu_);
  // The drivers last heard more than the timeout before `now`; forgotten as they are listed.
  std::vector<std::string> TakeExpired(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // `driver` is gone as of `now` (it exited, or TakeExpired listed it).
  void NoteGone(const std::string& driver, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // The drivers gone within kGoneWindow before `now`, newest first, at most kMaxGone.
  std::vector<std::string> RecentlyGone(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

  static constexpr absl::Duration kGoneWindow = absl::Minutes(1);
  static constexpr size_t kMaxGone = 256;

 private:
  const absl::Duration timeout_;
  absl::Mutex mu_;
  std::map<std::string, absl::Time, std::less<>> last_heard_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<std::string, absl::Time>> gone_ ABSL_GUARDED_BY(mu_);  // oldest first
};

}  // namespace tessera

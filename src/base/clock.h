// Clock: the one source of time and sleep for code that waits (health checks, retries, backoff),
// so tests drive time by hand with FakeClock instead of sleeping.
#pragma once

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tessera {

// Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  // Blocks (real clock) or advances time (fake clock) by `duration`; <= 0 returns at once.
  virtual void SleepFor(absl::Duration duration) = 0;
  // With `mu` held: waits until `condition` holds (true) or this clock reaches `deadline`
  // (false, unless the condition holds by then), as absl::Mutex::AwaitWithDeadline does on real
  // time. A fake clock's deadline passes only when its time is moved (Advance, SleepFor).
  virtual bool AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& condition,
                                 absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) = 0;

  // The process-wide real clock; never destroyed.
  static Clock* Real();
};

// Wall-clock time and real sleeps. Thread-safe (stateless).
class RealClock : public Clock {
 public:
  absl::Time Now() const override;
  void SleepFor(absl::Duration duration) override;
  bool AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& condition, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) override;
};

// Time that moves only when told: Advance() by hand, or SleepFor(), which returns at once after
// advancing by the requested duration (so code that sleeps between retries runs instantly and its
// waits are visible as elapsed fake time). Thread-safe (one mutex).
class FakeClock : public Clock {
 public:
  // Starts at a fixed, arbitrary instant so runs are identical.
  FakeClock();
  explicit FakeClock(absl::Time start) : now_(start) {}

  absl::Time Now() const override;
  void SleepFor(absl::Duration duration) override;
  // Looks at the condition and at this clock's time every millisecond of real time (Advance
  // from another thread wakes no one by itself), so a waiter sees a passed deadline at once.
  bool AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& condition, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) override;
  void Advance(absl::Duration duration);

  // Total of every SleepFor so far, and how many there were.
  absl::Duration total_slept() const;
  int sleep_count() const;

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  absl::Duration slept_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  int sleeps_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera

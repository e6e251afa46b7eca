#include "base/clock.h"

#include "absl/time/clock.h"

namespace tessera {

Clock* Clock::Real() {
  static RealClock* clock = new RealClock();
  return clock;
}

absl::Time RealClock::Now() const { return absl::Now(); }

void RealClock::SleepFor(absl::Duration duration) {
  if (duration > absl::ZeroDuration()) absl::SleepFor(duration);
}

bool RealClock::AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& condition,
                                  absl::Time deadline) {
  return mu.AwaitWithDeadline(condition, deadline);
}

FakeClock::FakeClock() : now_(absl::FromUnixSeconds(1'800'000'000)) {}

absl::Time FakeClock::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

void FakeClock::SleepFor(absl::Duration duration) {
  absl::MutexLock lock(&mu_);
  ++sleeps_;
  if (duration <= absl::ZeroDuration()) return;
  now_ += duration;
  slept_ += duration;
}

bool FakeClock::AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& condition,
                                  absl::Time deadline) {
  while (!condition.Eval()) {
    if (Now() >= deadline) return false;
    mu.AwaitWithTimeout(condition, absl::Milliseconds(1));
  }
  return true;
}

void FakeClock::Advance(absl::Duration duration) {
  absl::MutexLock lock(&mu_);
  if (duration > absl::ZeroDuration()) now_ += duration;
}

absl::Duration FakeClock::total_slept() const {
  absl::MutexLock lock(&mu_);
  return slept_;
}

int FakeClock::sleep_count() const {
  absl::MutexLock lock(&mu_);
  return sleeps_;
}

}  // namespace tessera

// AdaptiveSpin: a thread about to sleep until another thread does something that usually comes
// within microseconds (a result arriving over a local round trip) first watches for it for a
// short while, keeping its core instead of paying a wake: on the machines measured
// (docs/benchmarks.md, "Sync round trips"), a futex wake and the switch back cost more than a
// fast round trip's own work. It adapts as absl's mutex and glibc's adaptive mutexes do: a spin
// that ends without the event makes the next waits skip spinning, twice as many after each miss
// in a row (at most kMaxSkipped), so waiters for something slow pay one short spin now and then,
// not one per wait. A machine with one CPU never spins (the awaited thread could not run).
//
// Threading: thread-safe; one per kind of wait, shared by its waiters.
#pragma once

#include <atomic>
#include <thread>

#include "absl/functional/function_ref.h"
#include "absl/time/time.h"

namespace tessera {

class AdaptiveSpin {
 public:
  static constexpr int kMaxSkipped = 256;

  explicit AdaptiveSpin(absl::Duration limit, unsigned cpus = std::thread::hardware_concurrency())
      : limit_(limit), spins_(cpus > 1) {}

  // Calls `done` until it returns true (true) or `limit` has passed (false); false at once,
  // without calling `done`, for a wait that skips spinning.
  bool Spin(absl::FunctionRef<bool()> done);

  absl::Duration limit() const { return limit_; }

 private:
  const absl::Duration limit_;
  const bool spins_;
  std::atomic<int> misses_{0};   // spins in a row that ended without the event
  std::atomic<int> to_skip_{0};  // waits left that do not spin
};

}  // namespace tessera

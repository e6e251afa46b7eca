#include "base/adaptive_spin.h"

#include <algorithm>

#include "absl/time/clock.h"

namespace tessera {
namespace {

// Tells the CPU this is a spin-wait loop (less power, the sibling hyperthread runs faster).
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

bool AdaptiveSpin::Spin(absl::FunctionRef<bool()> done) {
  if (!spins_) return false;
  int skip = to_skip_.load(std::memory_order_relaxed);
  while (skip > 0) {
    if (to_skip_.compare_exchange_weak(skip, skip - 1, std::memory_order_relaxed)) return false;
  }
  const absl::Time until = absl::Now() + limit_;
  while (true) {
    for (int i = 0; i < 16; ++i) {
      if (done()) {
        misses_.store(0, std::memory_order_relaxed);
        return true;
      }
      CpuRelax();
    }
    if (absl::Now() >= until) break;
  }
  const int misses = std::min(misses_.load(std::memory_order_relaxed) + 1, 8);
  misses_.store(misses, std::memory_order_relaxed);
  to_skip_.store(std::min(1 << misses, kMaxSkipped), std::memory_order_relaxed);
  return false;
}

}  // namespace tessera

// ScopedTimer: observes, into a histogram, the seconds from its construction to its end:
//   { metrics::ScopedTimer timer(latency); DoWork(); }
// A null histogram observes nothing (a part whose owner exports no metrics). Not thread-safe
// itself (one scope); the histogram is.
#pragma once

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "metrics/metric_registry.h"

namespace tessera::metrics {

class ScopedTimer {
 public:
  explicit ScopedTimer(Histogram* histogram)
      : histogram_(histogram), start_(histogram == nullptr ? absl::InfinitePast() : absl::Now()) {}
  ~ScopedTimer() {
    if (histogram_ != nullptr) histogram_->Observe(absl::ToDoubleSeconds(absl::Now() - start_));
  }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  Histogram* const histogram_;
  const absl::Time start_;
};

}  // namespace tessera::metrics

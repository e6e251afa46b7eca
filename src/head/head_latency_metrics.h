// HeadLatencyMetrics: the head's latency histograms, for its /metrics:
//   tessera_head_scheduling_decision_seconds{kind}  one placement decision of the head's
//       schedulers, under the cluster lock: kind "task" (PickNode), "placement_group",
//       "slice_group" (each try, the first and every retry after a change)
//   tessera_head_two_phase_commit_seconds{outcome}  one round of prepare and commit on the
//       agents holding a reservation's bundles: outcome "ok" or "failed"
// Each pointer is a child of its family, stable for the registry's life.
// Thread-safe (histograms are). Cost: ~22 ns an observation.
#pragma once

#include "absl/status/statusor.h"
#include "metrics/metric_registry.h"

namespace tessera {

struct HeadLatencyMetrics {
  metrics::Histogram* task_decision = nullptr;
  metrics::Histogram* group_decision = nullptr;
  metrics::Histogram* slice_decision = nullptr;
  metrics::Histogram* commit_ok = nullptr;
  metrics::Histogram* commit_failed = nullptr;

  // Registers the two families in `registry` (which must outlive what uses the result).
  static absl::StatusOr<HeadLatencyMetrics> Register(metrics::MetricRegistry& registry);
};

}  // namespace tessera

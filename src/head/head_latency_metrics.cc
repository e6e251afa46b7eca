#include "head/head_latency_metrics.h"

#include "base/status_macros.h"

namespace tessera {

absl::StatusOr<HeadLatencyMetrics> HeadLatencyMetrics::Register(metrics::MetricRegistry& registry) {
  TESSERA_ASSIGN_OR_RETURN(
      metrics::HistogramFamily * decisions,
      registry.AddHistogram(
          {.name = "tessera_head_scheduling_decision_seconds",
           .help = "Time of one placement decision of the head's schedulers (under the cluster "
                   "lock), by kind: task, placement_group, slice_group.",
           .label_names = {"kind"}},
          metrics::LatencySecondsBuckets()));
  TESSERA_ASSIGN_OR_RETURN(
      metrics::HistogramFamily * commits,
      registry.AddHistogram(
          {.name = "tessera_head_two_phase_commit_seconds",
           .help = "Time of one two-phase commit round (prepare, then commit or cancel) on the "
                   "agents holding a reservation's bundles, by outcome: ok, failed.",
           .label_names = {"outcome"}},
          metrics::LatencySecondsBuckets()));
  HeadLatencyMetrics out;
  TESSERA_ASSIGN_OR_RETURN(out.task_decision, decisions->WithLabels({"task"}));
  TESSERA_ASSIGN_OR_RETURN(out.group_decision, decisions->WithLabels({"placement_group"}));
  TESSERA_ASSIGN_OR_RETURN(out.slice_decision, decisions->WithLabels({"slice_group"}));
  TESSERA_ASSIGN_OR_RETURN(out.commit_ok, commits->WithLabels({"ok"}));
  TESSERA_ASSIGN_OR_RETURN(out.commit_failed, commits->WithLabels({"failed"}));
  return out;
}

}  // namespace tessera

// ReplicaMetricsCollector: the metrics replicas render themselves, relayed on the head's /metrics
// (the serving reference's §5.3: Serve LLM's engine metrics, ray_vllm_*, each series tagged
// ReplicaId). The serve controller owns one and drives it from its control loop.
//
// - Keep(ids): the replicas whose metrics are relayed (the controller's RUNNING ones, given at
//   every control loop). The series of any other replica are forgotten at once; an answer that
//   comes for one afterwards changes nothing.
// - Collect(): each kept replica gets one call of kMetricsMethod (ReplicaActor.get_metrics_text:
//   Prometheus text, "" for none), unless its previous call has not answered yet. The controller
//   calls it every collect period, as Ray's replicas push their metrics on a period: a scrape
//   never waits on a replica. An answer replaces what the replica had. It is read with the
//   exposition parser and relayed_families.h, and every series gets the label ReplicaId set to
//   the replica's id (replaced if the text had one), so a replica can never stand in for
//   another. A call that fails, text over max_text_bytes or text that does not parse leaves the
//   replica with no series; families that do not hold together are left out; either is logged
//   once per replica until it answers well again. A bad answer never touches another replica's
//   series nor the head's own.
// - The families reach the registry through one relay (MetricRegistry::AddRelay), the replicas'
//   merged at each scrape (MergeFamilies: a family another replica has with another type or
//   other buckets is left out for the later one; the registry's own families win by name).
//
// Threading: thread-safe. The runtime's answers may come on any thread, also after the
// collector is gone (they then change nothing). Cost: per Collect one actor call per kept
// replica; per answer a parse, O(samples × log samples); per scrape a merge and copy of every
// relayed series.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "metrics/metric_registry.h"
#include "serve_runtime/replica_runtime.h"

namespace tessera::serve {

// The ReplicaActor method that renders the replica's own metrics (no argument; a str).
inline constexpr char kMetricsMethod[] = "get_metrics_text";
// The label every relayed series carries (Ray's tag of the replica a vLLM metric comes from).
inline constexpr char kReplicaIdLabel[] = "ReplicaId";

struct ReplicaMetricsCollectorOptions {
  ReplicaRuntime* runtime = nullptr;            // not owned; required; outlives the collector
  metrics::MetricRegistry* registry = nullptr;  // not owned; required; outlives the collector
  // A call not answered by then fails (and the replica has no series until the next one).
  absl::Duration call_timeout = absl::Seconds(10);
  // The most text one replica may answer with.
  size_t max_text_bytes = 8 << 20;
};

class ReplicaMetricsCollector {
 public:
  // Registers the relay. InvalidArgument without a runtime or a registry.
  static absl::StatusOr<std::unique_ptr<ReplicaMetricsCollector>> Create(
      ReplicaMetricsCollectorOptions options);
  ~ReplicaMetricsCollector();  // the relay is removed (waiting for a scrape in progress)
  ReplicaMetricsCollector(const ReplicaMetricsCollector&) = delete;
  ReplicaMetricsCollector& operator=(const ReplicaMetricsCollector&) = delete;

  void Keep(const std::vector<std::string>& replica_ids);
  void Collect();

  // What the relay gives now: every kept replica's families, merged.
  std::vector<metrics::FamilySnapshot> Families() const;

 private:
  struct Shared;  // what the runtime's answers and the relay reach (shared with them)

  ReplicaMetricsCollector(ReplicaMetricsCollectorOptions options, std::shared_ptr<Shared> shared);
  // Every kept replica's families, merged (the relay's answer).
  static std::vector<metrics::FamilySnapshot> Merged(Shared& shared);

  const ReplicaMetricsCollectorOptions options_;
  const std::shared_ptr<Shared> shared_;
  metrics::CallbackRegistration relay_;  // Create and ~ only
};

}  // namespace tessera::serve

// AgentMetrics: the node agent's Prometheus families in its MetricRegistry, served at the
// agent's /metrics (docs/observability.md has the table). Every series has the label `node`.
//
//   auto metrics = AgentMetrics::Create(registry, {.state = &state,
//                                                  .latest = [&] { return sampler.Latest(); },
//                                                  .object_store = &store});
//   metrics->CountLease(LeaseAnswer::kGranted);   // where the agent decides a lease
//
// What is computed at scrape time (callback families, so label sets that come and go leave no
// stale series): the node's resources (capacity and what leases and bundles reserve, from
// AgentState; what workers use, as measured by the telemetry sampler), each device's figures
// (the sampler's latest reading; a figure the device does not measure has no series, never 0),
// each running worker's CPU seconds and memory, the object store's counts. What is counted as it
// happens (counters that exist from the start, at 0): lease answers by outcome, workers started,
// failed to start, and exited by reason class.
//
// Threading: thread-safe. Count* are a relaxed atomic add. Scrapes call AgentState, `latest` and
// the store from the scraping thread. Destroying AgentMetrics removes its callbacks (waiting for a
// scrape in progress); its sources must outlive it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "metrics/metric_registry.h"
#include "node/agent_state.h"
#include "node/telemetry_sampler.h"
#include "objects/object_store.h"

namespace tessera {

// How the agent answered a lease request (tessera_leases_total's `outcome`).
enum class LeaseAnswer {
  kGranted,      // "granted": a worker was started for it here
  kSpilledBack,  // "spilled_back": sent to the node the head picked
  kRefused,      // "refused": answered pending or infeasible
  kFailed,       // "failed": a malformed request, or a worker that could not start
};
std::string_view LeaseAnswerName(LeaseAnswer answer);

// Why a worker ended (tessera_workers_exited_total's `reason`), first match wins.
enum class WorkerExitClass {
  kOutOfMemory,  // "out_of_memory": killed by an OOM killer
  kKilled,     // "killed": the agent killed it (KillWorker, its rules, a bundle removed, shutdown)
  kSignaled,   // "signaled": another signal ended it
  kSucceeded,  // "succeeded": exit code 0
  kFailed,     // "failed": another exit code
};
std::string_view WorkerExitClassName(WorkerExitClass reason);
// The class of an exited worker's record (kFailed when it has no exit).
WorkerExitClass ClassifyWorkerExit(const WorkerRecord& worker);

struct AgentMetricsSources {
  const AgentState* state = nullptr;  // required
  // The latest telemetry reading (TelemetrySampler::Latest). Null: no device, worker or
  // used-resource series.
  std::function<NodeReading()> latest;
  // The node's object store. Null: no object store series.
  const ObjectStore* object_store = nullptr;
};

class AgentMetrics {
 public:
  // AlreadyExists when `registry` has a family of the same name with another definition (or a
  // live callback: one AgentMetrics per registry).
  static absl::StatusOr<std::unique_ptr<AgentMetrics>> Create(metrics::MetricRegistry& registry,
                                                              AgentMetricsSources sources);
  AgentMetrics(const AgentMetrics&) = delete;
  AgentMetrics& operator=(const AgentMetrics&) = delete;

  void CountLease(LeaseAnswer answer);
  void CountWorkerStarted();
  void CountWorkerStartFailure();
  void CountWorkerExit(WorkerExitClass reason);

 private:
  explicit AgentMetrics(AgentMetricsSources sources);
  absl::Status RegisterCounters(metrics::MetricRegistry& registry);
  absl::Status RegisterResourceFamilies(metrics::MetricRegistry& registry);
  absl::Status RegisterDeviceFamilies(metrics::MetricRegistry& registry);
  absl::Status RegisterWorkerFamilies(metrics::MetricRegistry& registry);
  absl::Status RegisterObjectStoreFamilies(metrics::MetricRegistry& registry);

  const AgentMetricsSources sources_;
  const std::string node_;                       // the `node` label
  const std::string slice_;                      // the node's TPU slice name, "" when none
  std::vector<metrics::Counter*> leases_;        // by LeaseAnswer
  std::vector<metrics::Counter*> worker_exits_;  // by WorkerExitClass
  metrics::Counter* workers_started_ = nullptr;
  metrics::Counter* worker_start_failures_ = nullptr;
  // Last: removed first, before anything a callback reads.
  std::vector<metrics::CallbackRegistration> callbacks_;
};

}  // namespace tessera

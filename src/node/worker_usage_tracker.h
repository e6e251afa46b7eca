// WorkerUsageTracker: the CPU and memory the node's running workers use, from successive
// readings of each worker's CPU seconds and memory (process/resource_usage.h). A worker's CPU
// cores in use are the rate of its CPU seconds between its last two readings; the node's are the
// sum over its workers. Measured use only, never a reservation: a worker read once has no rate
// yet, and a worker whose figure could not be read adds nothing.
//
//   WorkerUsageTracker tracker;
//   NodeWorkerUsage usage = tracker.Update(absl::Now(), readings);  // every few seconds
//
// A worker missing from a reading is forgotten (it exited). A CPU-seconds figure that went down
// (a new process under the same id cannot happen, but /proc may lose children's time) counts as
// no time spent.
// Not thread-safe: one caller (the telemetry sampler's thread). Cost: O(w log w) for w workers.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "node/agent_types.h"

namespace tessera {

// One worker's figures at one reading (absent: could not be read).
struct WorkerUsageReading {
  WorkerId worker;
  std::string job_id;  // "" when the lease named none
  std::optional<double> cpu_seconds;
  std::optional<uint64_t> memory_bytes;
};

struct WorkerUsage {
  WorkerId worker;
  std::string job_id;
  std::optional<double> cpu_seconds;  // since it started
  // CPU seconds per second since the previous reading; absent on its first reading.
  std::optional<double> cpu_cores;
  std::optional<uint64_t> memory_bytes;
};

struct NodeWorkerUsage {
  std::vector<WorkerUsage> workers;  // in the order read
  double cpu_cores = 0;              // sum of the workers' cpu_cores
  uint64_t memory_bytes = 0;         // sum of the workers' memory_bytes
};

class WorkerUsageTracker {
 public:
  // The usage at `now` of the workers in `readings`; `now` must not go back between calls.
  NodeWorkerUsage Update(absl::Time now, const std::vector<WorkerUsageReading>& readings);

 private:
  struct Previous {
    double cpu_seconds = 0;
    absl::Time at;
  };
  std::map<WorkerId, Previous> previous_;  // the workers of the last reading with a CPU figure
};

}  // namespace tessera

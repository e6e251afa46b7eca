#include "node/worker_usage_tracker.h"

#include <algorithm>
#include <utility>

namespace tessera {

NodeWorkerUsage WorkerUsageTracker::Update(absl::Time now,
                                           const std::vector<WorkerUsageReading>& readings) {
  NodeWorkerUsage out;
  std::map<WorkerId, Previous> next;
  for (const WorkerUsageReading& reading : readings) {
    WorkerUsage usage;
    usage.worker = reading.worker;
    usage.job_id = reading.job_id;
    usage.cpu_seconds = reading.cpu_seconds;
    usage.memory_bytes = reading.memory_bytes;
    if (reading.cpu_seconds.has_value()) {
      auto before = previous_.find(reading.worker);
      if (before != previous_.end() && now > before->second.at) {
        const double spent = std::max(0.0, *reading.cpu_seconds - before->second.cpu_seconds);
        usage.cpu_cores = spent / absl::ToDoubleSeconds(now - before->second.at);
        out.cpu_cores += *usage.cpu_cores;
      }
      next[reading.worker] = Previous{*reading.cpu_seconds, now};
    }
    if (reading.memory_bytes.has_value()) out.memory_bytes += *reading.memory_bytes;
    out.workers.push_back(std::move(usage));
  }
  previous_ = std::move(next);
  return out;
}

}  // namespace tessera

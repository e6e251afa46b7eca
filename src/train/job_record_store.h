// JobRecordStore: where the job manager keeps one record per job (a serialized
// v1::StoredTrainJob, proto/tessera/v1/train_state.proto), so that a head restarted on the same
// store adopts the jobs that were running and still lists the ones that ended. The head adapts
// its StateStore (Redis) to it, table kTrainJobsTable; tests use a map.
//
// Implementations are thread-safe. Each call is one round trip to the store.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera::train {

// The head's StateStore table of job records, keyed by job id.
inline constexpr std::string_view kTrainJobsTable = "train_jobs";

class JobRecordStore {
 public:
  virtual ~JobRecordStore() = default;
  // Creates or replaces the job's record.
  virtual absl::Status Put(const std::string& job_id, const std::string& record) = 0;
  virtual absl::Status Delete(const std::string& job_id) = 0;
  // Every record, as (job id, record), ascending by job id.
  virtual absl::StatusOr<std::vector<std::pair<std::string, std::string>>> List() const = 0;
};

}  // namespace tessera::train

// JobRecordStore: where the job manager keeps one record per job (a serialized
// v1::StoredTrainJob, proto/tessera/v1/train_state.proto), so that a head restarted on the same
// store adopts the jobs that were running and still lists the ones that ended. The head adapts
// its StateStore (Redis) to it, table kTrainJobsTable; tests use a map.
//
// Implementations are thread-safe. Each call is one round trip to the store (none while it is
// known to be down).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "vocabulary/ids.h"

namespace tessera::train {

// The head's StateStore table of job records, keyed by job id.
inline constexpr std::string_view kTrainJobsTable = "train_jobs";

class JobRecordStore {
 public:
  virtual ~JobRecordStore() = default;
  // OK when a Put now could be made; UNAVAILABLE, with the cause, while the store is known to
  // be down (a submission is refused at once, before anything is made).
  virtual absl::Status Writable() const = 0;
  // Creates or replaces the job's record, durably, or fails (a submission acknowledged only
  // once its record is kept).
  virtual absl::Status Put(const JobId& job_id, const std::string& record) = 0;
  // The job's record as it progresses: never fails; kept and made later while the store is down
  // (the latest record of each job).
  virtual void Keep(const JobId& job_id, const std::string& record) = 0;
  // Forgets the job's record, kept for later as Keep.
  virtual void Forget(const JobId& job_id) = 0;
  // Every record, as (job id, record), ascending by job id.
  virtual absl::StatusOr<std::vector<std::pair<JobId, std::string>>> List() const = 0;
};

}  // namespace tessera::train

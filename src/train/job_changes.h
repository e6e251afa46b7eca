// JobChanges: what changed between two statuses of one gang job, as lines for the head's event
// stream: the job entering a state (kind "job": "job j-1 (bert) RESTARTING: rank 2 ... failed")
// and ranks that failed (kind "worker": "job j-1 rank 2 on node n3 FAILED: killed by signal 9"),
// at most kMaxRankEvents of those a change, then one line counting the rest.
// Pure and thread-safe. Cost: O(ranks).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tessera/v1/jobs.pb.h"

namespace tessera::train {

inline constexpr int kMaxRankEvents = 8;

// (kind, message) pairs, in order: the job's state first, then its ranks.
std::vector<std::pair<std::string, std::string>> JobChanges(const v1::JobStatus& before,
                                                            const v1::JobStatus& after);

}  // namespace tessera::train

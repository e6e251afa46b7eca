// Text views of the cluster for people: the tables of `tessera list`, the report of
// `tessera status`, and what `tessera pg` / `tessera slice` print about one group.
// Thread-safe: pure functions of protocol messages.
#pragma once

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tessera/v1/head.pb.h"
#include "tessera/v1/node_agent.pb.h"

namespace tessera::cli {

std::string NodesTable(const tessera::v1::ListNodesResponse& nodes);
std::string PlacementGroupText(const tessera::v1::PlacementGroupInfo& group);
std::string PlacementGroupsTable(const tessera::v1::ListPlacementGroupsResponse& groups);
std::string SliceGroupText(const tessera::v1::SliceGroupInfo& group);
std::string SlicesTables(const tessera::v1::ListSlicesResponse& slices);
// Jobs by start time (oldest first; ties by id), with their start time and how long they ran
// (local time; "-" when unknown). `now` is for the running jobs' duration.
std::string JobsTable(const tessera::v1::ListJobsResponse& jobs, absl::Time now,
                      absl::TimeZone zone);
// The jobs of `jobs` in the order JobsTable shows them.
tessera::v1::ListJobsResponse JobsByStartTime(tessera::v1::ListJobsResponse jobs);
std::string WorkersTable(const std::vector<tessera::v1::ListWorkersResponse>& per_node);
std::string StatusText(const tessera::v1::ClusterStatus& status, const std::string& head_address);

// "n1:0 n2:1 ..." placement of each bundle ("-" while unplaced).
std::string BundleNodesText(const tessera::v1::PlacementGroupInfo& group);
// "12s ago", "340ms ago".
std::string AgeText(int64_t ms);

}  // namespace tessera::cli

// Node affinity of a task or an actor (TaskOptions::node_affinity, node_affinity_soft) in its
// lease request. The agents and the head already schedule by it (ResourceRequest's
// affinity_node_id and affinity_soft: hard is only that node, infeasible naming it when it is
// dead, unknown or too small; soft prefers it while it is alive and fits now).
//
// Threading: free functions without state.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "tessera/task.h"
#include "tessera/v1/common.pb.h"

namespace tessera::api {

// Sets the request's affinity from `options`; nothing when no node is named. InvalidArgument
// (one line, request untouched) for a node id that cannot be one (not a label value), soft
// without a node, or affinity with a placement group (the bundle's node is fixed already).
absl::Status ApplyNodeAffinity(const TaskOptions& options, v1::ResourceRequest* request);

// What the lease shape's key gains from the affinity ("" without one): "|node=ID" or
// "|node~=ID" (soft), so tasks with different affinities never share workers.
std::string NodeAffinityKey(const TaskOptions& options);

}  // namespace tessera::api

// What the serve controller reads of the head's own tables in the head's process (its fronts
// called directly, as the HTTP endpoint does): the actor records of Serve's replicas
// (ActorReplicaRuntimeOptions::actor_record for the head's own driver), the scheduler's
// explanation of a replica that waits to be placed (explain_pending) and the alive nodes (where
// the nodes' proxies run: ProxyManagerOptions::list_nodes). Apart from head_serve_extension.cc
// because the head's headers and the C++ API's public ones both name a tessera::PlacementGroup.
//
// Threading: thread-safe (the fronts'). Cost: one lookup in the actor directory; one placement
// decision of the head under its cluster lock (PickNode); a listing of the node table, page by
// page.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "serve_runtime/proxy_manager.h"
#include "tessera/v1/head.pb.h"
#include "vocabulary/task_options.h"

namespace tessera {
class HeadService;
}

namespace tessera::serve {

// The record of the actor named `name` in the namespace "serve"; NotFound when there is none.
std::function<absl::StatusOr<v1::ActorInfo>(const std::string& name)> HeadActorRecords(
    HeadService* head);

// The scheduler's explanation of why an actor made with `options` cannot be placed now: the
// head's own PickNode answer for its demand (the task scheduler's explanation, or the one for a
// request inside a placement group's bundle), naming the resources that are short and who holds
// them ("1 node could fit CPU=1; all are busy (available CPU: 0; held by placement group hog)").
// "" when the head would place it now or cannot say (ActorReplicaRuntimeOptions::explain_pending).
std::function<std::string(const ActorOptions& options)> HeadPendingExplanation(HeadService* head);
// The nodes the head lists ALIVE, with the host each one's agent is reached at.
std::function<absl::StatusOr<std::vector<ServeNode>>()> HeadAliveNodes(HeadService* head);

}  // namespace tessera::serve

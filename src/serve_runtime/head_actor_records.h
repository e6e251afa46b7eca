// The head's actor records of Serve's replicas, read in the head's process (its actors' front
// called directly, as the HTTP endpoint does): ActorReplicaRuntimeOptions::actor_record for the
// head's own driver. Apart from head_serve_extension.cc because the head's headers and the C++
// API's public ones both name a tessera::PlacementGroup.
//
// Threading: thread-safe (the front's). Cost: one lookup in the actor directory.
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "tessera/v1/head.pb.h"

namespace tessera {
class HeadService;
}

namespace tessera::serve {

// The record of the actor named `name` in the namespace "serve"; NotFound when there is none.
std::function<absl::StatusOr<v1::ActorInfo>(const std::string& name)> HeadActorRecords(
    HeadService* head);

}  // namespace tessera::serve

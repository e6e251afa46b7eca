// ActorRecord (head/actor_directory.h) <-> v1::ActorInfo, the one conversion the actor
// directory's store records and the head's actor RPCs (head_actors.cc) share.
// Thread-safety: stateless functions. Cost: O(the record's size).
#pragma once

#include "absl/status/statusor.h"
#include "head/actor_directory.h"
#include "tessera/v1/head.pb.h"

namespace tessera {

v1::ActorState ActorStateToProto(ActorState state);
// InvalidArgument for ACTOR_STATE_UNSPECIFIED or an unknown value.
absl::StatusOr<ActorState> ActorStateFromProto(v1::ActorState state);

// Every field but `changed` (the head's own bookkeeping).
void ActorRecordToProto(const ActorRecord& record, v1::ActorInfo* info);
// InvalidArgument naming the field when the state is not one of the four; `changed` is left
// at its default.
absl::StatusOr<ActorRecord> ActorRecordFromProto(const v1::ActorInfo& info);

}  // namespace tessera

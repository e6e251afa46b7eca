// The conversions of actor_info_proto.h: field by field, the state enum checked.
#include "head/actor_info_proto.h"

#include "absl/strings/str_cat.h"

namespace tessera {

v1::ActorState ActorStateToProto(ActorState state) {
  switch (state) {
    case ActorState::kPending: return v1::ACTOR_STATE_PENDING;
    case ActorState::kAlive: return v1::ACTOR_STATE_ALIVE;
    case ActorState::kRestarting: return v1::ACTOR_STATE_RESTARTING;
    case ActorState::kDead: return v1::ACTOR_STATE_DEAD;
  }
  return v1::ACTOR_STATE_UNSPECIFIED;
}

absl::StatusOr<ActorState> ActorStateFromProto(v1::ActorState state) {
  switch (state) {
    case v1::ACTOR_STATE_PENDING: return ActorState::kPending;
    case v1::ACTOR_STATE_ALIVE: return ActorState::kAlive;
    case v1::ACTOR_STATE_RESTARTING: return ActorState::kRestarting;
    case v1::ACTOR_STATE_DEAD: return ActorState::kDead;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "state: ", static_cast<int>(state), " is not one of PENDING, ALIVE, RESTARTING, DEAD"));
  }
}

void ActorRecordToProto(const ActorRecord& record, v1::ActorInfo* info) {
  info->set_actor_id(record.actor_id);
  info->set_name(record.name);
  info->set_namespace_(record.name_space);
  info->set_class_name(record.class_name);
  info->set_owner(record.owner);
  info->set_state(ActorStateToProto(record.state));
  info->set_address(record.address);
  info->set_node_id(record.node_id);
  info->set_restarts(record.restarts);
  info->set_death_cause(record.death_cause);
  info->set_detached(record.detached);
  info->set_worker_id(record.worker_id);
  info->set_calls_in_order(record.calls_in_order);
  info->set_handle_metadata(record.handle_metadata);
}

absl::StatusOr<ActorRecord> ActorRecordFromProto(const v1::ActorInfo& info) {
  absl::StatusOr<ActorState> state = ActorStateFromProto(info.state());
  if (!state.ok()) return state.status();
  ActorRecord record;
  record.actor_id = info.actor_id();
  record.name = info.name();
  record.name_space = info.namespace_();
  record.class_name = info.class_name();
  record.owner = info.owner();
  record.state = *state;
  record.address = info.address();
  record.node_id = info.node_id();
  record.restarts = info.restarts();
  record.death_cause = info.death_cause();
  record.detached = info.detached();
  record.worker_id = info.worker_id();
  record.calls_in_order = info.calls_in_order();
  record.handle_metadata = info.handle_metadata();
  return record;
}

}  // namespace tessera

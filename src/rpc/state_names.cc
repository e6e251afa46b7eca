#include "rpc/state_names.h"

namespace tessera::rpc {
namespace {

constexpr std::string_view kUnknown = "UNKNOWN";
constexpr std::string_view kUnknownLower = "unknown";

// The C++ API's gang states are numbered as the protocol's (vocabulary/gang_state.h), so each is
// shown in its protocol value's word and there is one list of those words, below.
static_assert(static_cast<int>(GangState::kPending) == v1::GANG_JOB_STATE_PENDING);
static_assert(static_cast<int>(GangState::kStarting) == v1::GANG_JOB_STATE_STARTING);
static_assert(static_cast<int>(GangState::kRunning) == v1::GANG_JOB_STATE_RUNNING);
static_assert(static_cast<int>(GangState::kRestarting) == v1::GANG_JOB_STATE_RESTARTING);
static_assert(static_cast<int>(GangState::kSucceeded) == v1::GANG_JOB_STATE_SUCCEEDED);
static_assert(static_cast<int>(GangState::kFailed) == v1::GANG_JOB_STATE_FAILED);
static_assert(static_cast<int>(GangState::kStopped) == v1::GANG_JOB_STATE_STOPPED);
static_assert(static_cast<int>(GangRankState::kStarting) == v1::RANK_STATE_STARTING);
static_assert(static_cast<int>(GangRankState::kRunning) == v1::RANK_STATE_RUNNING);
static_assert(static_cast<int>(GangRankState::kSucceeded) == v1::RANK_STATE_SUCCEEDED);
static_assert(static_cast<int>(GangRankState::kFailed) == v1::RANK_STATE_FAILED);
static_assert(static_cast<int>(GangRankState::kStopped) == v1::RANK_STATE_STOPPED);

}  // namespace

// Each switch lists the named values; `default` takes UNSPECIFIED and numbers from a newer peer.
// state_names_test fails when a value is added to an enum without a word here.

std::string_view NodeStateName(v1::NodeState state) {
  switch (state) {
    case v1::NODE_STATE_ALIVE: return "ALIVE";
    case v1::NODE_STATE_DRAINING: return "DRAINING";
    case v1::NODE_STATE_DEAD: return "DEAD";
    default: return kUnknown;
  }
}

std::string_view PlacementGroupStateName(v1::PlacementGroupState state) {
  switch (state) {
    case v1::PLACEMENT_GROUP_STATE_PENDING: return "PENDING";
    case v1::PLACEMENT_GROUP_STATE_CREATED: return "CREATED";
    case v1::PLACEMENT_GROUP_STATE_RESCHEDULING: return "RESCHEDULING";
    case v1::PLACEMENT_GROUP_STATE_INFEASIBLE: return "INFEASIBLE";
    case v1::PLACEMENT_GROUP_STATE_REMOVED: return "REMOVED";
    default: return kUnknown;
  }
}

std::string_view SliceGroupStateName(v1::SliceGroupState state) {
  switch (state) {
    case v1::SLICE_GROUP_STATE_PENDING: return "PENDING";
    case v1::SLICE_GROUP_STATE_RESERVED: return "RESERVED";
    case v1::SLICE_GROUP_STATE_INFEASIBLE: return "INFEASIBLE";
    case v1::SLICE_GROUP_STATE_BROKEN: return "BROKEN";
    case v1::SLICE_GROUP_STATE_RELEASED: return "RELEASED";
    default: return kUnknown;
  }
}

std::string_view JobStateName(v1::JobState state) {
  switch (state) {
    case v1::JOB_STATE_RUNNING: return "RUNNING";
    case v1::JOB_STATE_SUCCEEDED: return "SUCCEEDED";
    case v1::JOB_STATE_FAILED: return "FAILED";
    default: return kUnknown;
  }
}

std::string_view DemandStatusName(v1::DemandStatus status) {
  switch (status) {
    case v1::DEMAND_STATUS_PENDING: return "pending";
    case v1::DEMAND_STATUS_INFEASIBLE: return "infeasible";
    default: return kUnknownLower;
  }
}

std::string_view PickStatusName(v1::PickStatus status) {
  switch (status) {
    case v1::PICK_STATUS_PLACED: return "placed";
    case v1::PICK_STATUS_PENDING: return "pending";
    case v1::PICK_STATUS_INFEASIBLE: return "infeasible";
    default: return kUnknownLower;
  }
}

std::string_view GangJobStateName(v1::GangJobState state) {
  switch (state) {
    case v1::GANG_JOB_STATE_PENDING: return "PENDING";
    case v1::GANG_JOB_STATE_STARTING: return "STARTING";
    case v1::GANG_JOB_STATE_RUNNING: return "RUNNING";
    case v1::GANG_JOB_STATE_RESTARTING: return "RESTARTING";
    case v1::GANG_JOB_STATE_SUCCEEDED: return "SUCCEEDED";
    case v1::GANG_JOB_STATE_FAILED: return "FAILED";
    case v1::GANG_JOB_STATE_STOPPED: return "STOPPED";
    default: return kUnknown;
  }
}

std::string_view RankStateName(v1::RankState state) {
  switch (state) {
    case v1::RANK_STATE_STARTING: return "STARTING";
    case v1::RANK_STATE_RUNNING: return "RUNNING";
    case v1::RANK_STATE_SUCCEEDED: return "SUCCEEDED";
    case v1::RANK_STATE_FAILED: return "FAILED";
    case v1::RANK_STATE_STOPPED: return "STOPPED";
    default: return kUnknown;
  }
}

std::string_view GangStateName(GangState state) {
  return GangJobStateName(static_cast<v1::GangJobState>(static_cast<int>(state)));
}

std::string_view GangRankStateName(GangRankState state) {
  return RankStateName(static_cast<v1::RankState>(static_cast<int>(state)));
}

std::string_view WorkerStateName(v1::WorkerState state) {
  switch (state) {
    case v1::WORKER_STATE_STARTING: return "STARTING";
    case v1::WORKER_STATE_RUNNING: return "RUNNING";
    case v1::WORKER_STATE_EXITED: return "EXITED";
    default: return kUnknown;
  }
}

std::string_view PlacementStrategyName(v1::PlacementStrategy strategy) {
  switch (strategy) {
    case v1::PLACEMENT_STRATEGY_PACK: return "PACK";
    case v1::PLACEMENT_STRATEGY_SPREAD: return "SPREAD";
    case v1::PLACEMENT_STRATEGY_STRICT_PACK: return "STRICT_PACK";
    case v1::PLACEMENT_STRATEGY_STRICT_SPREAD: return "STRICT_SPREAD";
    default: return kUnknown;
  }
}

std::string_view ActorStateName(v1::ActorState state) {
  switch (state) {
    case v1::ACTOR_STATE_PENDING: return "PENDING";
    case v1::ACTOR_STATE_ALIVE: return "ALIVE";
    case v1::ACTOR_STATE_RESTARTING: return "RESTARTING";
    case v1::ACTOR_STATE_DEAD: return "DEAD";
    default: return kUnknown;
  }
}

std::optional<std::string_view> StateWordOf(const google::protobuf::EnumValueDescriptor& value) {
  const google::protobuf::EnumDescriptor* type = value.type();
  const int number = value.number();
  if (type == v1::NodeState_descriptor()) return NodeStateName(v1::NodeState(number));
  if (type == v1::PlacementGroupState_descriptor()) {
    return PlacementGroupStateName(v1::PlacementGroupState(number));
  }
  if (type == v1::SliceGroupState_descriptor()) {
    return SliceGroupStateName(v1::SliceGroupState(number));
  }
  if (type == v1::JobState_descriptor()) return JobStateName(v1::JobState(number));
  if (type == v1::DemandStatus_descriptor()) return DemandStatusName(v1::DemandStatus(number));
  if (type == v1::PickStatus_descriptor()) return PickStatusName(v1::PickStatus(number));
  if (type == v1::GangJobState_descriptor()) return GangJobStateName(v1::GangJobState(number));
  if (type == v1::RankState_descriptor()) return RankStateName(v1::RankState(number));
  if (type == v1::WorkerState_descriptor()) return WorkerStateName(v1::WorkerState(number));
  if (type == v1::PlacementStrategy_descriptor()) {
    return PlacementStrategyName(v1::PlacementStrategy(number));
  }
  return std::nullopt;
}

const google::protobuf::EnumValueDescriptor* StateValueOf(
    const google::protobuf::EnumDescriptor& type, std::string_view word) {
  for (int i = 0; i < type.value_count(); ++i) {
    const google::protobuf::EnumValueDescriptor* value = type.value(i);
    const std::optional<std::string_view> shown = StateWordOf(*value);
    if (shown.has_value() && *shown == word) return value;
  }
  return nullptr;
}

}  // namespace tessera::rpc

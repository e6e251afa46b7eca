#include "rpc/state_names.h"

namespace tessera::rpc {
namespace {

constexpr std::string_view kUnknown = "UNKNOWN";
constexpr std::string_view kUnknownLower = "unknown";

}  // namespace

// Each switch lists the named values; `default` takes UNSPECIFIED and numbers from a newer peer.
// state_names_test fails when a value is added to an enum without a word here.

std::string_view NodeStateName(v1::NodeState state) {
  switch (state) {
    case v1::NODE_STATE_ALIVE:
      return "ALIVE";
    case v1::NODE_STATE_DRAINING:
      return "DRAINING";
    case v1::NODE_STATE_DEAD:
      return "DEAD";
    default:
      return kUnknown;
  }
}

std::string_view PlacementGroupStateName(v1::PlacementGroupState state) {
  switch (state) {
    case v1::PLACEMENT_GROUP_STATE_PENDING:
      return "PENDING";
    case v1::PLACEMENT_GROUP_STATE_CREATED:
      return "CREATED";
    case v1::PLACEMENT_GROUP_STATE_RESCHEDULING:
      return "RESCHEDULING";
    case v1::PLACEMENT_GROUP_STATE_INFEASIBLE:
      return "INFEASIBLE";
    case v1::PLACEMENT_GROUP_STATE_REMOVED:
      return "REMOVED";
    default:
      return kUnknown;
  }
}

std::string_view SliceGroupStateName(v1::SliceGroupState state) {
  switch (state) {
    case v1::SLICE_GROUP_STATE_PENDING:
      return "PENDING";
    case v1::SLICE_GROUP_STATE_RESERVED:
      return "RESERVED";
    case v1::SLICE_GROUP_STATE_INFEASIBLE:
      return "INFEASIBLE";
    case v1::SLICE_GROUP_STATE_BROKEN:
      return "BROKEN";
    case v1::SLICE_GROUP_STATE_RELEASED:
      return "RELEASED";
    default:
      return kUnknown;
  }
}

std::string_view JobStateName(v1::JobState state) {
  switch (state) {
    case v1::JOB_STATE_RUNNING:
      return "RUNNING";
    case v1::JOB_STATE_SUCCEEDED:
      return "SUCCEEDED";
    case v1::JOB_STATE_FAILED:
      return "FAILED";
    default:
      return kUnknown;
  }
}

std::string_view DemandStatusName(v1::DemandStatus status) {
  switch (status) {
    case v1::DEMAND_STATUS_PENDING:
      return "pending";
    case v1::DEMAND_STATUS_INFEASIBLE:
      return "infeasible";
    default:
      return kUnknownLower;
  }
}

std::string_view PickStatusName(v1::PickStatus status) {
  switch (status) {
    case v1::PICK_STATUS_PLACED:
      return "placed";
    case v1::PICK_STATUS_PENDING:
      return "pending";
    case v1::PICK_STATUS_INFEASIBLE:
      return "infeasible";
    default:
      return kUnknownLower;
  }
}

std::string_view ActorStateName(v1::ActorState state) {
  switch (state) {
    case v1::ACTOR_STATE_PENDING:
      return "PENDING";
    case v1::ACTOR_STATE_ALIVE:
      return "ALIVE";
    case v1::ACTOR_STATE_RESTARTING:
      return "RESTARTING";
    case v1::ACTOR_STATE_DEAD:
      return "DEAD";
    default:
      return kUnknown;
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
  return std::nullopt;
}

}  // namespace tessera::rpc

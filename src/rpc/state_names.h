// The words people and programs see for the head's wire states (`tessera status`, `tessera list`,
// `--json` output, error messages): the one mapping between the head.proto enums and those words.
// Code compares the enums; it turns them into words only to show them.
//
//   std::cout << "node n1 is " << rpc::NodeStateName(info.state());  // "node n1 is ALIVE"
//
// An UNSPECIFIED value (or a number this build does not know) is "UNKNOWN" ("unknown" for the
// lower-case statuses). Thread-safe: pure functions, O(1).
#pragma once

#include <optional>
#include <string_view>

#include <google/protobuf/descriptor.h>

#include "tessera/v1/head.pb.h"

namespace tessera::rpc {

std::string_view NodeStateName(v1::NodeState state);  // "ALIVE", "DRAINING", "DEAD"
// "PENDING", "CREATED", "RESCHEDULING", "INFEASIBLE", "REMOVED"
std::string_view PlacementGroupStateName(v1::PlacementGroupState state);
// "PENDING", "RESERVED", "INFEASIBLE", "BROKEN", "RELEASED"
std::string_view SliceGroupStateName(v1::SliceGroupState state);
std::string_view JobStateName(v1::JobState state);           // "RUNNING", "SUCCEEDED", "FAILED"
std::string_view DemandStatusName(v1::DemandStatus status);  // "pending", "infeasible"
std::string_view PickStatusName(v1::PickStatus status);      // "placed", "pending", "infeasible"
// "PENDING", "ALIVE", "RESTARTING", "DEAD" (for messages; not one of StateWordOf's six)
std::string_view ActorStateName(v1::ActorState state);

// The word of a value of one of the six enums above; nullopt for a value of any other enum (those
// are not shown through this mapping). How generic writers, such as the CLI's JSON, find them.
std::optional<std::string_view> StateWordOf(const google::protobuf::EnumValueDescriptor& value);

}  // namespace tessera::rpc

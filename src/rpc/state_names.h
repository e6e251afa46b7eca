// The words people and programs see for the protocol's states (`tessera status`, `tessera list`,
// `tessera job`, `--json` output, the head's /api/v1, timelines, job logs, error messages): the one
// mapping between the enums of head.proto, jobs.proto, node_agent.proto and common.proto and those
// words, and the C++ API's gang states (vocabulary/gang_state.h), shown in the same words as the
// protocol's. Code compares the enums; it turns them into words only to show them.
//
//   std::cout << "node n1 is " << rpc::NodeStateName(info.state());  // "node n1 is ALIVE"
//
// An UNSPECIFIED value (or a number this build does not know) is "UNKNOWN" ("unknown" for the
// lower-case statuses). Thread-safe: pure functions, O(1).
#pragma once

#include <google/protobuf/descriptor.h>

#include <optional>
#include <string_view>

#include "tessera/v1/common.pb.h"
#include "tessera/v1/head.pb.h"
#include "tessera/v1/jobs.pb.h"
#include "tessera/v1/node_agent.pb.h"
#include "vocabulary/gang_state.h"

namespace tessera::rpc {

std::string_view NodeStateName(v1::NodeState state);  // "ALIVE", "DRAINING", "DEAD"
// "PENDING", "CREATED", "RESCHEDULING", "INFEASIBLE", "REMOVED"
std::string_view PlacementGroupStateName(v1::PlacementGroupState state);
// "PENDING", "RESERVED", "INFEASIBLE", "BROKEN", "RELEASED"
std::string_view SliceGroupStateName(v1::SliceGroupState state);
std::string_view JobStateName(v1::JobState state);           // "RUNNING", "SUCCEEDED", "FAILED"
std::string_view DemandStatusName(v1::DemandStatus status);  // "pending", "infeasible"
// "placed", "pending", "infeasible" (PickNodeResponse and the node agent's LeaseReply)
std::string_view PickStatusName(v1::PickStatus status);
// A gang job's: "PENDING", "STARTING", "RUNNING", "RESTARTING", "SUCCEEDED", "FAILED", "STOPPED"
std::string_view GangJobStateName(v1::GangJobState state);
// "STARTING", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED"
std::string_view RankStateName(v1::RankState state);
// The C++ API's (tessera/gang.h): the words of GangJobStateName and RankStateName.
std::string_view GangStateName(GangState state);
std::string_view GangRankStateName(GangRankState state);
std::string_view WorkerStateName(v1::WorkerState state);  // "STARTING", "RUNNING", "EXITED"
// "PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD" (UNSPECIFIED, a request's PACK, is "UNKNOWN")
std::string_view PlacementStrategyName(v1::PlacementStrategy strategy);
// "PENDING", "ALIVE", "RESTARTING", "DEAD" (for messages; not one of StateWordOf's enums)
std::string_view ActorStateName(v1::ActorState state);

// The word of a value of one of the enums above but ActorState; nullopt for a value of any other
// enum (those are not shown through this mapping). How generic writers, such as the CLI's JSON,
// find them.
std::optional<std::string_view> StateWordOf(const google::protobuf::EnumValueDescriptor& value);

// The value of `type` (one of StateWordOf's enums) that is shown as `word`, or null: the inverse
// of StateWordOf, for what was written in words and is read back (a job's status.json). O(values).
const google::protobuf::EnumValueDescriptor* StateValueOf(
    const google::protobuf::EnumDescriptor& type, std::string_view word);

}  // namespace tessera::rpc

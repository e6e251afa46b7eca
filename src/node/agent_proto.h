// The node agent's records on the wire: lease requests in, worker and lease descriptions out
// (node_agent.proto, head.proto). Generic conversions (resources, allocations, selectors) are
// src/rpc's; these are the agent's own messages.
// Thread-safe: pure functions.
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "hardware/device_telemetry.h"
#include "node/agent_state.h"
#include "process/exit_status.h"
#include "tessera/v1/head.pb.h"
#include "tessera/v1/node_agent.pb.h"

namespace tessera {

// The request part of a LeaseRequest. InvalidArgument naming the field for anything a peer
// could get wrong (bad resources, selectors, bundle index, an empty worker argv).
absl::StatusOr<LeaseAsk> LeaseAskFromProto(const v1::LeaseRequest& proto);

WorkerExitInfo WorkerExitFromStatus(const ExitStatus& status);
void WorkerExitToProto(const WorkerExitInfo& exit, v1::WorkerExit* proto);
v1::WorkerState WorkerStateToProto(WorkerState state);
void WorkerToProto(const WorkerRecord& worker, v1::WorkerInfo* proto);
void LeaseToProto(const LeaseRecord& lease, v1::LeaseInfo* proto);
void BundleToProto(const BundleRecord& bundle, v1::HeldBundle* proto);

// One device reading for the head (HeartbeatRequest.device_samples), named by its `resource`
// and `instance` index on the node, read at `read_at`: a figure absent from `telemetry` stays
// unset (never 0). False, with `proto` untouched, when the reading has no figure at all.
bool DeviceSampleToProto(const DeviceTelemetry& telemetry, std::string_view resource, int instance,
                         absl::Time read_at, v1::DeviceSample* proto);

// PrepareBundlesRequest's bundles in core types; InvalidArgument naming the field.
absl::StatusOr<std::vector<BundleAsk>> BundleAsksFromProto(const v1::PrepareBundlesRequest& proto);

}  // namespace tessera

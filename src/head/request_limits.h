// The head's limits on the size of one request: how many bundles, resources, slices, label
// selectors, and how long names, keys and values may be. Every Head RPC that takes user input
// checks them first, before it parses the request, takes a lock or changes any state, so a
// request too large to be real (a placement group of 200,000 bundles fits in gRPC's 4 MB) is
// refused in microseconds with one line naming the limit and the value, instead of holding the
// head's mutex for seconds while heartbeats go unanswered.
//
// The limits are generous for real use (a 1024-bundle group, 64 slices in one request) and are
// part of the protocol's contract (docs/cluster-runtime.md). Each check is O(the request's
// size) at worst: counts are checked before the elements they count.
//
// Messages read "<what> has <n> <things>; at most <max> are allowed", e.g.
// "placement group has 200000 bundles; at most 1024 are allowed".
//
// Thread-safety: constants and stateless functions.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "tessera/v1/head.pb.h"

namespace tessera::request_limits {

// --- placement groups ---
// Bundles in one option of a placement group (the primary, and each fallback on its own).
inline constexpr size_t kMaxBundlesPerPlacementGroup = 1024;
// Fallback options of one placement group, after the primary.
inline constexpr size_t kMaxPlacementGroupFallbacks = 16;

// --- resources ---
// Distinct resource names in one bundle, one lease request or one slice alternative's per_host.
inline constexpr size_t kMaxResourcesPerBundle = 64;
// Characters in one resource name.
inline constexpr size_t kMaxResourceNameLength = 253;

// --- slice groups ---
// Alternatives of one ReserveSlices request (the first that can be reserved wins).
inline constexpr size_t kMaxSliceAlternatives = 16;
// Slices one alternative asks for (num_slices).
inline constexpr size_t kMaxSlicesPerRequest = 64;
// Hosts of one NVLink domain one alternative asks for (nvlink_hosts); NVL72 is 18.
inline constexpr size_t kMaxNvlinkHostsPerRequest = 1024;
// Dimensions of an alternative's TPU topology (shape.dims: 4x4 is two, 2x2x2 three).
inline constexpr size_t kMaxTopologyDims = 3;

// --- label selectors ---
// Fallback selectors of one request, after its primary selector.
inline constexpr size_t kMaxLabelFallbacks = 16;
// Constraints in one label selector.
inline constexpr size_t kMaxSelectorConstraints = 64;
// Characters in a constraint's key: a Kubernetes label key (253 of prefix, '/', 63 of name).
inline constexpr size_t kMaxLabelKeyLength = 317;
// Values of one constraint: as many as a placement group has bundles, so a gang can list every
// node it already uses (tessera.io/node-id not in ...).
inline constexpr size_t kMaxSelectorValues = 1024;
// Characters in one of a constraint's values: a label value.
inline constexpr size_t kMaxLabelValueLength = 63;

// --- names and ids ---
// Characters in a name or id the head stores or looks up: placement group and slice group
// names, job, node and worker ids, request ids, an affinity node id.
inline constexpr size_t kMaxNameLength = 253;
// Nodes one PickNode request excludes (those already tried).
inline constexpr size_t kMaxExcludedNodes = 1024;

// --- KV ---
// Bytes in one KV key (and in a KvList prefix).
inline constexpr size_t kMaxKvKeyBytes = 4096;
// Bytes in one KV value.
inline constexpr size_t kMaxKvValueBytes = 1024 * 1024;

// --- jobs ---
// Entries, and bytes in all, of a job's argv. Head requests carry no environment.
inline constexpr size_t kMaxJobArgvEntries = 4096;
inline constexpr size_t kMaxJobArgvBytes = 128 * 1024;
// Bytes in a job's exit reason.
inline constexpr size_t kMaxExitReasonBytes = 16 * 1024;
// A report of task runs (ReportTaskEvents): runs per report, and the bytes of each run's name
// and outcome (an exception's type and a death's cause, not its traceback).
inline constexpr size_t kMaxTaskEventsPerReport = 10000;
inline constexpr size_t kMaxTaskEventNameBytes = 1024;
inline constexpr size_t kMaxTaskEventOutcomeBytes = 1024;
inline constexpr size_t kMaxTaskEventIdBytes = 64;

// --- named actors ---
// Actor ids, names, namespaces, owners, addresses and node ids are names (kMaxNameLength).
// Characters in an actor's class name (a C++ type's mangled name can be long).
inline constexpr size_t kMaxActorClassNameLength = 1024;
// Bytes in an actor's death cause.
inline constexpr size_t kMaxActorDeathCauseBytes = 16 * 1024;
// Bytes of what a handle found by name is built with (ActorInfo.handle_metadata).
inline constexpr size_t kMaxActorHandleMetadataBytes = 64 * 1024;

// --- listing ---
// Bytes in a List* call's page token (the head's own tokens are far shorter).
inline constexpr size_t kMaxPageTokenBytes = 1024;

// OK, or InvalidArgument with one line naming the limit and the value. The checks cover only
// sizes; the parsers (wire/proto_convert.h) still validate content.
absl::Status Check(const v1::CreatePlacementGroupRequest& request);
absl::Status Check(const v1::RemovePlacementGroupRequest& request);
absl::Status Check(const v1::WaitPlacementGroupRequest& request);
absl::Status Check(const v1::ReserveSlicesRequest& request);
absl::Status Check(const v1::ReleaseSlicesRequest& request);
absl::Status Check(const v1::WaitSliceGroupRequest& request);
absl::Status Check(const v1::PickNodeRequest& request);
absl::Status Check(const v1::RecordJobRequest& request);
absl::Status Check(const v1::ReportTaskEventsRequest& request);
absl::Status Check(const v1::GetTaskEventsRequest& request);
absl::Status Check(const v1::KvPutRequest& request);
absl::Status Check(const v1::KvGetRequest& request);
absl::Status Check(const v1::KvDeleteRequest& request);
absl::Status Check(const v1::KvListRequest& request);
absl::Status Check(const v1::KeepDriverAliveRequest& request);
absl::Status Check(const v1::DriverExitedRequest& request);
absl::Status Check(const v1::RegisterActorRequest& request);
absl::Status Check(const v1::ActorDiedRequest& request);
absl::Status Check(const v1::ActorWorkerExitedRequest& request);
absl::Status Check(const v1::GetActorRequest& request);
absl::Status Check(const v1::ListRequest& request);

}  // namespace tessera::request_limits

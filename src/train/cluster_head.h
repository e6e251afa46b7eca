// ClusterHead: what the cluster's gang backend (cluster_gang_backend.h) asks of the head — its
// nodes, and reserving, waiting for and releasing the placement groups and slice groups a gang
// runs in. One implementation per transport: GrpcClusterHead (grpc_cluster_head.h) for a program
// outside the head (actor gangs), and the head's own in process (head/in_process_cluster_head.h:
// its training jobs' controllers run inside it and never call it over gRPC). Train sits below
// head, so the head implements this interface, never the reverse.
//
// Thread-safety: implementations are thread-safe.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tessera/v1/common.pb.h"
#include "tessera/v1/head.pb.h"
#include "vocabulary/ids.h"

namespace tessera::train {

// One node as the head knows it.
struct HeadNode {
  v1::NodeDescription description;  // id, address, labels, as its agent registered it
  bool alive = false;               // false: the head declared it dead
};

class ClusterHead {
 public:
  virtual ~ClusterHead() = default;

  // Every node the head knows, the dead ones included.
  virtual absl::StatusOr<std::vector<HeadNode>> Nodes() = 0;

  // Creates the placement group, then waits up to `wait` while it is neither CREATED nor
  // INFEASIBLE; `stopped` (may be empty) is asked at least every client::kStopCheckInterval and
  // ends the wait early. The group as the head last described it (its state says how the wait
  // ended); errors are the head's (InvalidArgument, AlreadyExists, UNAVAILABLE store, NotFound
  // when it was removed while waited for).
  virtual absl::StatusOr<v1::PlacementGroupInfo> CreatePlacementGroupAndWait(
      const v1::CreatePlacementGroupRequest& request, absl::Duration wait,
      const std::function<bool()>& stopped) = 0;
  // Reserves the slice group, then waits as CreatePlacementGroupAndWait does, while it is
  // PENDING or BROKEN (client::SliceGroupSettled).
  virtual absl::StatusOr<v1::SliceGroupInfo> ReserveSlicesAndWait(
      const v1::ReserveSlicesRequest& request, absl::Duration wait,
      const std::function<bool()>& stopped) = 0;

  // The agents give the bundles back before these return; NotFound when there is none.
  virtual absl::Status RemovePlacementGroup(const PlacementGroupName& name) = 0;
  virtual absl::Status ReleaseSlices(const SliceGroupName& name) = 0;
};

}  // namespace tessera::train

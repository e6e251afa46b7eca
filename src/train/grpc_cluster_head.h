// GrpcClusterHead: the ClusterHead of a program outside the head (actor gangs run their
// controller in the program, include/tessera/gang.h), over the head's gRPC service through the
// client library's reservation calls (client/reservation_calls.h: the head's wait calls, no
// polling). The head's own training jobs use head/in_process_cluster_head.h instead.
//
// Thread-safe: its calls only read the client (gRPC stubs are thread-safe).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "client/cluster_client.h"
#include "train/cluster_head.h"

namespace tessera::train {

class GrpcClusterHead final : public ClusterHead {
 public:
  // `client` may be shared with the gang backend, which calls the agents through it.
  explicit GrpcClusterHead(std::shared_ptr<client::ClusterClient> client)
      : client_(std::move(client)) {}

  absl::StatusOr<std::vector<HeadNode>> Nodes() override;
  absl::StatusOr<v1::PlacementGroupInfo> CreatePlacementGroupAndWait(
      const v1::CreatePlacementGroupRequest& request, absl::Duration wait,
      const std::function<bool()>& stopped) override;
  absl::StatusOr<v1::SliceGroupInfo> ReserveSlicesAndWait(
      const v1::ReserveSlicesRequest& request, absl::Duration wait,
      const std::function<bool()>& stopped) override;
  absl::Status RemovePlacementGroup(const PlacementGroupName& name) override;
  absl::Status ReleaseSlices(const SliceGroupName& name) override;

 private:
  const std::shared_ptr<client::ClusterClient> client_;
};

}  // namespace tessera::train

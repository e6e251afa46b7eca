#include "train/grpc_cluster_head.h"

#include <utility>

#include "base/status_macros.h"
#include "client/reservation_calls.h"

namespace tessera::train {

absl::StatusOr<std::vector<HeadNode>> GrpcClusterHead::Nodes() {
  TESSERA_ASSIGN_OR_RETURN(v1::ListNodesResponse listed, client_->ListNodes());
  std::vector<HeadNode> nodes;
  nodes.reserve(static_cast<size_t>(listed.nodes_size()));
  for (v1::NodeInfo& info : *listed.mutable_nodes()) {
    nodes.push_back(HeadNode{std::move(*info.mutable_node()), info.state() != v1::NODE_STATE_DEAD});
  }
  return nodes;
}

absl::StatusOr<v1::PlacementGroupInfo> GrpcClusterHead::CreatePlacementGroupAndWait(
    const v1::CreatePlacementGroupRequest& request, absl::Duration wait,
    const std::function<bool()>& stopped) {
  return client::CreatePlacementGroupAndWait(*client_, request, wait, stopped);
}

absl::StatusOr<v1::SliceGroupInfo> GrpcClusterHead::ReserveSlicesAndWait(
    const v1::ReserveSlicesRequest& request, absl::Duration wait,
    const std::function<bool()>& stopped) {
  return client::ReserveSlicesAndWait(*client_, request, wait, stopped);
}

absl::Status GrpcClusterHead::RemovePlacementGroup(const PlacementGroupName& name) {
  return client::RemovePlacementGroupNamed(*client_, name.value()).status();
}

absl::Status GrpcClusterHead::ReleaseSlices(const SliceGroupName& name) {
  return client::ReleaseSlicesNamed(*client_, name.value()).status();
}

}  // namespace tessera::train

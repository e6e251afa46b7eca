#include "head/in_process_cluster_head.h"

#include <utility>

#include "base/status_macros.h"
#include "client/reservation_calls.h"
#include "head/request_limits.h"
#include "wire/proto_convert.h"

namespace tessera {

absl::StatusOr<std::vector<train::HeadNode>> InProcessClusterHead::Nodes() {
  absl::MutexLock lock(controller_->mutex());
  const NodeRegistry& registry = controller_->nodes();
  std::vector<train::HeadNode> nodes;
  nodes.reserve(registry.nodes().size());
  for (const auto& [id, node] : registry.nodes()) {
    nodes.push_back(train::HeadNode{node.description, node.health == NodeRegistry::Health::kAlive});
  }
  return nodes;
}

absl::StatusOr<v1::PlacementGroupInfo> InProcessClusterHead::CreatePlacementGroupAndWait(
    const v1::CreatePlacementGroupRequest& request, absl::Duration wait,
    const std::function<bool()>& stopped) {
  TESSERA_RETURN_IF_ERROR(request_limits::Check(request));
  TESSERA_ASSIGN_OR_RETURN(PlacementGroupSpec spec, wire::PlacementGroupSpecFromProto(request));
  v1::PlacementGroupInfo info;
  TESSERA_RETURN_IF_ERROR(controller_->CreatePlacementGroup(request, std::move(spec), &info));
  const std::string name = info.name();
  TESSERA_RETURN_IF_ERROR(client::WaitInSteps(
      *clock_, wait, stopped,
      [&] {
        return info.state() == v1::PLACEMENT_GROUP_STATE_CREATED ||
               info.state() == v1::PLACEMENT_GROUP_STATE_INFEASIBLE;
      },
      [&](absl::Duration timeout) {
        return controller_->WaitPlacementGroup(name, timeout, &info);
      }));
  return info;
}

absl::StatusOr<v1::SliceGroupInfo> InProcessClusterHead::ReserveSlicesAndWait(
    const v1::ReserveSlicesRequest& request, absl::Duration wait,
    const std::function<bool()>& stopped) {
  TESSERA_RETURN_IF_ERROR(request_limits::Check(request));
  TESSERA_ASSIGN_OR_RETURN(DomainGroupRequest parsed, wire::DomainGroupRequestFromProto(request));
  v1::SliceGroupInfo info;
  TESSERA_RETURN_IF_ERROR(controller_->ReserveSlices(request, std::move(parsed), &info));
  const std::string name = info.name();
  TESSERA_RETURN_IF_ERROR(client::WaitInSteps(
      *clock_, wait, stopped, [&] { return client::SliceGroupSettled(info.state()); },
      [&](absl::Duration timeout) { return controller_->WaitSliceGroup(name, timeout, &info); }));
  return info;
}

absl::Status InProcessClusterHead::RemovePlacementGroup(const PlacementGroupName& name) {
  v1::RemovePlacementGroupResponse response;
  return controller_->RemovePlacementGroup(name.value(), &response);
}

absl::Status InProcessClusterHead::ReleaseSlices(const SliceGroupName& name) {
  v1::ReleaseSlicesResponse response;
  return controller_->ReleaseSlices(name.value(), &response);
}

}  // namespace tessera

// InProcessClusterHead: the head's own ClusterHead (train/cluster_head.h), for the gang
// controllers of its training jobs, which run in its process: the ClusterController called in
// process, the way the head's reservations service (HeadReservationsService) calls it, never a
// gRPC call from the head to itself. A request is checked as that service checks it (its size
// limits, then the protocol's parse); the waits are the manager's on the head's clock
// (WaitPlacementGroup, WaitSliceGroup). While a caller's `stopped` is to be asked they wait in
// steps of at most client::kStopCheckInterval and ask it between them: the controller waits
// under its mutex, where a caller's callback (which takes the gang controller's own lock) must
// not run.
//
// Thread-safe (the controller is). Must not outlive the controller it calls: HeadService makes it
// (HeadService::InProcessHead), and the head's job manager is shut down before the service.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "head/cluster_controller.h"
#include "train/cluster_head.h"

namespace tessera {

class InProcessClusterHead final : public train::ClusterHead {
 public:
  InProcessClusterHead(Clock* clock, ClusterController* controller)
      : clock_(clock), controller_(controller) {}

  absl::StatusOr<std::vector<train::HeadNode>> Nodes() override;
  absl::StatusOr<v1::PlacementGroupInfo> CreatePlacementGroupAndWait(
      const v1::CreatePlacementGroupRequest& request, absl::Duration wait,
      const std::function<bool()>& stopped) override;
  absl::StatusOr<v1::SliceGroupInfo> ReserveSlicesAndWait(
      const v1::ReserveSlicesRequest& request, absl::Duration wait,
      const std::function<bool()>& stopped) override;
  absl::Status RemovePlacementGroup(const PlacementGroupName& name) override;
  absl::Status ReleaseSlices(const SliceGroupName& name) override;

 private:
  Clock* const clock_;
  ClusterController* const controller_;
};

}  // namespace tessera

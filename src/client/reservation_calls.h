// Reservation calls to the head shared by the `tessera pg` / `tessera slice` commands and the
// C++ API's placement groups and slices (include/tessera/placement_group.h): create or reserve,
// then wait until the head settles it; remove or release by name.
//
// Thread-compatible, like the ClusterClient they use.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/cluster_client.h"
#include "labels/label_selector.h"
#include "tessera/v1/head.pb.h"
#include "vocabulary/slice_shape.h"

namespace tessera::client {

// One TPU alternative of a slice request: `num_slices` (>= 1) slices of `shape`, whose
// generation and topology it carries (MakeSliceShape or ParseSliceShape made it where the
// request entered). The shape is checked again (ValidateTopology), so one filled in by hand is
// refused when its topology is not a slice of its generation. InvalidArgument naming `what`.
absl::StatusOr<v1::SliceAlternative> TpuSliceAlternative(std::string_view what,
                                                         const SliceShape& shape, int num_slices,
                                                         bool per_chip);

// Sets on every alternative of `request` what it may take: only the slice or NVLink domain
// `domain` ("" any), only slices whose every host matches `selector` (nullopt or empty: any;
// with NVLink hosts, hosts that match), and blocks of larger slices with `sub_slice`.
void RestrictSliceAlternatives(v1::ReserveSlicesRequest& request, const std::string& domain,
                               const std::optional<LabelSelector>& selector, bool sub_slice);

// Sends CreatePlacementGroup: once it returns OK the head has the group (a RemovePlacementGroup
// sent after it withdraws the group, wherever its placement stands). The group as the head
// described it then. The create may wait on a two-phase commit with agents that do not answer:
// it gets a minute, not the client's usual deadline.
absl::StatusOr<v1::PlacementGroupInfo> SubmitPlacementGroup(
    ClusterClient& client, const v1::CreatePlacementGroupRequest& request);

// Waits (WaitPlacementGroup) up to `wait` while the group named `name`, last described by `info`
// (UNSPECIFIED: not yet described), is neither CREATED nor INFEASIBLE (with `through_infeasible`:
// while it is not CREATED, so an infeasible group waits for the cluster to grow). The group as
// the head last described it: its state says how it ended (PENDING or INFEASIBLE when the wait
// ran out, or when `stopped`, polled at least every 250 ms, said so). Errors are the calls' own
// (NotFound: the group was removed while waited for). `wait` may be absl::InfiniteDuration().
absl::StatusOr<v1::PlacementGroupInfo> WaitPlacementGroupPlaced(
    ClusterClient& client, const std::string& name, v1::PlacementGroupInfo info,
    absl::Duration wait, const std::function<bool()>& stopped = nullptr,
    bool through_infeasible = false);

// SubmitPlacementGroup, then WaitPlacementGroupPlaced.
absl::StatusOr<v1::PlacementGroupInfo> CreatePlacementGroupAndWait(
    ClusterClient& client, const v1::CreatePlacementGroupRequest& request, absl::Duration wait,
    const std::function<bool()>& stopped = nullptr, bool through_infeasible = false);

// Sends ReserveSlices, then polls the head (it has no wait call for slices), backing off, up to
// `wait` while the reservation is PENDING (or until `stopped` says so).
absl::StatusOr<v1::SliceGroupInfo> ReserveSlicesAndWait(
    ClusterClient& client, const v1::ReserveSlicesRequest& request, absl::Duration wait,
    const std::function<bool()>& stopped = nullptr);

// The reservation named `name` as the head lists it; NotFound when there is none.
absl::StatusOr<v1::SliceGroupInfo> FindSliceGroup(ClusterClient& client, const std::string& name);

absl::StatusOr<v1::RemovePlacementGroupResponse> RemovePlacementGroupNamed(ClusterClient& client,
                                                                           const std::string& name);
absl::StatusOr<v1::ReleaseSlicesResponse> ReleaseSlicesNamed(ClusterClient& client,
                                                             const std::string& name);

// How long a call that waits on a two-phase commit (create, reserve, remove, release) may take:
// the head retries an agent that does not answer until its node timeout.
inline constexpr absl::Duration kReservationCallDeadline = absl::Seconds(60);

}  // namespace tessera::client

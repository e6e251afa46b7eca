// Reservation calls to the head shared by the `tessera pg` / `tessera slice` commands, the
// C++ API's placement groups and slices (include/tessera/placement_group.h) and train's gang
// backend outside the head (train/grpc_cluster_head.h): create or reserve, then wait until the
// head settles it (its wait calls, no polling); remove or release by name.
//
// Thread-compatible, like the ClusterClient they use.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/clock.h"
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

// How often a wait on the head that has a `stopped` to ask asks it: no wait call of the head
// is longer (the head cannot ask a caller's `stopped` itself).
inline constexpr absl::Duration kStopCheckInterval = absl::Milliseconds(250);

// The steps of a wait on the head, whatever carries its calls (gRPC here, calls in process in
// the head's own gang backend): calls `step(timeout)` while `settled()` is false, `wait` has not
// passed on `clock` and `stopped` (when set) does not say stop; with `stopped`, no step's
// timeout is longer than kStopCheckInterval, so a stop is seen that soon. With `ask_first` the
// first step is made whatever the rest says (to learn where things stand). The first error of a
// step.
absl::Status WaitInSteps(Clock& clock, absl::Duration wait, const std::function<bool()>& stopped,
                         const std::function<bool()>& settled,
                         const std::function<absl::Status(absl::Duration)>& step,
                         bool ask_first = false);

// Waits (WaitPlacementGroup) up to `wait` while the group named `name`, last described by `info`
// (UNSPECIFIED: not yet described), is neither CREATED nor INFEASIBLE (with `through_infeasible`:
// while it is not CREATED, so an infeasible group waits for the cluster to grow). The group as
// the head last described it: its state says how it ended (PENDING or INFEASIBLE when the wait
// ran out, or when `stopped`, asked at least every kStopCheckInterval, said so). Errors are the
// calls' own (NotFound: the group was removed while waited for). `wait` may be
// absl::InfiniteDuration().
absl::StatusOr<v1::PlacementGroupInfo> WaitPlacementGroupPlaced(
    ClusterClient& client, const std::string& name, v1::PlacementGroupInfo info,
    absl::Duration wait, const std::function<bool()>& stopped = nullptr,
    bool through_infeasible = false);

// SubmitPlacementGroup, then WaitPlacementGroupPlaced.
absl::StatusOr<v1::PlacementGroupInfo> CreatePlacementGroupAndWait(
    ClusterClient& client, const v1::CreatePlacementGroupRequest& request, absl::Duration wait,
    const std::function<bool()>& stopped = nullptr, bool through_infeasible = false);

// Whether a slice group in `state` is settled: neither PENDING nor BROKEN (what the head's
// WaitSliceGroup waits through).
inline bool SliceGroupSettled(v1::SliceGroupState state) {
  return state != v1::SLICE_GROUP_STATE_PENDING && state != v1::SLICE_GROUP_STATE_BROKEN;
}

// Sends ReserveSlices, then waits (WaitSliceGroup) up to `wait` while the reservation is not
// settled (or until `stopped`, asked at least every kStopCheckInterval, says so). The reservation
// as the head last described it; errors are the calls' own (NotFound: it was released while
// waited for).
absl::StatusOr<v1::SliceGroupInfo> ReserveSlicesAndWait(
    ClusterClient& client, const v1::ReserveSlicesRequest& request, absl::Duration wait,
    const std::function<bool()>& stopped = nullptr);

absl::StatusOr<v1::RemovePlacementGroupResponse> RemovePlacementGroupNamed(ClusterClient& client,
                                                                           const std::string& name);
absl::StatusOr<v1::ReleaseSlicesResponse> ReleaseSlicesNamed(ClusterClient& client,
                                                             const std::string& name);

// How long a call that waits on a two-phase commit (create, reserve, remove, release) may take:
// the head retries an agent that does not answer until its node timeout.
inline constexpr absl::Duration kReservationCallDeadline = absl::Seconds(60);

}  // namespace tessera::client

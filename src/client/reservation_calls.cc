#include "client/reservation_calls.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "labels/label_selector.h"
#include "vocabulary/tpu_topology.h"
#include "wire/proto_convert.h"

namespace tessera::client {

void RestrictSliceAlternatives(v1::ReserveSlicesRequest& request, const std::string& domain,
                               const std::optional<LabelSelector>& selector, bool sub_slice) {
  for (v1::SliceAlternative& alt : *request.mutable_alternatives()) {
    alt.set_domain(domain);
    alt.set_sub_slice(sub_slice);
    if (selector.has_value() && !selector->empty()) {
      wire::LabelSelectorToProto(*selector, alt.mutable_label_selector());
    }
  }
}

absl::StatusOr<v1::SliceAlternative> TpuSliceAlternative(std::string_view what,
                                                         const SliceShape& shape, int num_slices,
                                                         bool per_chip) {
  if (shape.topology.dims.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(ToAbsl(what), ": a topology is needed"));
  }
  if (absl::Status valid = ValidateTopology(shape.generation, shape.topology); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(ToAbsl(what), ": ", valid.message()));
  }
  if (num_slices < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(what), ": the number of slices must be at least 1"));
  }
  v1::SliceAlternative alt;
  wire::SliceShapeToProto(shape, alt.mutable_shape());
  alt.set_num_slices(num_slices);
  alt.set_bundle_per_chip(per_chip);
  return alt;
}

absl::StatusOr<v1::PlacementGroupInfo> SubmitPlacementGroup(
    ClusterClient& client, const v1::CreatePlacementGroupRequest& request) {
  v1::PlacementGroupInfo info;
  TESSERA_RETURN_IF_ERROR(
      client.Call(client.HeadPeer(), Retry::kSafe, [&](grpc::ClientContext* ctx) {
        ctx->set_deadline(absl::ToChronoTime(absl::Now() + kReservationCallDeadline));
        return client.head().CreatePlacementGroup(ctx, request, &info);
      }));
  return info;
}

absl::StatusOr<v1::PlacementGroupInfo> WaitPlacementGroupPlaced(
    ClusterClient& client, const std::string& name, v1::PlacementGroupInfo info,
    absl::Duration wait, const std::function<bool()>& stopped, bool through_infeasible) {
  const absl::Time until = absl::Now() + wait;
  // Not yet described: one call says where it stands, however short the wait.
  bool described = info.state() != v1::PLACEMENT_GROUP_STATE_UNSPECIFIED;
  while (!described ||
         (info.state() != v1::PLACEMENT_GROUP_STATE_CREATED &&
          (through_infeasible || info.state() != v1::PLACEMENT_GROUP_STATE_INFEASIBLE) &&
          absl::Now() < until && !(stopped && stopped()))) {
    v1::WaitPlacementGroupRequest wait_request;
    wait_request.set_name(name);
    // With someone to ask whether to stop, no wait is longer than 250 ms.
    const absl::Duration left = std::max(until - absl::Now(), absl::ZeroDuration());
    const absl::Duration step = stopped ? std::min(left, absl::Milliseconds(250)) : left;
    wait_request.set_timeout_ms(std::max<int64_t>(1, absl::ToInt64Milliseconds(step)));
    TESSERA_RETURN_IF_ERROR(
        client.Call(client.HeadPeer(), Retry::kSafe, [&](grpc::ClientContext* ctx) {
          // The head answers by timeout_ms: give the call that much more than its usual deadline.
          ctx->set_deadline(absl::ToChronoTime(absl::Now() + step + absl::Seconds(10)));
          return client.head().WaitPlacementGroup(ctx, wait_request, &info);
        }));
    described = true;
  }
  return info;
}

absl::StatusOr<v1::PlacementGroupInfo> CreatePlacementGroupAndWait(
    ClusterClient& client, const v1::CreatePlacementGroupRequest& request, absl::Duration wait,
    const std::function<bool()>& stopped, bool through_infeasible) {
  TESSERA_ASSIGN_OR_RETURN(v1::PlacementGroupInfo info, SubmitPlacementGroup(client, request));
  return WaitPlacementGroupPlaced(client, request.name(), std::move(info), wait, stopped,
                                  through_infeasible);
}

absl::StatusOr<v1::SliceGroupInfo> FindSliceGroup(ClusterClient& client, const std::string& name) {
  TESSERA_ASSIGN_OR_RETURN(v1::ListSlicesResponse slices, client.ListSlices());
  for (const v1::SliceGroupInfo& group : slices.groups()) {
    if (group.name() == name) return group;
  }
  return absl::NotFoundError(absl::StrCat("no slice reservation named ", Quote(name)));
}

absl::StatusOr<v1::SliceGroupInfo> ReserveSlicesAndWait(ClusterClient& client,
                                                        const v1::ReserveSlicesRequest& request,
                                                        absl::Duration wait,
                                                        const std::function<bool()>& stopped) {
  v1::SliceGroupInfo info;
  TESSERA_RETURN_IF_ERROR(
      client.Call(client.HeadPeer(), Retry::kSafe, [&](grpc::ClientContext* ctx) {
        ctx->set_deadline(absl::ToChronoTime(absl::Now() + kReservationCallDeadline));
        return client.head().ReserveSlices(ctx, request, &info);
      }));
  const absl::Time until = absl::Now() + wait;
  absl::Duration poll = absl::Milliseconds(20);
  while (info.state() == v1::SLICE_GROUP_STATE_PENDING && absl::Now() < until &&
         !(stopped && stopped())) {
    absl::SleepFor(std::min(poll, until - absl::Now()));
    poll = std::min(poll * 2, absl::Milliseconds(250));
    TESSERA_ASSIGN_OR_RETURN(info, FindSliceGroup(client, request.name()));
  }
  return info;
}

absl::StatusOr<v1::RemovePlacementGroupResponse> RemovePlacementGroupNamed(
    ClusterClient& client, const std::string& name) {
  v1::RemovePlacementGroupRequest request;
  request.set_request_id(NewRequestId("pg-remove"));
  request.set_name(name);
  v1::RemovePlacementGroupResponse response;
  TESSERA_RETURN_IF_ERROR(
      client.Call(client.HeadPeer(), Retry::kSafe, [&](grpc::ClientContext* ctx) {
        ctx->set_deadline(absl::ToChronoTime(absl::Now() + kReservationCallDeadline));
        return client.head().RemovePlacementGroup(ctx, request, &response);
      }));
  return response;
}

absl::StatusOr<v1::ReleaseSlicesResponse> ReleaseSlicesNamed(ClusterClient& client,
                                                             const std::string& name) {
  v1::ReleaseSlicesRequest request;
  request.set_request_id(NewRequestId("slice-release"));
  request.set_name(name);
  v1::ReleaseSlicesResponse response;
  TESSERA_RETURN_IF_ERROR(
      client.Call(client.HeadPeer(), Retry::kSafe, [&](grpc::ClientContext* ctx) {
        ctx->set_deadline(absl::ToChronoTime(absl::Now() + kReservationCallDeadline));
        return client.head().ReleaseSlices(ctx, request, &response);
      }));
  return response;
}

}  // namespace tessera::client

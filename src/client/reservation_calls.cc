#include "client/reservation_calls.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "labels/label_selector.h"
#include "vocabulary/tpu_accelerator_type.h"
#include "vocabulary/tpu_generation.h"
#include "vocabulary/tpu_topology.h"
#include "wire/proto_convert.h"

namespace tessera::client {

absl::Status RestrictSliceAlternatives(v1::ReserveSlicesRequest& request,
                                       std::string_view selector_what, const std::string& domain,
                                       const std::string& selector, bool sub_slice) {
  std::optional<LabelSelector> parsed;
  if (!selector.empty()) {
    absl::StatusOr<LabelSelector> text = ParseLabelSelector(selector);
    if (!text.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(ToAbsl(selector_what), ": ", text.status().message()));
    }
    parsed = *std::move(text);
  }
  for (v1::SliceAlternative& alt : *request.mutable_alternatives()) {
    alt.set_domain(domain);
    alt.set_sub_slice(sub_slice);
    if (parsed.has_value()) wire::LabelSelectorToProto(*parsed, alt.mutable_label_selector());
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::SliceAlternative> TpuSliceAlternative(std::string_view what,
                                                         std::string_view accelerator,
                                                         std::string_view topology, int num_slices,
                                                         bool per_chip) {
  v1::SliceAlternative alt;
  auto generation = ParseTpuGeneration(accelerator);
  if (generation.ok()) {
    auto shape = ParseTpuTopologyFor(*generation, topology);
    if (!shape.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(ToAbsl(what), ": ", shape.status().message()));
    }
    alt.set_accelerator_type(TpuTypeString(*generation));
    alt.set_topology(shape->ToString());
  } else if (ParseTpuAcceleratorType(accelerator).ok()) {
    // A pod type ("v6e-16") names the shape's chip count; the head matches it with the topology.
    alt.set_accelerator_type(std::string(accelerator));
    alt.set_topology(std::string(Trim(topology)));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(what), ": ", generation.status().message()));
  }
  if (alt.topology().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(ToAbsl(what), ": a topology is needed"));
  }
  if (num_slices < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(what), ": the number of slices must be at least 1"));
  }
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

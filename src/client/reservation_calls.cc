#include "client/reservation_calls.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "hardware/tpu/tpu_accelerator_type.h"
#include "hardware/tpu/tpu_generation.h"
#include "hardware/tpu/tpu_topology.h"
#include "labels/label_selector.h"
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

absl::Status WaitInSteps(Clock& clock, absl::Duration wait, const std::function<bool()>& stopped,
                         const std::function<bool()>& settled,
                         const std::function<absl::Status(absl::Duration)>& step, bool ask_first) {
  const absl::Time until = clock.Now() + wait;
  bool ask = ask_first;
  while (ask || (!settled() && clock.Now() < until && !(stopped && stopped()))) {
    const absl::Duration left = std::max(until - clock.Now(), absl::ZeroDuration());
    TESSERA_RETURN_IF_ERROR(step(stopped ? std::min(left, kStopCheckInterval) : left));
    ask = false;
  }
  return absl::OkStatus();
}

namespace {

// One wait call of the head (WaitPlacementGroup, WaitSliceGroup) for the group `name`, which the
// head answers within `timeout`: `call(context, request, info)` makes it.
template <typename Request, typename Info, typename Call>
absl::Status WaitCall(ClusterClient& client, const std::string& name, absl::Duration timeout,
                      Info* info, Call&& call) {
  Request request;
  request.set_name(name);
  request.set_timeout_ms(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout)));
  return client.Call(client.HeadPeer(), Retry::kSafe, [&](grpc::ClientContext* ctx) {
    // The head answers by timeout_ms: give the call that much more than its usual deadline.
    ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout + absl::Seconds(10)));
    return call(ctx, request, info);
  });
}

}  // namespace

absl::StatusOr<v1::PlacementGroupInfo> WaitPlacementGroupPlaced(
    ClusterClient& client, const std::string& name, v1::PlacementGroupInfo info,
    absl::Duration wait, const std::function<bool()>& stopped, bool through_infeasible) {
  auto settled = [&] {
    return info.state() == v1::PLACEMENT_GROUP_STATE_CREATED ||
           (!through_infeasible && info.state() == v1::PLACEMENT_GROUP_STATE_INFEASIBLE);
  };
  auto step = [&](absl::Duration timeout) {
    return WaitCall<v1::WaitPlacementGroupRequest>(
        client, name, timeout, &info,
        [&](grpc::ClientContext* ctx, const v1::WaitPlacementGroupRequest& request,
            v1::PlacementGroupInfo* out) {
          return client.head().WaitPlacementGroup(ctx, request, out);
        });
  };
  // Not yet described: one call says where it stands, however short the wait.
  TESSERA_RETURN_IF_ERROR(
      WaitInSteps(*Clock::Real(), wait, stopped, settled, step,
                  /*ask_first=*/info.state() == v1::PLACEMENT_GROUP_STATE_UNSPECIFIED));
  return info;
}

absl::StatusOr<v1::PlacementGroupInfo> CreatePlacementGroupAndWait(
    ClusterClient& client, const v1::CreatePlacementGroupRequest& request, absl::Duration wait,
    const std::function<bool()>& stopped, bool through_infeasible) {
  TESSERA_ASSIGN_OR_RETURN(v1::PlacementGroupInfo info, SubmitPlacementGroup(client, request));
  return WaitPlacementGroupPlaced(client, request.name(), std::move(info), wait, stopped,
                                  through_infeasible);
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
  // The name the head gave it (its id when the request named none).
  const std::string name = info.name();
  TESSERA_RETURN_IF_ERROR(WaitInSteps(
      *Clock::Real(), wait, stopped, [&] { return SliceGroupSettled(info.state()); },
      [&](absl::Duration timeout) {
        return WaitCall<v1::WaitSliceGroupRequest>(
            client, name, timeout, &info,
            [&](grpc::ClientContext* ctx, const v1::WaitSliceGroupRequest& wait_request,
                v1::SliceGroupInfo* out) {
              return client.head().WaitSliceGroup(ctx, wait_request, out);
            });
      }));
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

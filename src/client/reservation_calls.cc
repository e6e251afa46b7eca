#include "client/reservation_calls.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

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
        return client.head_reservations().CreatePlacementGroup(ctx, request, &info);
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
          return client.head_reservations().WaitPlacementGroup(ctx, request, out);
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
        return client.head_reservations().ReserveSlices(ctx, request, &info);
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
              return client.head_reservations().WaitSliceGroup(ctx, wait_request, out);
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
        return client.head_reservations().RemovePlacementGroup(ctx, request, &response);
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
        return client.head_reservations().ReleaseSlices(ctx, request, &response);
      }));
  return response;
}

}  // namespace tessera::client

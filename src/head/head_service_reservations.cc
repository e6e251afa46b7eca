// HeadReservationsService, the reservations' RPCs: placement groups and slice groups (checked,
// converted, answered once per request id, then the ClusterController's), their listings, and the
// drivers that own them. A reservation created with an owner lives as long as that driver keeps
// calling KeepDriverAlive (the C++ API does every second) and is released when the driver says it
// exited or falls silent for the driver timeout, the way the peers release a job's reservations
// with the job unless they were created detached; so are the named actors it owns.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "head/head_service_internal.h"
#include "head/head_services.h"
#include "head/request_limits.h"
#include "rpc/status_conversion.h"

namespace tessera {

using head_internal::Invalid;
using head_internal::InvalidText;
using head_internal::RunDurably;

HeadReservationsService::HeadReservationsService(HeadParts& parts)
    : parts_(parts),
      options_(parts.options),
      clock_(parts.clock),
      writer_(parts.writer),
      drivers_(parts.drivers),
      controller_(parts.controller),
      create_cache_(parts.options.request_cache_capacity),
      remove_cache_(parts.options.request_cache_capacity),
      reserve_cache_(parts.options.request_cache_capacity),
      release_cache_(parts.options.request_cache_capacity),
      create_refusals_(parts.options.request_cache_capacity),
      remove_refusals_(parts.options.request_cache_capacity),
      reserve_refusals_(parts.options.request_cache_capacity),
      release_refusals_(parts.options.request_cache_capacity) {}

void HeadReservationsService::RememberRestoredCreates() {
  std::vector<std::pair<std::string, v1::PlacementGroupInfo>> groups;  // request id -> answer
  std::vector<std::pair<std::string, v1::SliceGroupInfo>> slices;
  {
    absl::MutexLock lock(controller_.mutex());
    for (const auto& [name, group] : controller_.groups()) {
      if (group.request.request_id().empty()) continue;
      auto& [id, info] = groups.emplace_back(group.request.request_id(), v1::PlacementGroupInfo());
      controller_.DescribeGroup(group, &info);
    }
    for (const auto& [name, slice] : controller_.slices()) {
      if (slice.request.request_id().empty()) continue;
      auto& [id, info] = slices.emplace_back(slice.request.request_id(), v1::SliceGroupInfo());
      controller_.DescribeSlice(slice, &info);
    }
  }
  // Run stores the answer; what it returns is that same answer.
  for (const auto& group : groups) {
    create_cache_.Run(group.first, [&] { return CreateResult{grpc::Status::OK, group.second}; });
  }
  for (const auto& slice : slices) {
    reserve_cache_.Run(slice.first, [&] { return ReserveResult{grpc::Status::OK, slice.second}; });
  }
}

grpc::Status HeadReservationsService::CreatePlacementGroup(
    grpc::ServerContext*, const v1::CreatePlacementGroupRequest* request,
    v1::PlacementGroupInfo* response) {
  // Before the request-id cache and any lock: an oversized request costs nothing.
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  return RunDurably(
      writer_, create_refusals_, create_cache_, request->request_id(), response,
      [&](v1::PlacementGroupInfo* out) {
        auto spec = wire::PlacementGroupSpecFromProto(*request);
        if (!spec.ok()) return Invalid(spec.status());
        return rpc::ToGrpcStatus(controller_.CreatePlacementGroup(*request, *std::move(spec), out));
      });
}

grpc::Status HeadReservationsService::RemovePlacementGroup(
    grpc::ServerContext*, const v1::RemovePlacementGroupRequest* request,
    v1::RemovePlacementGroupResponse* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  return RunDurably(
      writer_, remove_refusals_, remove_cache_, request->request_id(), response,
      [&](v1::RemovePlacementGroupResponse* out) {
        return rpc::ToGrpcStatus(controller_.RemovePlacementGroup(request->name(), out));
      });
}

grpc::Status HeadReservationsService::WaitPlacementGroup(
    grpc::ServerContext*, const v1::WaitPlacementGroupRequest* request,
    v1::PlacementGroupInfo* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  if (request->timeout_ms() < 0) return InvalidText("timeout_ms: is negative");
  return rpc::ToGrpcStatus(controller_.WaitPlacementGroup(
      request->name(), absl::Milliseconds(request->timeout_ms()), response));
}

grpc::Status HeadReservationsService::ListPlacementGroups(
    grpc::ServerContext*, const v1::ListRequest* request,
    v1::ListPlacementGroupsResponse* response) {
  constexpr std::string_view kListing = "placement-groups";
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  auto page = head_internal::ParsePageRequest(*request, kListing, options_.max_page_size);
  if (!page.ok()) return Invalid(page.status());
  absl::MutexLock lock(controller_.mutex());
  const auto& groups = controller_.groups();
  head_internal::PageFiller filler(page->size, options_.max_page_bytes);
  std::optional<std::string> resume = head_internal::AppendPage(
      groups.upper_bound(page->after), groups.end(), filler, response->mutable_groups(),
      [](const auto& entry) { return entry.first; },
      [&](const auto& entry, v1::PlacementGroupInfo* out) {
        controller_.AssertHeld();  // AppendPage runs it under this function's lock
        controller_.DescribeGroup(entry.second, out);
      });
  if (resume.has_value())
    response->set_next_page_token(head_internal::PageToken(kListing, *resume));
  return grpc::Status::OK;
}

grpc::Status HeadReservationsService::ReserveSlices(grpc::ServerContext*,
                                                    const v1::ReserveSlicesRequest* request,
                                                    v1::SliceGroupInfo* response) {
  // Before the request-id cache and any lock: an oversized request costs nothing.
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  return RunDurably(
      writer_, reserve_refusals_, reserve_cache_, request->request_id(), response,
      [&](v1::SliceGroupInfo* out) {
        auto parsed = wire::DomainGroupRequestFromProto(*request);
        if (!parsed.ok()) return Invalid(parsed.status());
        return rpc::ToGrpcStatus(controller_.ReserveSlices(*request, *std::move(parsed), out));
      });
}

grpc::Status HeadReservationsService::ReleaseSlices(grpc::ServerContext*,
                                                    const v1::ReleaseSlicesRequest* request,
                                                    v1::ReleaseSlicesResponse* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  return RunDurably(writer_, release_refusals_, release_cache_, request->request_id(), response,
                    [&](v1::ReleaseSlicesResponse* out) {
                      return rpc::ToGrpcStatus(controller_.ReleaseSlices(request->name(), out));
                    });
}

grpc::Status HeadReservationsService::WaitSliceGroup(grpc::ServerContext*,
                                                     const v1::WaitSliceGroupRequest* request,
                                                     v1::SliceGroupInfo* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  if (request->timeout_ms() < 0) return InvalidText("timeout_ms: is negative");
  return rpc::ToGrpcStatus(controller_.WaitSliceGroup(
      request->name(), absl::Milliseconds(request->timeout_ms()), response));
}

grpc::Status HeadReservationsService::ListSlices(grpc::ServerContext*,
                                                 const v1::ListRequest* request,
                                                 v1::ListSlicesResponse* response) {
  // One listing of two tables: the slice groups by name, then the slices by name. The token's
  // key says which: "g/<group>" or "s/<slice>". Groups come first so that a caller looking for
  // its group finds it on the first page while there are fewer groups than a page holds.
  constexpr std::string_view kListing = "slices";
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  auto page = head_internal::ParsePageRequest(*request, kListing, options_.max_page_size);
  if (!page.ok()) return Invalid(page.status());
  const std::string& after = page->after;
  const bool in_slices = absl::StartsWith(after, "s/");
  if (!after.empty() && !in_slices && !absl::StartsWith(after, "g/")) {
    return InvalidText(absl::StrCat("page_token: ", Quote(request->page_token()),
                                    " is not a page token of the slices listing"));
  }
  const std::string after_key = after.empty() ? "" : after.substr(2);
  absl::MutexLock lock(controller_.mutex());
  head_internal::PageFiller filler(page->size, options_.max_page_bytes);
  if (!in_slices) {
    const auto& slices = controller_.slices();
    std::optional<std::string> resume = head_internal::AppendPage(
        slices.upper_bound(after_key), slices.end(), filler, response->mutable_groups(),
        [](const auto& entry) { return entry.first; },
        [&](const auto& entry, v1::SliceGroupInfo* out) {
          controller_.AssertHeld();  // AppendPage runs it under this function's lock
          controller_.DescribeSlice(entry.second, out);
        });
    if (resume.has_value()) {
      response->set_next_page_token(head_internal::PageToken(kListing, "g/" + *resume));
      return grpc::Status::OK;
    }
  }
  std::map<std::string, v1::ListSlicesResponse::Slice> catalog = controller_.SliceCatalog();
  std::optional<std::string> resume = head_internal::AppendPage(
      catalog.upper_bound(in_slices ? after_key : ""), catalog.end(), filler,
      response->mutable_slices(), [](const auto& entry) { return entry.first; },
      [](const auto& entry, v1::ListSlicesResponse::Slice* out) { *out = entry.second; });
  if (resume.has_value()) {
    response->set_next_page_token(head_internal::PageToken(kListing, "s/" + *resume));
  }
  return grpc::Status::OK;
}

grpc::Status HeadReservationsService::KeepDriverAlive(grpc::ServerContext*,
                                                      const v1::KeepDriverAliveRequest* request,
                                                      v1::KeepDriverAliveResponse* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  if (request->driver_id().empty()) return InvalidText("driver_id: is empty");
  drivers_.NoteAlive(request->driver_id(), clock_->Now());
  response->set_timeout_ms(absl::ToInt64Milliseconds(drivers_.timeout()));
  return grpc::Status::OK;
}

grpc::Status HeadReservationsService::DriverExited(grpc::ServerContext*,
                                                   const v1::DriverExitedRequest* request,
                                                   v1::DriverExitedResponse* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  if (request->driver_id().empty()) return InvalidText("driver_id: is empty");
  for (const std::string& name : parts_.ReleaseDriver(request->driver_id(), "exited")) {
    response->add_released(name);
  }
  return grpc::Status::OK;
}

}  // namespace tessera

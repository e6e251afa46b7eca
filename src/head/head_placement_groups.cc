// HeadService, placement groups: what sets them apart from slice groups — the
// PlacementGroupScheduler chooses (and re-chooses) their bundles, and the protocol describes them
// as PlacementGroupInfo. Their commit and removal are the shared reservation machinery.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "head/head_service.h"
#include "head/head_service_internal.h"
#include "head/request_limits.h"

namespace tessera {

using head_internal::Exact;
using head_internal::Invalid;
using head_internal::InvalidText;
using head_internal::RunOnce;

std::vector<std::optional<BundleHold>> HeadService::DesiredBundles(
    const GroupEntry& group) const {
  std::vector<std::optional<BundleHold>> desired(group.confirmed.size());
  if (!group.scheduled.has_value()) return desired;
  const PlacementGroup* placed = groups_scheduler_.Find(*group.scheduled);
  if (placed == nullptr) return desired;
  desired.resize(placed->bundles.size());
  for (size_t i = 0; i < placed->bundles.size(); ++i) {
    if (placed->bundles[i].has_value()) {
      desired[i] = BundleHold{placed->bundles[i]->node.value(), Exact(placed->bundles[i]->allocation)};
    }
  }
  return desired;
}

void HeadService::FillGroupInfo(const GroupEntry& group, v1::PlacementGroupInfo* info) const {
  info->Clear();
  info->set_id(group.id);
  info->set_name(group.name);
  info->set_strategy(std::string(PlacementStrategyName(group.spec.strategy)));
  info->set_state(ReservationStateName(group.kind, group.phase));
  info->set_option(group.option);
  info->set_owner(group.owner);
  std::vector<std::optional<BundleHold>> desired = DesiredBundles(group);
  size_t count = group.scheduled.has_value() ? desired.size() : group.spec.primary.bundles.size();
  for (size_t i = 0; i < count; ++i) {
    v1::BundleLocation* location = info->add_bundles();
    location->set_index(static_cast<int>(i));
    if (i < desired.size() && desired[i].has_value()) {
      location->set_node_id(desired[i]->node);
      rpc::AllocationToProto(desired[i]->allocation, location->mutable_allocation());
    }
  }
  info->set_explanation(group.ShownExplanation());
}

void HeadService::TryPlaceGroup(GroupEntry& group) {
  auto result = groups_scheduler_.Create(group.spec);
  if (!result.ok()) {
    group.phase = ReservationPhase::kInfeasible;
    group.explanation = std::string(result.status().message());
    return;
  }
  if (result->status == ScheduleStatus::kPlaced) {
    group.scheduled = result->id;
    group.option = static_cast<int>(result->option);
    group.confirmed.assign(result->bundles.size(), std::nullopt);
    group.phase = ReservationPhase::kCommitting;
    group.explanation.clear();
    return;
  }
  group.phase = result->status == ScheduleStatus::kPending ? ReservationPhase::kPending
                                                           : ReservationPhase::kInfeasible;
  group.explanation = result->explanation;
}

grpc::Status HeadService::CreatePlacementGroup(grpc::ServerContext*,
                                               const v1::CreatePlacementGroupRequest* request,
                                               v1::PlacementGroupInfo* response) {
  // Before the request-id cache and any lock: an oversized request costs nothing.
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  return RunOnce(create_cache_, request->request_id(), response,
                 [&](v1::PlacementGroupInfo* out) { return DoCreatePlacementGroup(*request, out); });
}

grpc::Status HeadService::DoCreatePlacementGroup(const v1::CreatePlacementGroupRequest& request,
                                                 v1::PlacementGroupInfo* response) {
  auto spec = rpc::PlacementGroupSpecFromProto(request);
  if (!spec.ok()) return Invalid(spec.status());
  std::string name;
  {
    absl::MutexLock lock(&mu_);
    std::string id;
    grpc::Status claimed = ClaimName(request.name(), "pg", &next_group_, &id, &name);
    if (!claimed.ok()) return claimed;
    GroupEntry entry;
    entry.id = id;
    entry.name = name;
    entry.owner = request.owner();
    NoteDriverAlive(entry.owner);
    entry.request = request;
    entry.spec = *std::move(spec);
    entry.spec.name = name;
    GroupEntry& group = groups_.emplace(name, std::move(entry)).first->second;
    TryPlaceGroup(group);
    Persist(group);
    if (group.phase != ReservationPhase::kCommitting) {
      FillGroupInfo(group, response);
      return grpc::Status::OK;
    }
  }
  SyncAndDescribe(ReservationKind::kPlacementGroup, name, [&](const Reservation* group) {
    if (group == nullptr) {
      response->set_name(name);
      response->set_state("REMOVED");
      return;
    }
    FillGroupInfo(static_cast<const GroupEntry&>(*group), response);
  });
  return grpc::Status::OK;
}

grpc::Status HeadService::RemovePlacementGroup(grpc::ServerContext*,
                                               const v1::RemovePlacementGroupRequest* request,
                                               v1::RemovePlacementGroupResponse* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  return RunOnce(remove_cache_, request->request_id(), response,
                 [&](v1::RemovePlacementGroupResponse* out) {
                   return DoRemovePlacementGroup(*request, out);
                 });
}

grpc::Status HeadService::DoRemovePlacementGroup(const v1::RemovePlacementGroupRequest& request,
                                                 v1::RemovePlacementGroupResponse* response) {
  const std::string& name = request.name();
  if (name.empty()) return InvalidText("name: is empty");
  std::vector<NodeWork> work;
  {
    absl::MutexLock lock(&mu_);
    Reservation* group = WaitUntilIdle(ReservationKind::kPlacementGroup, name);
    if (group == nullptr) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("no placement group named ", name));
    }
    group->busy = true;
    work = CancelAllWork(*group);
  }
  // The agents give the bundles back first, so the view never offers them while still held.
  CancelBundles(name, work);
  absl::MutexLock lock(&mu_);
  GroupEntry& group = groups_.at(name);
  for (size_t i = 0; i < group.confirmed.size(); ++i) {
    const std::optional<BundleHold>& hold = group.confirmed[i];
    if (!hold.has_value()) continue;
    v1::BundleLocation* location = response->add_released();
    location->set_index(static_cast<int>(i));
    location->set_node_id(hold->node);
    rpc::AllocationToProto(hold->allocation, location->mutable_allocation());
  }
  Erase(group);
  return grpc::Status::OK;
}

grpc::Status HeadService::WaitPlacementGroup(grpc::ServerContext*,
                                             const v1::WaitPlacementGroupRequest* request,
                                             v1::PlacementGroupInfo* response) {
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  if (request->timeout_ms() < 0) return InvalidText("timeout_ms: is negative");
  // A real wait on a condition variable: real time, whatever clock the head runs on.
  absl::Time deadline = absl::Now() + absl::Milliseconds(request->timeout_ms());
  absl::MutexLock lock(&mu_);
  while (true) {
    auto it = groups_.find(request->name());
    if (it == groups_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("no placement group named ", request->name()));
    }
    if (it->second.phase == ReservationPhase::kHeld || absl::Now() >= deadline) {
      FillGroupInfo(it->second, response);
      return grpc::Status::OK;
    }
    idle_.WaitWithDeadline(&mu_, deadline);
  }
}

grpc::Status HeadService::ListPlacementGroups(grpc::ServerContext*, const v1::ListRequest* request,
                                              v1::ListPlacementGroupsResponse* response) {
  constexpr std::string_view kListing = "placement-groups";
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  auto page = head_internal::ParsePageRequest(*request, kListing, options_.max_page_size);
  if (!page.ok()) return Invalid(page.status());
  absl::MutexLock lock(&mu_);
  head_internal::PageFiller filler(page->size, options_.max_page_bytes);
  std::optional<std::string> resume = head_internal::AppendPage(
      groups_.upper_bound(page->after), groups_.end(), filler, response->mutable_groups(),
      [](const auto& entry) { return entry.first; },
      [&](const auto& entry, v1::PlacementGroupInfo* out) { FillGroupInfo(entry.second, out); });
  if (resume.has_value()) response->set_next_page_token(head_internal::PageToken(kListing, *resume));
  return grpc::Status::OK;
}

}  // namespace tessera

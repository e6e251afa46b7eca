// ReservationManager, placement groups: what sets them apart from slice groups — the
// PlacementGroupScheduler chooses (and re-chooses) their bundles, and the protocol describes them
// as PlacementGroupInfo. Their commit and removal are the shared reservation machinery.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "head/head_service_internal.h"
#include "head/reservation_manager.h"
#include "metrics/scoped_timer.h"

namespace tessera {

using head_internal::Exact;

std::vector<std::optional<BundleHold>> ReservationManager::DesiredBundles(
    const GroupEntry& group) const {
  std::vector<std::optional<BundleHold>> desired(group.confirmed.size());
  if (!group.scheduled.has_value()) return desired;
  const PlacementGroup* placed = cluster_->groups.Find(*group.scheduled);
  if (placed == nullptr) return desired;
  desired.resize(placed->bundles.size());
  for (size_t i = 0; i < placed->bundles.size(); ++i) {
    if (placed->bundles[i].has_value()) {
      desired[i] = BundleHold{placed->bundles[i]->node.value(), Exact(placed->bundles[i]->allocation)};
    }
  }
  return desired;
}

void ReservationManager::DescribeGroup(const GroupEntry& group, v1::PlacementGroupInfo* info) const {
  info->Clear();
  info->set_id(group.id);
  info->set_name(group.name);
  info->set_strategy(std::string(PlacementStrategyName(group.spec.strategy)));
  info->set_state(PlacementGroupStateOf(group.phase));
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

void ReservationManager::TryPlaceGroup(GroupEntry& group) {
  auto result = [&] {
    metrics::ScopedTimer timer(options_.latency.group_decision);
    return cluster_->groups.Create(group.spec);
  }();
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

absl::Status ReservationManager::CreatePlacementGroup(
    const v1::CreatePlacementGroupRequest& request, PlacementGroupSpec spec,
    v1::PlacementGroupInfo* response) {
  std::string name;
  {
    absl::MutexLock lock(&cluster_->mu);
    std::string id;
    if (absl::Status claimed = ClaimName(request.name(), "pg", &next_group_, &id, &name);
        !claimed.ok()) {
      return claimed;
    }
    GroupEntry entry;
    entry.id = id;
    entry.name = name;
    entry.owner = request.owner();
    options_.drivers->NoteAlive(entry.owner, options_.clock->Now());
    entry.request = request;
    entry.spec = std::move(spec);
    entry.spec.name = name;
    GroupEntry& group = groups_.emplace(name, std::move(entry)).first->second;
    options_.events->RecordChange(
        absl::StrCat("placement group ", name, " created: ", group.spec.primary.bundles.size(),
                     " bundles, ", ToAbsl(PlacementStrategyName(group.spec.strategy)),
                     group.owner.empty() ? "" : absl::StrCat(", owner ", group.owner)),
        "reservation");
    TryPlaceGroup(group);
    Persist(group);
    if (group.phase != ReservationPhase::kCommitting) {
      DescribeGroup(group, response);
      return absl::OkStatus();
    }
  }
  SyncAndDescribe(ReservationKind::kPlacementGroup, name, [&](const Reservation* group) {
    if (group == nullptr) {
      response->set_name(name);
      response->set_state(v1::PLACEMENT_GROUP_STATE_REMOVED);
      return;
    }
    DescribeGroup(static_cast<const GroupEntry&>(*group), response);
  });
  return absl::OkStatus();
}

absl::Status ReservationManager::RemovePlacementGroup(const std::string& name,
                                                      v1::RemovePlacementGroupResponse* response) {
  return Remove(ReservationKind::kPlacementGroup, name, [&](Reservation& group) {
    for (size_t i = 0; i < group.confirmed.size(); ++i) {
      const std::optional<BundleHold>& hold = group.confirmed[i];
      if (!hold.has_value()) continue;
      v1::BundleLocation* location = response->add_released();
      location->set_index(static_cast<int>(i));
      location->set_node_id(hold->node);
      rpc::AllocationToProto(hold->allocation, location->mutable_allocation());
    }
  });
}

absl::Status ReservationManager::WaitPlacementGroup(const std::string& name,
                                                    absl::Duration timeout,
                                                    v1::PlacementGroupInfo* response) {
  // A real wait on a condition variable: real time, whatever clock the head runs on (a fake
  // clock would never move while this waits).
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&cluster_->mu);
  while (true) {
    auto it = groups_.find(name);
    if (it == groups_.end()) {
      return absl::NotFoundError(absl::StrCat("no placement group named ", name));
    }
    if (it->second.phase == ReservationPhase::kHeld || absl::Now() >= deadline) {
      DescribeGroup(it->second, response);
      return absl::OkStatus();
    }
    idle_.WaitWithDeadline(&cluster_->mu, deadline);
  }
}

}  // namespace tessera

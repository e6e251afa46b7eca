// ClusterController, placement groups: what sets them apart from slice groups — the engine
// chooses (and re-chooses) their bundles, and the protocol describes them as
// PlacementGroupInfo. Their commit and removal are the shared reservation machinery.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "head/cluster_controller.h"

namespace tessera {

void ClusterController::DescribeGroup(const GroupEntry& group, v1::PlacementGroupInfo* info) const {
  const ReservationRecord& record = Record(group);
  info->Clear();
  info->set_id(group.id);
  info->set_name(group.name);
  info->set_strategy(wire::PlacementStrategyToProto(record.spec.strategy));
  info->set_state(PlacementGroupStateOf(group.phase));
  info->set_option(static_cast<int>(record.choice));
  info->set_owner(group.owner);
  std::vector<std::optional<BundleHold>> desired = DesiredHolds(group);
  size_t count = record.held() ? desired.size() : record.spec.primary.bundles.size();
  for (size_t i = 0; i < count; ++i) {
    v1::BundleLocation* location = info->add_bundles();
    location->set_index(static_cast<int>(i));
    if (i < desired.size() && desired[i].has_value()) {
      location->set_node_id(desired[i]->node);
      wire::AllocationToProto(desired[i]->allocation, location->mutable_allocation());
    }
  }
  for (const ResourceSet& shape : record.spec.primary.bundles) {
    wire::ResourcesToProto(shape, info->add_bundle_shapes());
  }
  info->set_explanation(group.ShownExplanation());
}

absl::Status ClusterController::CreatePlacementGroup(const v1::CreatePlacementGroupRequest& request,
                                                     PlacementGroupSpec spec,
                                                     v1::PlacementGroupInfo* response) {
  std::string name;
  {
    absl::MutexLock lock(&mu_);
    // A degraded store refuses at once: nothing is placed.
    if (absl::Status writable = options_.writer->Writable(); !writable.ok()) return writable;
    const int64_t counter_before = next_group_;
    std::string id;
    if (absl::Status claimed = ClaimName(request.name(), "pg", &next_group_, &id, &name);
        !claimed.ok()) {
      return claimed;
    }
    spec.name = name;
    const size_t bundles = spec.primary.bundles.size();
    const PlacementStrategy strategy = spec.strategy;
    // The spec was checked when it was read: the engine refuses nothing here but a name in use,
    // which ClaimName has ruled out.
    absl::StatusOr<ReservationOutcome> outcome =
        state_.reservations.CreatePlacementGroup(std::move(spec));
    if (!outcome.ok()) return outcome.status();
    GroupEntry entry;
    entry.id = id;
    entry.name = name;
    entry.owner = request.owner();
    entry.request = request;
    GroupEntry& group = groups_.emplace(name, std::move(entry)).first->second;
    ApplyPlacement(group, *outcome);
    // Durable before anyone hears of it, the agents included.
    if (absl::Status written = PersistCreated(group, &next_group_, counter_before); !written.ok()) {
      return written;
    }
    options_.drivers->NoteAlive(group.owner, options_.clock->Now());
    options_.events->RecordChange(
        absl::StrCat("placement group ", name, " created: ", bundles, " bundles, ",
                     ToAbsl(PlacementStrategyName(strategy)),
                     group.owner.empty() ? "" : absl::StrCat(", owner ", group.owner)),
        "reservation");
    if (group.phase != ReservationPhase::kCommitting) {
      DescribeGroup(group, response);
      return absl::OkStatus();
    }
  }
  SyncAndDescribe(ReservationKind::kPlacementGroup, name,
                  [&](const Reservation* group) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                    if (group == nullptr) {
                      response->set_name(name);
                      response->set_state(v1::PLACEMENT_GROUP_STATE_REMOVED);
                      return;
                    }
                    DescribeGroup(static_cast<const GroupEntry&>(*group), response);
                  });
  return absl::OkStatus();
}

absl::Status ClusterController::RemovePlacementGroup(const std::string& name,
                                                     v1::RemovePlacementGroupResponse* response,
                                                     bool acknowledged) {
  return Remove(ReservationKind::kPlacementGroup, name, acknowledged, [&](Reservation& group) {
    for (size_t i = 0; i < group.confirmed.size(); ++i) {
      const std::optional<BundleHold>& hold = group.confirmed[i];
      if (!hold.has_value()) continue;
      v1::BundleLocation* location = response->add_released();
      location->set_index(static_cast<int>(i));
      location->set_node_id(hold->node);
      wire::AllocationToProto(hold->allocation, location->mutable_allocation());
    }
  });
}

absl::Status ClusterController::WaitPlacementGroup(const std::string& name, absl::Duration timeout,
                                                   v1::PlacementGroupInfo* response) {
  absl::MutexLock lock(&mu_);
  const Reservation* group =
      AwaitSettled(ReservationKind::kPlacementGroup, name, timeout,
                   [](ReservationPhase phase) { return phase == ReservationPhase::kHeld; });
  if (group == nullptr) return absl::NotFoundError(absl::StrCat("no placement group named ", name));
  DescribeGroup(static_cast<const GroupEntry&>(*group), response);
  return absl::OkStatus();
}

}  // namespace tessera

// ClusterController::Restore: a head started on a StateStore a previous head wrote (Redis)
// reads its placement groups and slice groups back before it serves, with exactly their
// bundles' nodes and allocations, so running work inside them goes on. Each bundle counts as
// committed on its agent; reconciliation checks that once the agent has heard from this head.
// The drivers that own them get a whole driver timeout to call again.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "head/cluster_controller.h"
#include "head/state_store.h"
#include "wire/proto_convert.h"

namespace tessera {

namespace {

absl::Status Corrupt(std::string_view table, const std::string& key, absl::string_view why) {
  return absl::DataLossError(
      absl::StrCat("state store table ", ToAbsl(table), ", key ", key, ": ", why));
}

// The number after the last '-' of an id such as "pg-7" (0 when there is none).
int64_t IdNumber(const std::string& id) {
  int64_t n = 0;
  const size_t dash = id.rfind('-');
  if (dash == std::string::npos || !absl::SimpleAtoi(id.substr(dash + 1), &n)) return 0;
  return n;
}

// The record under `key` in `table` (a v1::StoredPlacementGroup or v1::StoredSliceGroup, of a
// `kind` "placement group" or "slice group"), once it is checked to be that group's.
template <typename Stored>
absl::StatusOr<Stored> ReadStoredRecord(std::string_view table, const std::string& key,
                                        const std::string& value, std::string_view kind) {
  Stored stored;
  if (!stored.ParseFromString(value)) {
    return Corrupt(table, key, absl::StrCat("not a ", ToAbsl(kind), " record"));
  }
  if (stored.info().name() != key) return Corrupt(table, key, "holds another group");
  return stored;
}

// What the manager kept of a stored group before the restart (GroupEntry or SliceEntry); the
// engine's placement and the phase are restored apart.
template <typename Entry, typename Stored>
Entry EntryOfStoredRecord(const std::string& key, const Stored& stored) {
  Entry entry;
  entry.id = stored.info().id();
  entry.name = key;
  entry.owner = stored.request().owner();
  entry.request = stored.request();
  entry.explanation = stored.info().explanation();
  return entry;
}

// A group that held nothing (`infeasible`, or pending) waits for room as it did: Tick retries
// it. `spec` is its PlacementGroupSpec or DomainGroupRequest.
template <typename Spec>
absl::Status RestoreWaitingEntry(ReservationEngine& engine, std::string_view table,
                                 const std::string& key, Spec spec, bool infeasible,
                                 Reservation& entry) {
  entry.phase = infeasible ? ReservationPhase::kInfeasible : ReservationPhase::kPending;
  if (absl::Status kept = engine.RestoreWaiting(std::move(spec),
                                                entry.phase == ReservationPhase::kInfeasible
                                                    ? ReservationStatus::kInfeasible
                                                    : ReservationStatus::kPending,
                                                entry.explanation);
      !kept.ok()) {
    return Corrupt(table, key, kept.message());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ClusterController::RestoreGroup(const std::string& key, const std::string& value) {
  TESSERA_ASSIGN_OR_RETURN(const v1::StoredPlacementGroup stored,
                           ReadStoredRecord<v1::StoredPlacementGroup>(kPlacementGroupsTable, key,
                                                                      value, "placement group"));
  const v1::PlacementGroupInfo& info = stored.info();
  auto spec = wire::PlacementGroupSpecFromProto(stored.request());
  if (!spec.ok()) return Corrupt(kPlacementGroupsTable, key, spec.status().message());
  spec->name = key;
  GroupEntry entry = EntryOfStoredRecord<GroupEntry>(key, stored);
  const bool held = info.state() == v1::PLACEMENT_GROUP_STATE_CREATED ||
                    info.state() == v1::PLACEMENT_GROUP_STATE_RESCHEDULING;
  if (!held) {
    TESSERA_RETURN_IF_ERROR(
        RestoreWaitingEntry(state_.reservations, kPlacementGroupsTable, key, *std::move(spec),
                            info.state() == v1::PLACEMENT_GROUP_STATE_INFEASIBLE, entry));
    AdoptRestored(std::move(entry), IdNumber(info.id()));
    return absl::OkStatus();
  }
  std::vector<RestoredBundle> bundles(static_cast<size_t>(info.bundles_size()));
  for (const v1::BundleLocation& location : info.bundles()) {
    if (location.index() < 0 || location.index() >= info.bundles_size()) {
      return Corrupt(kPlacementGroupsTable, key, absl::StrCat("bundle index ", location.index()));
    }
    if (location.node_id().empty()) continue;
    auto allocation = wire::AllocationFromProto(location.allocation());
    if (!allocation.ok()) {
      return Corrupt(kPlacementGroupsTable, key, allocation.status().message());
    }
    RestoredBundle& bundle = bundles[static_cast<size_t>(location.index())];
    bundle.node = NodeId(location.node_id());
    bundle.resources = allocation->resources;
    bundle.devices = allocation->devices;
  }
  absl::StatusOr<ReservationOutcome> restored = state_.reservations.RestorePlacementGroup(
      *std::move(spec), static_cast<size_t>(info.option()), bundles);
  if (!restored.ok()) return Corrupt(kPlacementGroupsTable, key, restored.status().message());
  Reservation& group = AdoptRestored(std::move(entry), IdNumber(info.id()));
  if (!ConfirmRestoredOrWait(group, *restored, "placement group")) return absl::OkStatus();
  group.phase = restored->status == ReservationStatus::kPlaced ? ReservationPhase::kHeld
                                                               : ReservationPhase::kDegraded;
  if (!restored->bundles.empty()) {
    group.explanation = restored->explanation;
    options_.events->Record(
        absl::StrCat("placement group ", key,
                     " was restored without some bundles: ", restored->explanation),
        "reservation");
  }
  return absl::OkStatus();
}

absl::Status ClusterController::RestoreSlice(const std::string& key, const std::string& value) {
  TESSERA_ASSIGN_OR_RETURN(
      const v1::StoredSliceGroup stored,
      ReadStoredRecord<v1::StoredSliceGroup>(kSliceGroupsTable, key, value, "slice group"));
  const v1::SliceGroupInfo& info = stored.info();
  auto parsed = wire::DomainGroupRequestFromProto(stored.request());
  if (!parsed.ok()) return Corrupt(kSliceGroupsTable, key, parsed.status().message());
  parsed->name = key;
  SliceEntry entry = EntryOfStoredRecord<SliceEntry>(key, stored);
  if (info.state() != v1::SLICE_GROUP_STATE_RESERVED &&
      info.state() != v1::SLICE_GROUP_STATE_BROKEN) {
    TESSERA_RETURN_IF_ERROR(
        RestoreWaitingEntry(state_.reservations, kSliceGroupsTable, key, *std::move(parsed),
                            info.state() == v1::SLICE_GROUP_STATE_INFEASIBLE, entry));
    AdoptRestored(std::move(entry), IdNumber(info.id()));
    return absl::OkStatus();
  }
  std::vector<DomainBundle> bundles;
  for (const v1::SliceHost& host : info.hosts()) {
    auto allocation = wire::AllocationFromProto(host.allocation());
    if (!allocation.ok()) return Corrupt(kSliceGroupsTable, key, allocation.status().message());
    DomainBundle bundle;
    bundle.node = NodeId(host.node_id());
    bundle.domain = host.domain();
    bundle.worker = host.worker();
    bundle.allocation.resources = allocation->resources;
    bundle.allocation.devices = allocation->devices;
    bundles.push_back(std::move(bundle));
  }
  absl::StatusOr<ReservationOutcome> restored = state_.reservations.RestoreSliceGroup(
      *std::move(parsed), static_cast<size_t>(info.alternative()), bundles);
  if (!restored.ok()) return Corrupt(kSliceGroupsTable, key, restored.status().message());
  Reservation& slice = AdoptRestored(std::move(entry), IdNumber(info.id()));
  if (!ConfirmRestoredOrWait(slice, *restored, "slice group")) return absl::OkStatus();
  if (restored->status == ReservationStatus::kBroken) {
    // As a host loss leaves it: reserved anew once its hosts are back (Tick).
    slice.phase = ReservationPhase::kDegraded;
    slice.explanation = restored->explanation;
    options_.events->Record(
        absl::StrCat("slice group ", key, " was restored broken: ", restored->explanation),
        "reservation");
  } else {
    slice.phase = ReservationPhase::kHeld;
  }
  return absl::OkStatus();
}

Reservation& ClusterController::AdoptRestored(GroupEntry entry, int64_t id_number) {
  next_group_ = std::max(next_group_, id_number + 1);
  // A whole driver timeout to call this head.
  options_.drivers->NoteAlive(entry.owner, options_.clock->Now());
  state_.changed = true;
  const std::string name = entry.name;
  return groups_.emplace(name, std::move(entry)).first->second;
}

Reservation& ClusterController::AdoptRestored(SliceEntry entry, int64_t id_number) {
  next_slice_ = std::max(next_slice_, id_number + 1);
  options_.drivers->NoteAlive(entry.owner, options_.clock->Now());
  state_.changed = true;
  const std::string name = entry.name;
  return slices_.emplace(name, std::move(entry)).first->second;
}

bool ClusterController::ConfirmRestoredOrWait(Reservation& reservation,
                                              const ReservationOutcome& restored,
                                              std::string_view noun) {
  if (restored.status == ReservationStatus::kPending) {
    // The engine refused the record: a placement group no longer fits the cluster (a changed
    // spec rule), or nothing of a slice group is held (the agents' old bundles are released as
    // unknown by reconciliation). It waits anew, whole.
    reservation.phase = ReservationPhase::kPending;
    reservation.explanation = restored.explanation;
    options_.events->Record(
        absl::StrCat(ToAbsl(noun), " ", reservation.name, " ", reservation.explanation),
        "reservation");
    return false;
  }
  const std::vector<int>& not_held = restored.bundles;
  const std::vector<std::optional<BundleHold>> desired = DesiredHolds(reservation);
  reservation.confirmed.assign(desired.size(), std::nullopt);
  for (size_t i = 0; i < desired.size(); ++i) {
    const bool missing =
        std::find(not_held.begin(), not_held.end(), static_cast<int>(i)) != not_held.end();
    if (!desired[i].has_value() || missing) continue;
    // Held on its agent, as before the restart; reconciliation checks that once the agent has
    // heard from this head.
    reservation.confirmed[i] = desired[i];
    NoteCommitted(desired[i]->node, reservation.name, static_cast<int>(i));
  }
  return true;
}

absl::Status ClusterController::Restore() {
  TESSERA_ASSIGN_OR_RETURN(auto groups, options_.writer->store()->List(kPlacementGroupsTable));
  for (const auto& [key, value] : groups) TESSERA_RETURN_IF_ERROR(RestoreGroup(key, value));
  TESSERA_ASSIGN_OR_RETURN(auto slices, options_.writer->store()->List(kSliceGroupsTable));
  for (const auto& [key, value] : slices) TESSERA_RETURN_IF_ERROR(RestoreSlice(key, value));
  if (!groups.empty() || !slices.empty()) {
    options_.events->Record(absl::StrCat("restored ", groups.size(), " placement groups and ",
                                         slices.size(), " slice groups from the state store"),
                            "reservation");
  }
  return absl::OkStatus();
}

}  // namespace tessera

#include "scheduling/reservation_engine.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/ignore_status.h"
#include "base/status_macros.h"
#include "base/string_util.h"

namespace tessera {

std::string_view ReservationNoun(ReservationKind kind) {
  return kind == ReservationKind::kPlacementGroup ? "placement group" : "slice group";
}

std::string_view ReservationStatusName(ReservationStatus status) {
  switch (status) {
    case ReservationStatus::kPending: return "PENDING";
    case ReservationStatus::kInfeasible: return "INFEASIBLE";
    case ReservationStatus::kPlaced: return "PLACED";
    case ReservationStatus::kReplacing: return "RESCHEDULING";
    case ReservationStatus::kBroken: return "BROKEN";
  }
  return "PENDING";
}

ReservationRecord* ReservationEngine::FindMutable(std::string_view name) {
  auto it = records_.find(name);
  return it == records_.end() ? nullptr : &it->second;
}

const ReservationRecord* ReservationEngine::Find(std::string_view name) const {
  auto it = records_.find(name);
  return it == records_.end() ? nullptr : &it->second;
}

ReservationRecord* ReservationEngine::GroupRecord(const RescheduleReport& report) {
  // The scheduler names each group by its record's name.
  ReservationRecord* record = FindMutable(report.name);
  return record != nullptr && record->group == report.id ? record : nullptr;
}

void ReservationEngine::Decide(ReservationKind kind, absl::FunctionRef<void()> decide) {
  if (wrap_) {
    wrap_(kind, decide);
  } else {
    decide();
  }
}

ReservationOutcome ReservationEngine::OutcomeOf(const ReservationRecord& record,
                                                std::vector<int> bundles) {
  return ReservationOutcome{record.kind, record.name, record.status, record.explanation,
                            std::move(bundles)};
}

absl::Status ReservationEngine::CheckNewName(std::string_view name, ReservationKind kind) const {
  if (name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a ", ToAbsl(ReservationNoun(kind)), " needs a name"));
  }
  if (records_.contains(name)) {
    return absl::AlreadyExistsError(absl::StrCat("a group named ", ToAbsl(name), " exists"));
  }
  return absl::OkStatus();
}

void ReservationEngine::Wait(ReservationRecord& record, ScheduleStatus status,
                             std::string explanation) {
  record.status = status == ScheduleStatus::kPending ? ReservationStatus::kPending
                                                     : ReservationStatus::kInfeasible;
  record.explanation = std::move(explanation);
}

absl::Status ReservationEngine::TryPlace(ReservationRecord& record) {
  if (record.kind == ReservationKind::kPlacementGroup) {
    absl::StatusOr<PlacementGroupResult> result = absl::UnknownError("not decided");
    Decide(record.kind, [&] { result = groups_.Create(record.spec); });
    if (!result.ok()) return result.status();
    if (result->status != ScheduleStatus::kPlaced) {
      Wait(record, result->status, std::move(result->explanation));
      return absl::OkStatus();
    }
    record.group = result->id;
    record.choice = result->option;
  } else {
    absl::StatusOr<DomainGroupResult> result = absl::UnknownError("not decided");
    Decide(record.kind, [&] { result = slices_.ReserveSlices(record.slices); });
    if (!result.ok()) return result.status();
    if (result->status != ScheduleStatus::kPlaced) {
      Wait(record, result->status, std::move(result->explanation));
      return absl::OkStatus();
    }
    record.slice_group = result->id;
    record.choice = result->alternative;
    record.domains = std::move(result->domains);
  }
  record.status = ReservationStatus::kPlaced;
  record.explanation.clear();
  return absl::OkStatus();
}

ReservationRecord* ReservationEngine::NewRecord(std::string_view name, ReservationKind kind,
                                                absl::Status* refused) {
  if (name.empty()) {
    *refused = CheckNewName(name, kind);
    return nullptr;
  }
  auto [it, added] = records_.try_emplace(std::string(name));
  if (!added) {
    *refused = CheckNewName(name, kind);
    return nullptr;
  }
  it->second.kind = kind;
  it->second.name = it->first;
  return &it->second;
}

absl::StatusOr<ReservationOutcome> ReservationEngine::PlaceNew(ReservationRecord& record) {
  // The scheduler's own checks come first: a request it refuses is bad input and keeps nothing.
  if (absl::Status refused = TryPlace(record); !refused.ok()) {
    records_.erase(record.name);
    return refused;
  }
  return OutcomeOf(record, {});
}

absl::StatusOr<ReservationOutcome> ReservationEngine::CreatePlacementGroup(
    PlacementGroupSpec spec) {
  absl::Status refused;
  ReservationRecord* record = NewRecord(spec.name, ReservationKind::kPlacementGroup, &refused);
  if (record == nullptr) return refused;
  record->spec = std::move(spec);
  return PlaceNew(*record);
}

absl::StatusOr<ReservationOutcome> ReservationEngine::ReserveSlices(DomainGroupRequest request) {
  absl::Status refused;
  ReservationRecord* record = NewRecord(request.name, ReservationKind::kSliceGroup, &refused);
  if (record == nullptr) return refused;
  record->slices = std::move(request);
  return PlaceNew(*record);
}

void ReservationEngine::ForgetPlacement(ReservationRecord& record) {
  if (record.group.has_value()) {
    IgnoreStatus(groups_.Remove(*record.group),
                 "NotFound only for one forgotten already: nothing is left to give back");
    record.group.reset();
  }
  if (record.slice_group.has_value()) {
    IgnoreStatus(slices_.Release(*record.slice_group),
                 "NotFound only for one forgotten already: nothing is left to give back");
    record.slice_group.reset();
  }
  record.domains.clear();
  record.choice = 0;
}

absl::StatusOr<std::vector<Allocation>> ReservationEngine::Remove(std::string_view name) {
  auto it = records_.find(name);
  if (it == records_.end()) {
    return absl::NotFoundError(
        absl::StrCat("no placement group or slice group named ", ToAbsl(name)));
  }
  ReservationRecord& record = it->second;
  std::vector<Allocation> released;
  if (record.group.has_value()) {
    absl::StatusOr<std::vector<Allocation>> freed = groups_.Remove(*record.group);
    if (freed.ok()) released = *std::move(freed);
  } else if (record.slice_group.has_value()) {
    absl::StatusOr<std::vector<Allocation>> freed = slices_.Release(*record.slice_group);
    if (freed.ok()) released = *std::move(freed);
  }
  records_.erase(it);
  return released;
}

void ReservationEngine::ApplyReplacements(const std::vector<RescheduleReport>& reports,
                                          std::vector<ReservationOutcome>& outcomes) {
  for (const RescheduleReport& report : reports) {
    ReservationRecord* record = GroupRecord(report);
    if (record == nullptr) continue;
    if (report.placed) {
      record->status = ReservationStatus::kPlaced;
      record->explanation.clear();
    } else {
      record->status = ReservationStatus::kReplacing;
      record->explanation = report.explanation;
    }
    outcomes.push_back(OutcomeOf(*record, report.bundles));
    outcomes.back().replacement = true;
  }
}

std::vector<ReservationOutcome> ReservationEngine::RetryWaiting(
    absl::FunctionRef<bool(const std::string& name)> may_retry) {
  std::vector<ReservationOutcome> outcomes;
  ApplyReplacements(groups_.OnClusterChanged(), outcomes);
  for (ReservationKind kind : {ReservationKind::kPlacementGroup, ReservationKind::kSliceGroup}) {
    for (auto& [name, record] : records_) {
      if (record.kind != kind || !record.waiting() || !may_retry(name)) continue;
      if (absl::Status refused = TryPlace(record); !refused.ok()) {
        // Only a record whose request a newer rule refuses (a restored one) gets here: it
        // waits, explained, rather than being dropped.
        Wait(record, ScheduleStatus::kInfeasible, std::string(refused.message()));
      }
      outcomes.push_back(OutcomeOf(record, {}));
    }
  }
  return outcomes;
}

std::vector<ReservationOutcome> ReservationEngine::OnNodeFailed(const NodeId& node,
                                                                std::string_view reason,
                                                                std::span<const Allocation> lost) {
  std::vector<ReservationOutcome> outcomes;
  ApplyReplacements(groups_.OnNodeFailed(node, lost), outcomes);
  for (auto& [name, record] : records_) {
    if (!record.slice_group.has_value()) continue;
    const std::vector<DomainBundle>* hosts = slices_.Bundles(*record.slice_group);
    std::vector<int> on_node;
    for (size_t i = 0; hosts != nullptr && i < hosts->size(); ++i) {
      if ((*hosts)[i].node == node) on_node.push_back(static_cast<int>(i));
    }
    if (on_node.empty()) continue;
    if (record.status != ReservationStatus::kBroken) {  // a broken one keeps its first reason
      record.status = ReservationStatus::kBroken;
      record.explanation = absl::StrCat("host ", node.value(), " died (", ToAbsl(reason), ")");
    }
    outcomes.push_back(OutcomeOf(record, std::move(on_node)));
  }
  return outcomes;
}

std::vector<std::string> ReservationEngine::HealBroken(
    absl::FunctionRef<bool(const NodeId&)> alive,
    absl::FunctionRef<bool(const std::string& name)> may_heal) {
  std::vector<std::string> healed;
  for (auto& [name, record] : records_) {
    if (record.status != ReservationStatus::kBroken || !record.slice_group.has_value() ||
        !may_heal(name)) {
      continue;
    }
    const std::vector<DomainBundle>* hosts = slices_.Bundles(*record.slice_group);
    if (hosts == nullptr || hosts->empty()) continue;
    const bool all_back = std::all_of(hosts->begin(), hosts->end(),
                                      [&](const DomainBundle& b) { return alive(b.node); });
    if (!all_back) continue;
    ForgetPlacement(record);
    record.status = ReservationStatus::kPending;
    record.explanation = "its hosts are back; reserving it again";
    healed.push_back(name);
  }
  return healed;
}

void ReservationEngine::Break(std::string_view name, std::string explanation) {
  ReservationRecord* record = FindMutable(name);
  if (record == nullptr || !record->slice_group.has_value()) return;
  record->status = ReservationStatus::kBroken;
  record->explanation = std::move(explanation);
}

void ReservationEngine::Unplace(std::string_view name, std::string explanation) {
  ReservationRecord* record = FindMutable(name);
  if (record == nullptr || !record->held()) return;
  ForgetPlacement(*record);
  record->status = ReservationStatus::kPending;
  record->explanation = std::move(explanation);
}

absl::StatusOr<ReservationOutcome> ReservationEngine::RestorePlacementGroup(
    PlacementGroupSpec spec, size_t option, std::span<const RestoredBundle> bundles) {
  TESSERA_RETURN_IF_ERROR(CheckNewName(spec.name, ReservationKind::kPlacementGroup));
  ReservationRecord record;
  record.kind = ReservationKind::kPlacementGroup;
  record.name = spec.name;
  absl::StatusOr<PlacementGroupRestoreResult> restored = groups_.Restore(spec, option, bundles);
  record.spec = std::move(spec);
  std::vector<int> refused;
  if (!restored.ok()) {
    // The record does not fit the cluster any more (a changed spec rule): it waits anew.
    record.status = ReservationStatus::kPending;
    record.explanation =
        absl::StrCat("could not be restored as it was: ", restored.status().message());
  } else {
    record.group = restored->id;
    record.choice = restored->option;
    record.status = restored->state == PlacementGroupState::kCreated
                        ? ReservationStatus::kPlaced
                        : ReservationStatus::kReplacing;
    record.explanation = restored->explanation;
    for (const UnrestoredBundle& r : restored->refused) refused.push_back(r.bundle);
  }
  const ReservationRecord& kept = records_.emplace(record.name, std::move(record)).first->second;
  return OutcomeOf(kept, std::move(refused));
}

absl::StatusOr<ReservationOutcome> ReservationEngine::RestoreSliceGroup(
    DomainGroupRequest request, size_t alternative, std::span<const DomainBundle> bundles) {
  TESSERA_RETURN_IF_ERROR(CheckNewName(request.name, ReservationKind::kSliceGroup));
  ReservationRecord record;
  record.kind = ReservationKind::kSliceGroup;
  record.name = request.name;
  absl::StatusOr<DomainGroupRestoreResult> restored =
      slices_.Restore(request, alternative, bundles);
  record.slices = std::move(request);
  std::vector<int> missing;
  if (!restored.ok() || restored->status == DomainRestoreStatus::kRefused) {
    // Nothing of it is held: it is reserved anew, whole.
    record.status = ReservationStatus::kPending;
    record.explanation = absl::StrCat(
        "could not be restored as it was: ",
        restored.ok() ? restored->explanation : std::string(restored.status().message()));
  } else {
    record.slice_group = restored->id;
    record.choice = restored->alternative;
    record.domains = restored->domains;
    for (size_t i = 0; i < restored->bundles.size(); ++i) {
      const NodeId& host = restored->bundles[i].node;
      if (std::find(restored->missing.begin(), restored->missing.end(), host) !=
          restored->missing.end()) {
        missing.push_back(static_cast<int>(i));
      }
    }
    // Broken: as a host loss leaves it, reserved anew once its hosts are back (HealBroken).
    record.status = restored->status == DomainRestoreStatus::kBroken ? ReservationStatus::kBroken
                                                                     : ReservationStatus::kPlaced;
    record.explanation =
        restored->status == DomainRestoreStatus::kBroken ? restored->explanation : std::string();
  }
  const ReservationRecord& kept = records_.emplace(record.name, std::move(record)).first->second;
  return OutcomeOf(kept, std::move(missing));
}

absl::Status ReservationEngine::RestoreWaiting(PlacementGroupSpec spec, ReservationStatus status,
                                               std::string explanation) {
  ReservationRecord record;
  record.kind = ReservationKind::kPlacementGroup;
  record.name = spec.name;
  record.spec = std::move(spec);
  return KeepWaiting(std::move(record), status, std::move(explanation));
}

absl::Status ReservationEngine::RestoreWaiting(DomainGroupRequest request, ReservationStatus status,
                                               std::string explanation) {
  ReservationRecord record;
  record.kind = ReservationKind::kSliceGroup;
  record.name = request.name;
  record.slices = std::move(request);
  return KeepWaiting(std::move(record), status, std::move(explanation));
}

absl::Status ReservationEngine::KeepWaiting(ReservationRecord record, ReservationStatus status,
                                            std::string explanation) {
  TESSERA_RETURN_IF_ERROR(CheckNewName(record.name, record.kind));
  Wait(record,
       status == ReservationStatus::kInfeasible ? ScheduleStatus::kInfeasible
                                                : ScheduleStatus::kPending,
       std::move(explanation));
  records_.emplace(record.name, std::move(record));
  return absl::OkStatus();
}

// --- reading ---

std::vector<std::optional<BundlePlacement>> ReservationEngine::Bundles(
    std::string_view name) const {
  const ReservationRecord* record = Find(name);
  if (record == nullptr) return {};
  if (record->group.has_value()) {
    const PlacementGroup* group = groups_.Find(*record->group);
    return group == nullptr ? std::vector<std::optional<BundlePlacement>>{} : group->bundles;
  }
  std::vector<std::optional<BundlePlacement>> out;
  if (const std::vector<DomainBundle>* hosts = SliceHosts(name)) {
    for (const DomainBundle& b : *hosts) out.push_back(BundlePlacement{b.node, b.allocation});
  }
  return out;
}

const std::vector<DomainBundle>* ReservationEngine::SliceHosts(std::string_view name) const {
  const ReservationRecord* record = Find(name);
  if (record == nullptr || !record->slice_group.has_value()) return nullptr;
  return slices_.Bundles(*record->slice_group);
}

std::optional<NodeId> ReservationEngine::BundleNode(std::string_view name, int index,
                                                    size_t* count) const {
  if (count != nullptr) *count = 0;
  const ReservationRecord* record = Find(name);
  if (record == nullptr) return std::nullopt;
  if (record->group.has_value()) {
    const PlacementGroup* group = groups_.Find(*record->group);
    if (group == nullptr) return std::nullopt;
    if (count != nullptr) *count = group->bundles.size();
    if (index < 0 || index >= static_cast<int>(group->bundles.size()) ||
        !group->bundles[index].has_value()) {
      return std::nullopt;
    }
    return group->bundles[index]->node;
  }
  const std::vector<DomainBundle>* hosts = SliceHosts(name);
  if (hosts == nullptr) return std::nullopt;
  if (count != nullptr) *count = hosts->size();
  if (index < 0 || index >= static_cast<int>(hosts->size())) return std::nullopt;
  return (*hosts)[index].node;
}

size_t ReservationEngine::BundleCount(std::string_view name) const {
  size_t count = 0;
  BundleNode(name, -1, &count);  // for the count only
  return count;
}

std::vector<ResourceSet> ReservationEngine::BundleShapes(std::string_view name) const {
  const ReservationRecord* record = Find(name);
  if (record == nullptr) return {};
  if (record->kind == ReservationKind::kPlacementGroup) {
    return OptionsInOrder(record->spec)[record->held() ? record->choice : 0]->bundles;
  }
  std::vector<ResourceSet> shapes;
  if (const std::vector<DomainBundle>* hosts = SliceHosts(name)) {
    for (const DomainBundle& b : *hosts) shapes.push_back(b.allocation.resources);
  }
  return shapes;
}

BundleTargetCheck ReservationEngine::CheckBundleTarget(std::string_view name, int bundle,
                                                       const ResourceSet& demand) const {
  BundleTargetCheck check;
  const absl::string_view shown = ToAbsl(name);
  auto refuse = [&](ScheduleStatus status, std::string explanation) {
    check.status = status;
    check.explanation = std::move(explanation);
    return check;
  };
  const ReservationRecord* record = Find(name);
  if (record == nullptr) {
    return refuse(ScheduleStatus::kInfeasible,
                  absl::StrCat("no placement group or slice group named ", shown));
  }
  if (record->kind == ReservationKind::kSliceGroup && !record->held()) {
    // Its hosts (and so its bundles) are known once it is reserved.
    return refuse(ScheduleStatus::kPending,
                  absl::StrCat("slice group ", shown, " is not reserved yet"));
  }
  // The shapes the request is judged against: a waiting placement group's every option (the
  // one it will be placed with is not known yet); a held one's chosen option; a slice group's
  // host bundles.
  std::vector<std::vector<ResourceSet>> options;
  if (record->kind == ReservationKind::kPlacementGroup && !record->held()) {
    for (const BundleOption* option : OptionsInOrder(record->spec)) {
      options.push_back(option->bundles);
    }
  } else {
    options.push_back(BundleShapes(name));
  }
  size_t most = 0;
  for (const auto& shapes : options) most = std::max(most, shapes.size());
  if (bundle >= static_cast<int>(most)) {
    if (record->held() && record->choice > 0) {
      return refuse(
          ScheduleStatus::kInfeasible,
          absl::StrCat("placement group ", shown, " was placed with its fallback option ",
                       record->choice, ", which has ", most, most == 1 ? " bundle" : " bundles",
                       "; bundle ", bundle, " does not exist"));
    }
    return refuse(ScheduleStatus::kInfeasible,
                  absl::StrCat(shown, " has ", most, " bundles; there is no bundle ", bundle));
  }
  // A demand no targeted bundle could ever hold is infeasible, wherever the bundles are (the
  // words are BundleLedger's, which judges the same on the agent).
  bool could_hold = false;
  for (const auto& shapes : options) {
    for (int i = 0; i < static_cast<int>(shapes.size()); ++i) {
      if (bundle >= 0 && i != bundle) continue;
      could_hold = could_hold || shapes[i].Contains(demand);
    }
  }
  if (!could_hold) {
    return refuse(
        ScheduleStatus::kInfeasible,
        bundle >= 0 && options.size() == 1
            ? absl::StrCat("bundle ", bundle, " of ", shown, " reserves ",
                           options[0][bundle].ToString(), "; it can never hold ", demand.ToString())
            : absl::StrCat("no bundle of ", shown, " can ever hold ", demand.ToString(),
                           " (a request never spans bundles)"));
  }
  if (!record->held()) {
    return refuse(
        ScheduleStatus::kPending,
        absl::StrCat("placement group ", shown, " is not placed yet (", record->explanation, ")"));
  }
  const std::vector<std::optional<BundlePlacement>> placed = Bundles(name);
  const std::vector<ResourceSet>& shapes = options[0];
  for (int i = 0; i < static_cast<int>(placed.size()); ++i) {
    if (bundle >= 0 && i != bundle) continue;
    if (placed[i].has_value()) {
      check.candidates.emplace_back(i, placed[i]->node);
    } else if (check.replacing.empty() && i < static_cast<int>(shapes.size()) &&
               shapes[i].Contains(demand)) {
      // A bundle waiting to be re-placed is pending, not missing, when its shape could hold it.
      check.replacing = absl::StrCat("bundle ", i, " of ", shown, " is waiting to be re-placed (",
                                     record->explanation, ")");
    }
  }
  if (check.candidates.empty()) {
    return refuse(ScheduleStatus::kPending,
                  check.replacing.empty()
                      ? absl::StrCat(bundle >= 0 ? absl::StrCat("bundle ", bundle, " of ", shown)
                                                 : absl::StrCat("no bundle of ", shown),
                                     " has no node now")
                      : check.replacing);
  }
  check.status = ScheduleStatus::kPlaced;
  return check;
}

}  // namespace tessera

// HeadService's persistence: every table write goes through StorePut/StoreDelete, which never
// drop an error (a failed write is an event and a line on stderr: the head goes on serving from
// memory, but what it says it holds may not survive a restart); and Restore, by which a head
// started on a StateStore that a previous head wrote (Redis) reads its tables back before it
// serves, so a restart loses nothing and running work goes on: nodes
// come back as they were registered (their agents, which keep heartbeating the same incarnation,
// are known at once and have node_timeout to be heard from), jobs with their state, placement
// groups and slice groups with exactly their bundles' nodes and allocations, and the drivers that
// own reservations are given a full driver timeout to call again. KV (and so named actors) lives
// in the store itself.
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "head/head_service.h"
#include "head/head_service_internal.h"
#include "rpc/proto_convert.h"

namespace tessera {

using head_internal::Exact;

namespace {

absl::Status Corrupt(std::string_view table, const std::string& key, absl::string_view why) {
  return absl::DataLossError(
      absl::StrCat("state store table ", ToAbsl(table), ", key ", key, ": ", why));
}

}  // namespace

void HeadService::StorePut(std::string_view table, const std::string& key,
                           const std::string& value) {
  if (absl::Status put = options_.store->Put(table, key, value); !put.ok()) {
    StoreFailed("write", table, key, put);
  }
}

void HeadService::StoreDelete(std::string_view table, const std::string& key) {
  if (absl::StatusOr<bool> deleted = options_.store->Delete(table, key); !deleted.ok()) {
    StoreFailed("delete", table, key, deleted.status());
  }
}

void HeadService::StoreFailed(std::string_view what, std::string_view table,
                              const std::string& key, const absl::Status& status) {
  const std::string line = absl::StrCat("the state store could not ", ToAbsl(what), " ",
                                        ToAbsl(table), "/", key, ": ", status.message(),
                                        " (it may not survive a head restart)");
  std::fprintf(stderr, "head: %s\n", line.c_str());
  RecordEvent(line);
}

absl::Status HeadService::RestoreNodes() {
  TESSERA_ASSIGN_OR_RETURN(auto records, options_.store->List(kNodesTable));
  for (const auto& [key, value] : records) {
    v1::NodeDescription description;
    if (!description.ParseFromString(value)) return Corrupt(kNodesTable, key, "not a node record");
    auto node = rpc::NodeFromProto(description);
    if (!node.ok()) return Corrupt(kNodesTable, key, node.status().message());
    const std::string id = node->spec.id.value();
    if (id != key) return Corrupt(kNodesTable, key, absl::StrCat("holds node ", id));
    auto added = view_.AddNode(node->spec);
    if (!added.ok()) return Corrupt(kNodesTable, key, added.status().message());
    NodeEntry entry;
    entry.id = id;
    entry.incarnation = node->incarnation;
    entry.description = std::move(description);
    entry.client = options_.agent_clients(id, node->address);
    // Heard from "now": its agent has a whole node timeout to heartbeat this head.
    entry.last_heartbeat = clock_->Now();
    nodes_.emplace(id, std::move(entry));
  }
  if (!records.empty()) {
    RecordEvent(absl::StrCat("restored ", records.size(),
                             " nodes from the state store; waiting for their agents"));
  }
  return absl::OkStatus();
}

absl::Status HeadService::RestoreJobs() {
  TESSERA_ASSIGN_OR_RETURN(auto records, options_.store->List(kJobsTable));
  std::vector<v1::JobInfo> jobs;
  for (const auto& [key, value] : records) {
    v1::JobInfo job;
    if (!job.ParseFromString(value)) return Corrupt(kJobsTable, key, "not a job record");
    if (job.job_id() != key) return Corrupt(kJobsTable, key, "holds another job");
    jobs.push_back(std::move(job));
  }
  // ListJobs' order is the order jobs were first recorded: their start times.
  std::stable_sort(jobs.begin(), jobs.end(), [](const v1::JobInfo& a, const v1::JobInfo& b) {
    return a.start_time_ms() < b.start_time_ms();
  });
  std::vector<std::pair<int64_t, std::string>> ended;
  for (v1::JobInfo& job : jobs) {
    const std::string id = job.job_id();
    if (job.state() != "RUNNING") ended.emplace_back(job.end_time_ms(), id);
    const int64_t order = next_job_order_++;
    jobs_in_order_[order] = id;
    jobs_[id] = JobEntry{std::move(job), order};
  }
  std::stable_sort(ended.begin(), ended.end());
  for (auto& [end, id] : ended) ended_jobs_.push_back(std::move(id));
  ForgetOldEndedJobs();
  return absl::OkStatus();
}

namespace {

// The number after the last '-' of an id such as "pg-7" (0 when there is none).
int64_t IdNumber(const std::string& id) {
  int64_t n = 0;
  const size_t dash = id.rfind('-');
  if (dash == std::string::npos || !absl::SimpleAtoi(id.substr(dash + 1), &n)) return 0;
  return n;
}

}  // namespace

absl::Status HeadService::RestoreGroup(const std::string& key, const std::string& value) {
  v1::StoredPlacementGroup stored;
  if (!stored.ParseFromString(value)) {
    return Corrupt(kPlacementGroupsTable, key, "not a placement group record");
  }
  const v1::PlacementGroupInfo& info = stored.info();
  if (info.name() != key) return Corrupt(kPlacementGroupsTable, key, "holds another group");
  auto spec = rpc::PlacementGroupSpecFromProto(stored.request());
  if (!spec.ok()) return Corrupt(kPlacementGroupsTable, key, spec.status().message());
  GroupEntry entry;
  entry.id = info.id();
  entry.name = key;
  entry.owner = stored.request().owner();
  entry.request = stored.request();
  entry.spec = *std::move(spec);
  entry.spec.name = key;
  entry.explanation = info.explanation();
  next_group_ = std::max(next_group_, IdNumber(entry.id) + 1);
  NoteDriverAlive(entry.owner);  // a whole driver timeout to call this head
  GroupEntry& group = groups_.emplace(key, std::move(entry)).first->second;
  if (info.state() != "CREATED" && info.state() != "RESCHEDULING") {
    // It held nothing: it waits for room as it did (Tick retries it).
    group.phase = info.state() == "INFEASIBLE" ? ReservationPhase::kInfeasible
                                               : ReservationPhase::kPending;
    MarkChanged();
    return absl::OkStatus();
  }
  std::vector<RestoredBundle> bundles(static_cast<size_t>(info.bundles_size()));
  for (const v1::BundleLocation& location : info.bundles()) {
    if (location.index() < 0 || location.index() >= info.bundles_size()) {
      return Corrupt(kPlacementGroupsTable, key, absl::StrCat("bundle index ", location.index()));
    }
    if (location.node_id().empty()) continue;
    auto allocation = rpc::AllocationFromProto(location.allocation());
    if (!allocation.ok()) {
      return Corrupt(kPlacementGroupsTable, key, allocation.status().message());
    }
    RestoredBundle& bundle = bundles[static_cast<size_t>(location.index())];
    bundle.node = NodeId(location.node_id());
    bundle.resources = allocation->resources;
    bundle.devices = allocation->devices;
  }
  auto restored =
      groups_scheduler_.Restore(group.spec, static_cast<size_t>(info.option()), bundles);
  if (!restored.ok()) {
    // The record does not fit the cluster any more (a changed spec rule): it waits anew.
    group.phase = ReservationPhase::kPending;
    group.explanation =
        absl::StrCat("could not be restored as it was: ", restored.status().message());
    RecordEvent(absl::StrCat("placement group ", key, " ", group.explanation));
    MarkChanged();
    return absl::OkStatus();
  }
  group.scheduled = restored->id;
  group.option = static_cast<int>(restored->option);
  group.confirmed.assign(restored->bundles.size(), std::nullopt);
  for (size_t i = 0; i < restored->bundles.size(); ++i) {
    const std::optional<BundlePlacement>& placed = restored->bundles[i];
    if (!placed.has_value()) continue;
    // Held on its agent, as before the restart; reconciliation checks that once the agent has
    // heard from this head.
    group.confirmed[i] = BundleHold{placed->node.value(), Exact(placed->allocation)};
    NoteCommitted(placed->node.value(), key, static_cast<int>(i));
  }
  group.phase = restored->state == PlacementGroupState::kCreated ? ReservationPhase::kHeld
                                                                 : ReservationPhase::kDegraded;
  if (!restored->refused.empty()) {
    group.explanation = restored->explanation;
    RecordEvent(absl::StrCat("placement group ", key, " was restored without some bundles: ",
                             restored->explanation));
  }
  MarkChanged();
  return absl::OkStatus();
}

absl::Status HeadService::RestoreSlice(const std::string& key, const std::string& value) {
  v1::StoredSliceGroup stored;
  if (!stored.ParseFromString(value)) {
    return Corrupt(kSliceGroupsTable, key, "not a slice group record");
  }
  const v1::SliceGroupInfo& info = stored.info();
  if (info.name() != key) return Corrupt(kSliceGroupsTable, key, "holds another group");
  auto parsed = rpc::DomainGroupRequestFromProto(stored.request());
  if (!parsed.ok()) return Corrupt(kSliceGroupsTable, key, parsed.status().message());
  SliceEntry entry;
  entry.id = info.id();
  entry.name = key;
  entry.owner = stored.request().owner();
  entry.request = stored.request();
  entry.parsed = *std::move(parsed);
  entry.parsed.name = key;
  entry.explanation = info.explanation();
  next_slice_ = std::max(next_slice_, IdNumber(entry.id) + 1);
  NoteDriverAlive(entry.owner);
  SliceEntry& slice = slices_.emplace(key, std::move(entry)).first->second;
  if (info.state() != "RESERVED" && info.state() != "BROKEN") {
    slice.phase = info.state() == "INFEASIBLE" ? ReservationPhase::kInfeasible
                                               : ReservationPhase::kPending;
    MarkChanged();
    return absl::OkStatus();
  }
  std::vector<DomainBundle> bundles;
  for (const v1::SliceHost& host : info.hosts()) {
    auto allocation = rpc::AllocationFromProto(host.allocation());
    if (!allocation.ok()) return Corrupt(kSliceGroupsTable, key, allocation.status().message());
    DomainBundle bundle;
    bundle.node = NodeId(host.node_id());
    bundle.domain = host.domain();
    bundle.worker = host.worker();
    bundle.allocation.resources = allocation->resources;
    bundle.allocation.devices = allocation->devices;
    bundles.push_back(std::move(bundle));
  }
  auto restored = slices_scheduler_.Restore(slice.parsed, static_cast<size_t>(info.alternative()),
                                            bundles);
  if (!restored.ok() || restored->status == DomainRestoreStatus::kRefused) {
    // Nothing of it is held: it is reserved anew, whole (the agents' old bundles are released
    // as unknown by reconciliation).
    slice.phase = ReservationPhase::kPending;
    slice.explanation = absl::StrCat(
        "could not be restored as it was: ",
        restored.ok() ? restored->explanation : std::string(restored.status().message()));
    RecordEvent(absl::StrCat("slice group ", key, " ", slice.explanation));
    MarkChanged();
    return absl::OkStatus();
  }
  slice.scheduled = restored->id;
  slice.alternative = static_cast<int>(restored->alternative);
  slice.domains = restored->domains;
  slice.bundles = restored->bundles;
  slice.confirmed.assign(slice.bundles.size(), std::nullopt);
  for (size_t i = 0; i < slice.bundles.size(); ++i) {
    const DomainBundle& bundle = slice.bundles[i];
    if (std::find(restored->missing.begin(), restored->missing.end(), bundle.node) !=
        restored->missing.end()) {
      continue;
    }
    slice.confirmed[i] = BundleHold{bundle.node.value(), Exact(bundle.allocation)};
    NoteCommitted(bundle.node.value(), key, static_cast<int>(i));
  }
  if (restored->status == DomainRestoreStatus::kBroken) {
    // As a host loss leaves it: reserved anew once its hosts are back (Tick).
    slice.phase = ReservationPhase::kDegraded;
    slice.explanation = restored->explanation;
    RecordEvent(absl::StrCat("slice group ", key, " was restored broken: ", restored->explanation));
  } else {
    slice.phase = ReservationPhase::kHeld;
  }
  MarkChanged();
  return absl::OkStatus();
}

absl::Status HeadService::RestoreReservations() {
  TESSERA_ASSIGN_OR_RETURN(auto groups, options_.store->List(kPlacementGroupsTable));
  for (const auto& [key, value] : groups) TESSERA_RETURN_IF_ERROR(RestoreGroup(key, value));
  TESSERA_ASSIGN_OR_RETURN(auto slices, options_.store->List(kSliceGroupsTable));
  for (const auto& [key, value] : slices) TESSERA_RETURN_IF_ERROR(RestoreSlice(key, value));
  if (!groups.empty() || !slices.empty()) {
    RecordEvent(absl::StrCat("restored ", groups.size(), " placement groups and ", slices.size(),
                             " slice groups from the state store"));
  }
  return absl::OkStatus();
}

absl::Status HeadService::Restore() {
  absl::MutexLock lock(&mu_);
  TESSERA_RETURN_IF_ERROR(RestoreNodes());
  TESSERA_RETURN_IF_ERROR(RestoreJobs());
  TESSERA_RETURN_IF_ERROR(RestoreReservations());
  return absl::OkStatus();
}

}  // namespace tessera

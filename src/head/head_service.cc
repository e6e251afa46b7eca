#include "head/head_service.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/string_util.h"
#include "hardware/node_label_keys.h"
#include "rpc/status_conversion.h"

namespace tessera {

namespace {

grpc::Status Invalid(const absl::Status& status) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(status.message()));
}

grpc::Status InvalidText(std::string message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::move(message));
}

rpc::ExactAllocation Exact(const Allocation& allocation) {
  return rpc::ExactAllocation{allocation.resources, allocation.devices};
}

std::string ShortDuration(absl::Duration d) {
  return absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(1)));
}

// Chips in a topology "4x4" / "2x2x2"; 0 when it is not one.
int64_t TopologyChips(const std::string& topology) {
  if (topology.empty()) return 0;
  int64_t chips = 1;
  size_t start = 0;
  while (start <= topology.size()) {
    size_t end = topology.find('x', start);
    if (end == std::string::npos) end = topology.size();
    std::string part = topology.substr(start, end - start);
    if (part.empty() || part.size() > 6) return 0;
    for (char c : part) {
      if (c < '0' || c > '9') return 0;
    }
    chips *= std::stoll(part);
    start = end + 1;
  }
  return chips;
}

}  // namespace

HeadService::HeadService(HeadServiceOptions options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : Clock::Real()),
      tasks_(&view_),
      groups_scheduler_(&view_),
      slices_scheduler_(&view_),
      create_cache_(options_.request_cache_capacity),
      remove_cache_(options_.request_cache_capacity),
      reserve_cache_(options_.request_cache_capacity),
      release_cache_(options_.request_cache_capacity) {
  absl::MutexLock lock(&mu_);
  last_retry_ = clock_->Now();
}

HeadService::~HeadService() = default;

std::vector<std::string> HeadService::events() const {
  absl::MutexLock lock(&mu_);
  return std::vector<std::string>(events_.begin(), events_.end());
}

void HeadService::RecordEvent(std::string event) {
  events_.push_back(std::move(event));
  while (events_.size() > options_.max_events) events_.pop_front();
}

std::shared_ptr<NodeAgentClient> HeadService::ClientFor(const std::string& node) const {
  auto it = nodes_.find(node);
  if (it == nodes_.end() || it->second.health != NodeHealth::kAlive) return nullptr;
  return it->second.client;
}

// --- persistence (the StateStore holds what `tessera status` and a Redis-backed head need) ---

void HeadService::PersistGroup(const GroupEntry& group) {
  v1::PlacementGroupInfo info;
  FillGroupInfo(group, &info);
  (void)options_.store->Put(kPlacementGroupsTable, group.name, info.SerializeAsString());
}

void HeadService::PersistSlice(const SliceEntry& slice) {
  v1::SliceGroupInfo info;
  FillSliceInfo(slice, &info);
  (void)options_.store->Put(kSliceGroupsTable, slice.name, info.SerializeAsString());
}

void HeadService::PersistNode(const NodeEntry& node) {
  (void)options_.store->Put(kNodesTable, node.id, node.description.SerializeAsString());
}

// --- nodes ---

void HeadService::MirrorLeases(NodeEntry& node,
                               const google::protobuf::RepeatedPtrField<v1::LeaseInfo>& leases) {
  std::optional<NodeIndex> index = view_.Find(NodeId(node.id));
  if (!index.has_value()) return;
  absl::flat_hash_map<std::string, bool> seen;
  for (const v1::LeaseInfo& lease : leases) {
    // A lease inside a bundle uses the bundle's reservation, already held in the view.
    if (!lease.placement_group().empty()) continue;
    seen[lease.lease_id()] = true;
    if (node.leases.contains(lease.lease_id())) continue;
    auto allocation = rpc::AllocationFromProto(lease.allocation());
    if (!allocation.ok()) continue;  // validated by the caller
    auto taken = view_.AllocateExact(*index, allocation->resources, allocation->devices);
    // A lease the view cannot take (the head reserved those devices for a bundle the agent has
    // not prepared yet) is retried at the next heartbeat; the bundle's prepare fails meanwhile.
    if (taken.ok()) node.leases.emplace(lease.lease_id(), taken->id);
  }
  for (auto it = node.leases.begin(); it != node.leases.end();) {
    if (seen.contains(it->first)) {
      ++it;
      continue;
    }
    (void)view_.Release(it->second);
    node.leases.erase(it++);
    MarkChanged();
  }
}

void HeadService::DeclareDead(NodeEntry& node, const std::string& reason) {
  if (node.health == NodeHealth::kDead) return;
  node.health = NodeHealth::kDead;
  node.leases.clear();
  NodeId id(node.id);
  auto lost = view_.FailNode(id);
  std::vector<Allocation> lost_allocations = lost.ok() ? *std::move(lost) : std::vector<Allocation>();
  std::vector<RescheduleReport> reports = groups_scheduler_.OnNodeFailed(id, lost_allocations);
  std::map<int64_t, const RescheduleReport*> by_group;
  for (const RescheduleReport& report : reports) by_group[report.id.value()] = &report;

  std::vector<std::string> moved;
  for (auto& [name, group] : groups_) {
    bool touched = false;
    for (std::optional<BundleHold>& hold : group.confirmed) {
      if (hold.has_value() && hold->node == node.id) {
        hold.reset();  // the agent is gone, and its reservation with it
        touched = true;
      }
    }
    if (group.scheduled.has_value() && by_group.count(group.scheduled->value()) != 0) {
      const RescheduleReport* report = by_group.at(group.scheduled->value());
      touched = true;
      group.explanation = report->placed ? "" : report->explanation;
    }
    if (!touched) continue;
    moved.push_back(name);
    group.phase = GroupPhase::kRescheduling;
    if (group.explanation.empty()) {
      group.explanation = absl::StrCat("re-placing bundles lost with node ", node.id);
    }
    PersistGroup(group);
  }
  std::vector<std::string> broken;
  for (auto& [name, slice] : slices_) {
    bool holds = std::any_of(slice.bundles.begin(), slice.bundles.end(),
                             [&](const DomainBundle& b) { return b.node.value() == node.id; });
    if (!holds || slice.phase == SlicePhase::kBroken) continue;
    slice.phase = SlicePhase::kBroken;
    slice.explanation = absl::StrCat("host ", node.id, " died (", reason, ")");
    broken.push_back(name);
    PersistSlice(slice);
  }
  int failed_jobs = 0;
  for (auto& [job_id, job] : jobs_) {
    if (job.node_id() != node.id || job.state() != "RUNNING") continue;
    job.set_state("FAILED");
    job.set_exit_reason(absl::StrCat("node ", node.id, " died: ", reason));
    job.set_end_time_ms(absl::ToUnixMillis(clock_->Now()));
    (void)options_.store->Put(kJobsTable, job_id, job.SerializeAsString());
    ++failed_jobs;
  }
  std::string event = absl::StrCat("node ", node.id, " declared dead: ", reason);
  if (!moved.empty()) {
    absl::StrAppend(&event, "; bundles of ", absl::StrJoin(moved, ", "), " are re-placed");
  }
  if (!broken.empty()) absl::StrAppend(&event, "; slice groups ", absl::StrJoin(broken, ", "),
                                       " are broken");
  if (failed_jobs > 0) absl::StrAppend(&event, "; ", failed_jobs, " running jobs failed");
  RecordEvent(std::move(event));
  PersistNode(node);
  MarkChanged();
}

void HeadService::DropNodeFromView(NodeEntry& node, const std::string& reason) {
  DeclareDead(node, reason);
  (void)view_.RemoveNode(NodeId(node.id));
}

bool HeadService::KnowsBundle(const std::string& node, const v1::HeldBundle& bundle) const {
  int index = bundle.bundle_index();
  if (auto g = groups_.find(bundle.placement_group()); g != groups_.end()) {
    const GroupEntry& group = g->second;
    if (group.busy) return true;
    std::vector<std::optional<BundleHold>> desired = DesiredBundles(group);
    if (index < 0 || index >= static_cast<int>(desired.size())) return false;
    bool here = desired[index].has_value() && desired[index]->node == node;
    bool confirmed_here = index < static_cast<int>(group.confirmed.size()) &&
                          group.confirmed[index].has_value() &&
                          group.confirmed[index]->node == node;
    return here || confirmed_here;
  }
  if (auto s = slices_.find(bundle.placement_group()); s != slices_.end()) {
    const SliceEntry& slice = s->second;
    if (slice.busy) return true;
    return index >= 0 && index < static_cast<int>(slice.bundles.size()) &&
           slice.bundles[index].node.value() == node;
  }
  return false;
}

grpc::Status HeadService::RegisterNode(grpc::ServerContext*, const v1::RegisterNodeRequest* request,
                                       v1::RegisterNodeResponse* response) {
  auto registration = rpc::NodeFromProto(request->node());
  if (!registration.ok()) return Invalid(registration.status());
  if (registration->address.empty()) return InvalidText("node.address: is empty");
  // Validate everything before changing anything.
  for (int i = 0; i < request->leases_size(); ++i) {
    const v1::LeaseInfo& lease = request->leases(i);
    if (lease.lease_id().empty()) return InvalidText(absl::StrCat("leases[", i, "].lease_id: is empty"));
    auto allocation =
        rpc::AllocationFromProto(lease.allocation(), absl::StrCat("leases[", i, "].allocation"));
    if (!allocation.ok()) return Invalid(allocation.status());
  }
  for (int i = 0; i < request->bundles_size(); ++i) {
    if (request->bundles(i).placement_group().empty()) {
      return InvalidText(absl::StrCat("bundles[", i, "].placement_group: is empty"));
    }
  }
  const std::string id = registration->spec.id.value();
  absl::MutexLock lock(&mu_);
  auto existing = nodes_.find(id);
  bool same_agent = existing != nodes_.end() &&
                    existing->second.health == NodeHealth::kAlive &&
                    existing->second.incarnation == registration->incarnation;
  if (!same_agent) {
    if (existing != nodes_.end()) {
      NodeEntry& old = existing->second;
      if (old.health == NodeHealth::kAlive) {
        DropNodeFromView(old, absl::StrCat("its agent restarted (incarnation ", old.incarnation,
                                           " -> ", registration->incarnation, ")"));
      } else {
        (void)view_.RemoveNode(NodeId(id));
      }
      nodes_.erase(existing);
    }
    auto added = view_.AddNode(registration->spec);
    if (!added.ok()) return Invalid(added.status());
    NodeEntry entry;
    entry.id = id;
    entry.incarnation = registration->incarnation;
    entry.client = options_.agent_clients(id, registration->address);
    existing = nodes_.emplace(id, std::move(entry)).first;
    MarkChanged();
  } else if (existing->second.description.address() != registration->address) {
    existing->second.client = options_.agent_clients(id, registration->address);
  }
  NodeEntry& node = existing->second;
  node.description = request->node();
  node.last_heartbeat = clock_->Now();
  MirrorLeases(node, request->leases());

  // Bundles the head does not know: a head restart with the in-memory store lost their groups,
  // or the group was removed while the agent was away. The agent releases them; the events say so.
  std::map<std::string, std::vector<int>> released;
  for (const v1::HeldBundle& bundle : request->bundles()) {
    if (KnowsBundle(id, bundle)) continue;
    *response->add_release() = bundle;
    released[bundle.placement_group()].push_back(bundle.bundle_index());
  }
  for (const auto& [group, indices] : released) {
    bool known = groups_.count(group) != 0 || slices_.count(group) != 0;
    if (known) {
      RecordEvent(absl::StrCat("bundles ", absl::StrJoin(indices, ","), " of ", group, " on ", id,
                               " are not held by the head; they were released"));
    } else {
      RecordEvent(absl::StrCat("placement group ", group,
                               " was lost with the head restart; its bundles on ", id,
                               " were released"));
    }
  }
  PersistNode(node);
  response->set_heartbeat_interval_ms(absl::ToInt64Milliseconds(options_.heartbeat_interval));
  response->set_dead_after_ms(absl::ToInt64Milliseconds(options_.node_timeout));
  return grpc::Status::OK;
}

grpc::Status HeadService::Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* request,
                                    v1::HeartbeatResponse* response) {
  for (int i = 0; i < request->leases_size(); ++i) {
    auto allocation = rpc::AllocationFromProto(request->leases(i).allocation(),
                                               absl::StrCat("leases[", i, "].allocation"));
    if (!allocation.ok()) return Invalid(allocation.status());
  }
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(request->node_id());
  if (it == nodes_.end() || it->second.health != NodeHealth::kAlive ||
      it->second.incarnation != request->incarnation()) {
    response->set_known(false);
    return grpc::Status::OK;
  }
  NodeEntry& node = it->second;
  node.last_heartbeat = clock_->Now();
  node.workers = request->workers();
  MirrorLeases(node, request->leases());
  response->set_known(true);
  return grpc::Status::OK;
}

grpc::Status HeadService::PickNode(grpc::ServerContext*, const v1::PickNodeRequest* request,
                                   v1::PickNodeResponse* response) {
  auto parsed = rpc::ResourceRequestFromProto(request->request());
  if (!parsed.ok()) return Invalid(parsed.status());
  std::set<std::string> excluded(request->exclude_node_ids().begin(),
                                 request->exclude_node_ids().end());
  absl::MutexLock lock(&mu_);
  auto answer = [&](const std::string& node) {
    response->set_node_id(node);
    response->set_address(nodes_.at(node).description.address());
    response->set_status("placed");
  };
  if (parsed->target.has_value()) {
    // A request inside a group goes to the agent holding the bundle; that agent decides.
    const rpc::BundleTarget& target = *parsed->target;
    std::vector<std::string> holders;
    std::vector<ResourceSet> shapes;  // what each bundle reserves, by index
    if (auto g = groups_.find(target.placement_group); g != groups_.end()) {
      for (const auto& hold : g->second.confirmed) holders.push_back(hold ? hold->node : "");
      shapes = OptionsInOrder(g->second.spec)[g->second.option]->bundles;
    } else if (auto s = slices_.find(target.placement_group); s != slices_.end()) {
      if (s->second.phase == SlicePhase::kReserved || s->second.phase == SlicePhase::kBroken) {
        for (const DomainBundle& b : s->second.bundles) {
          holders.push_back(b.node.value());
          shapes.push_back(b.allocation.resources);
        }
      }
    } else {
      response->set_status("infeasible");
      response->set_explanation(
          absl::StrCat("no placement group or slice group named ", target.placement_group));
      return grpc::Status::OK;
    }
    if (target.bundle_index >= static_cast<int>(holders.size())) {
      response->set_status("infeasible");
      response->set_explanation(absl::StrCat(target.placement_group, " has ", holders.size(),
                                             " bundles; there is no bundle ",
                                             target.bundle_index));
      return grpc::Status::OK;
    }
    // A demand no targeted bundle could ever hold is infeasible, wherever the bundles are.
    bool could_hold = false;
    for (int i = 0; i < static_cast<int>(shapes.size()); ++i) {
      if (target.bundle_index >= 0 && i != target.bundle_index) continue;
      could_hold = could_hold || shapes[i].Contains(parsed->request.resources);
    }
    if (!shapes.empty() && !could_hold) {
      response->set_status("infeasible");
      response->set_explanation(
          target.bundle_index >= 0
              ? absl::StrCat("bundle ", target.bundle_index, " of ", target.placement_group,
                             " reserves ", shapes[target.bundle_index].ToString(),
                             "; it can never hold ", parsed->request.resources.ToString())
              : absl::StrCat("no bundle of ", target.placement_group, " can ever hold ",
                             parsed->request.resources.ToString(),
                             " (a request never spans bundles)"));
      return grpc::Status::OK;
    }
    for (int i = 0; i < static_cast<int>(holders.size()); ++i) {
      if (target.bundle_index >= 0 && i != target.bundle_index) continue;
      const std::string& node = holders[i];
      if (node.empty() || excluded.count(node) != 0 || ClientFor(node) == nullptr) continue;
      answer(node);
      return grpc::Status::OK;
    }
    response->set_status("pending");
    response->set_explanation(
        target.bundle_index >= 0
            ? absl::StrCat("bundle ", target.bundle_index, " of ", target.placement_group,
                           " is not held on a live node that was not tried yet")
            : absl::StrCat("no bundle of ", target.placement_group,
                           " is held on a live node that was not tried yet"));
    return grpc::Status::OK;
  }
  // Excluded nodes take no part in this decision; the head only advises (the agent that takes
  // the lease reports it in its next heartbeat, which mirrors it here).
  SchedulingRequest decision = parsed->request;
  for (const std::string& id : excluded) decision.excluded_nodes.push_back(NodeId(id));
  auto result = tasks_.Advise(decision);
  if (!result.ok()) return Invalid(result.status());
  if (result->status == ScheduleStatus::kPlaced) {
    answer(result->placement->node.value());
    return grpc::Status::OK;
  }
  response->set_status(absl::AsciiStrToLower(ToAbsl(ScheduleStatusName(result->status))));
  response->set_explanation(result->explanation);
  return grpc::Status::OK;
}

// --- placement groups ---

std::vector<std::optional<HeadService::BundleHold>> HeadService::DesiredBundles(
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
  switch (group.phase) {
    case GroupPhase::kPending: info->set_state("PENDING"); break;
    case GroupPhase::kInfeasible: info->set_state("INFEASIBLE"); break;
    case GroupPhase::kCommitting: info->set_state("PENDING"); break;
    case GroupPhase::kCreated: info->set_state("CREATED"); break;
    case GroupPhase::kRescheduling: info->set_state("RESCHEDULING"); break;
  }
  info->set_option(group.option);
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
  std::string explanation = group.explanation;
  if (group.phase == GroupPhase::kCommitting && explanation.empty()) {
    explanation = "reserving on the node agents";
  }
  info->set_explanation(explanation);
}

void HeadService::TryPlaceGroup(GroupEntry& group) {
  auto result = groups_scheduler_.Create(group.spec);
  if (!result.ok()) {
    group.phase = GroupPhase::kInfeasible;
    group.explanation = std::string(result.status().message());
    return;
  }
  if (result->status == ScheduleStatus::kPlaced) {
    group.scheduled = result->id;
    group.option = static_cast<int>(result->option);
    group.confirmed.assign(result->bundles.size(), std::nullopt);
    group.phase = GroupPhase::kCommitting;
    group.explanation.clear();
    return;
  }
  group.phase = result->status == ScheduleStatus::kPending ? GroupPhase::kPending
                                                           : GroupPhase::kInfeasible;
  group.explanation = result->explanation;
}

absl::Status HeadService::TwoPhase(const std::string& group, const std::vector<NodeWork>& work) {
  std::vector<NodeWork> prepared;
  for (const NodeWork& w : work) {
    if (w.prepare.empty()) continue;
    if (w.client == nullptr) {
      CancelOn(group, prepared);
      return absl::UnavailableError(absl::StrCat("node ", w.node, " is not alive"));
    }
    v1::PrepareBundlesRequest request;
    request.set_placement_group(group);
    for (const auto& [index, allocation] : w.prepare) {
      v1::BundleReservation* bundle = request.add_bundles();
      bundle->set_bundle_index(index);
      rpc::AllocationToProto(allocation, bundle->mutable_allocation());
    }
    // Cancel covers this node too: a prepare that timed out may have been applied.
    prepared.push_back(w);
    absl::Status status = w.client->Prepare(request);
    if (!status.ok()) {
      CancelOn(group, prepared);
      return absl::Status(status.code(), absl::StrCat("prepare on ", w.node, " failed: ",
                                                      status.message()));
    }
  }
  for (const NodeWork& w : prepared) {
    v1::CommitBundlesRequest request;
    request.set_placement_group(group);
    for (const auto& [index, allocation] : w.prepare) request.add_bundle_indices(index);
    absl::Status status = w.client->Commit(request);
    if (!status.ok()) {
      CancelOn(group, prepared);
      return absl::Status(status.code(), absl::StrCat("commit on ", w.node, " failed: ",
                                                      status.message()));
    }
  }
  return absl::OkStatus();
}

void HeadService::CancelOn(const std::string& group, const std::vector<NodeWork>& work) {
  for (const NodeWork& w : work) {
    if (w.client == nullptr) continue;
    v1::CancelBundlesRequest request;
    request.set_placement_group(group);
    for (const auto& [index, allocation] : w.prepare) request.add_bundle_indices(index);
    for (int index : w.cancel) request.add_bundle_indices(index);
    if (request.bundle_indices_size() == 0) continue;
    // Best effort: a node that cannot be reached is declared dead by the health check, and its
    // agent releases unknown bundles when it registers again.
    (void)w.client->Cancel(request);
  }
}

void HeadService::SyncGroup(const std::string& name) {
  for (int round = 0; round < 4; ++round) {
    std::vector<NodeWork> work;
    std::vector<NodeWork> stale;  // bundles to cancel where they no longer belong
    {
      absl::MutexLock lock(&mu_);
      auto it = groups_.find(name);
      if (it == groups_.end() || it->second.busy || !it->second.scheduled.has_value()) return;
      GroupEntry& group = it->second;
      std::vector<std::optional<BundleHold>> desired = DesiredBundles(group);
      group.confirmed.resize(desired.size());
      std::map<std::string, NodeWork> by_node;
      std::map<std::string, NodeWork> cancel_by_node;
      bool complete = true;
      for (size_t i = 0; i < desired.size(); ++i) {
        const auto& want = desired[i];
        const auto& have = group.confirmed[i];
        if (!want.has_value()) complete = false;
        if (want == have) continue;
        if (have.has_value()) {
          NodeWork& w = cancel_by_node[have->node];
          w.node = have->node;
          w.client = ClientFor(have->node);
          w.cancel.push_back(static_cast<int>(i));
        }
        if (want.has_value()) {
          NodeWork& w = by_node[want->node];
          w.node = want->node;
          w.client = ClientFor(want->node);
          w.prepare.emplace_back(static_cast<int>(i), want->allocation);
        }
      }
      if (by_node.empty() && cancel_by_node.empty()) {
        GroupPhase phase = complete ? GroupPhase::kCreated : GroupPhase::kRescheduling;
        if (phase != group.phase) {
          group.phase = phase;
          if (complete) group.explanation.clear();
          PersistGroup(group);
        }
        idle_.SignalAll();
        return;
      }
      for (auto& [node, w] : by_node) work.push_back(std::move(w));
      for (auto& [node, w] : cancel_by_node) stale.push_back(std::move(w));
      group.busy = true;
    }
    CancelOn(name, stale);
    absl::Status status = TwoPhase(name, work);
    absl::MutexLock lock(&mu_);
    GroupEntry& group = groups_.at(name);  // busy: nobody removed it
    group.busy = false;
    idle_.SignalAll();
    for (const NodeWork& w : stale) {
      for (int index : w.cancel) {
        if (group.confirmed[index].has_value() && group.confirmed[index]->node == w.node) {
          group.confirmed[index].reset();
        }
      }
    }
    if (!status.ok()) {
      bool any_confirmed = std::any_of(group.confirmed.begin(), group.confirmed.end(),
                                       [](const auto& hold) { return hold.has_value(); });
      if (!any_confirmed && group.phase == GroupPhase::kCommitting) {
        // A fresh group: give everything back and wait for the cluster to change.
        (void)groups_scheduler_.Remove(*group.scheduled);
        group.scheduled.reset();
        group.confirmed.clear();
        group.phase = GroupPhase::kPending;
      } else {
        group.phase = GroupPhase::kRescheduling;
      }
      group.explanation = absl::StrCat("two-phase commit failed: ", status.message());
      RecordEvent(absl::StrCat("placement group ", name, ": ", group.explanation));
      PersistGroup(group);
      return;
    }
    for (const NodeWork& w : work) {
      for (const auto& [index, allocation] : w.prepare) {
        group.confirmed[index] = BundleHold{w.node, allocation};
      }
    }
  }
}

grpc::Status HeadService::CreatePlacementGroup(grpc::ServerContext*,
                                               const v1::CreatePlacementGroupRequest* request,
                                               v1::PlacementGroupInfo* response) {
  CreateResult result = create_cache_.Run(request->request_id(), [&] {
    CreateResult r;
    r.first = DoCreatePlacementGroup(*request, &r.second);
    return r;
  });
  *response = result.second;
  return result.first;
}

grpc::Status HeadService::DoCreatePlacementGroup(const v1::CreatePlacementGroupRequest& request,
                                                 v1::PlacementGroupInfo* response) {
  auto spec = rpc::PlacementGroupSpecFromProto(request);
  if (!spec.ok()) return Invalid(spec.status());
  std::string name = request.name();
  {
    absl::MutexLock lock(&mu_);
    if (!name.empty() && (groups_.count(name) != 0 || slices_.count(name) != 0)) {
      return grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                          absl::StrCat("a group named ", name, " exists"));
    }
    std::string id;
    do {
      id = absl::StrCat("pg-", next_group_++);
    } while (name.empty() && (groups_.count(id) != 0 || slices_.count(id) != 0));
    if (name.empty()) name = id;
    GroupEntry entry;
    entry.id = id;
    entry.name = name;
    entry.request = request;
    entry.spec = *std::move(spec);
    entry.spec.name = name;
    GroupEntry& group = groups_.emplace(name, std::move(entry)).first->second;
    TryPlaceGroup(group);
    PersistGroup(group);
    if (group.phase != GroupPhase::kCommitting) {
      FillGroupInfo(group, response);
      return grpc::Status::OK;
    }
  }
  SyncGroup(name);
  absl::MutexLock lock(&mu_);
  auto it = groups_.find(name);
  while (it != groups_.end() && it->second.busy) {
    idle_.Wait(&mu_);
    it = groups_.find(name);
  }
  if (it == groups_.end()) {
    response->set_name(name);
    response->set_state("REMOVED");
    return grpc::Status::OK;
  }
  FillGroupInfo(it->second, response);
  return grpc::Status::OK;
}

grpc::Status HeadService::RemovePlacementGroup(grpc::ServerContext*,
                                               const v1::RemovePlacementGroupRequest* request,
                                               v1::RemovePlacementGroupResponse* response) {
  RemoveResult result = remove_cache_.Run(request->request_id(), [&] {
    RemoveResult r;
    r.first = DoRemovePlacementGroup(*request, &r.second);
    return r;
  });
  *response = result.second;
  return result.first;
}

grpc::Status HeadService::DoRemovePlacementGroup(const v1::RemovePlacementGroupRequest& request,
                                                 v1::RemovePlacementGroupResponse* response) {
  const std::string& name = request.name();
  if (name.empty()) return InvalidText("name: is empty");
  std::vector<NodeWork> work;
  {
    absl::MutexLock lock(&mu_);
    auto it = groups_.find(name);
    while (it != groups_.end() && it->second.busy) {
      idle_.Wait(&mu_);
      it = groups_.find(name);
    }
    if (it == groups_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("no placement group named ", name));
    }
    GroupEntry& group = it->second;
    group.busy = true;
    std::map<std::string, NodeWork> by_node;
    for (size_t i = 0; i < group.confirmed.size(); ++i) {
      if (!group.confirmed[i].has_value()) continue;
      NodeWork& w = by_node[group.confirmed[i]->node];
      w.node = group.confirmed[i]->node;
      w.client = ClientFor(w.node);
      w.cancel.push_back(static_cast<int>(i));
    }
    for (auto& [node, w] : by_node) work.push_back(std::move(w));
  }
  // The agents give the bundles back first, so the view never offers them while still held.
  CancelOn(name, work);
  absl::MutexLock lock(&mu_);
  GroupEntry& group = groups_.at(name);
  std::vector<std::optional<BundleHold>> desired = DesiredBundles(group);
  for (size_t i = 0; i < group.confirmed.size(); ++i) {
    const std::optional<BundleHold>& hold = group.confirmed[i];
    if (!hold.has_value()) continue;
    v1::BundleLocation* location = response->add_released();
    location->set_index(static_cast<int>(i));
    location->set_node_id(hold->node);
    rpc::AllocationToProto(hold->allocation, location->mutable_allocation());
  }
  if (group.scheduled.has_value()) (void)groups_scheduler_.Remove(*group.scheduled);
  (void)options_.store->Delete(kPlacementGroupsTable, name);
  groups_.erase(name);
  idle_.SignalAll();
  MarkChanged();
  return grpc::Status::OK;
}

grpc::Status HeadService::WaitPlacementGroup(grpc::ServerContext*,
                                             const v1::WaitPlacementGroupRequest* request,
                                             v1::PlacementGroupInfo* response) {
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
    if (it->second.phase == GroupPhase::kCreated || absl::Now() >= deadline) {
      FillGroupInfo(it->second, response);
      return grpc::Status::OK;
    }
    idle_.WaitWithDeadline(&mu_, deadline);
  }
}

grpc::Status HeadService::ListPlacementGroups(grpc::ServerContext*, const v1::ListRequest*,
                                              v1::ListPlacementGroupsResponse* response) {
  absl::MutexLock lock(&mu_);
  for (const auto& [name, group] : groups_) FillGroupInfo(group, response->add_groups());
  return grpc::Status::OK;
}

// --- slice groups ---

void HeadService::FillSliceInfo(const SliceEntry& slice, v1::SliceGroupInfo* info) const {
  info->Clear();
  info->set_id(slice.id);
  info->set_name(slice.name);
  switch (slice.phase) {
    case SlicePhase::kPending: info->set_state("PENDING"); break;
    case SlicePhase::kInfeasible: info->set_state("INFEASIBLE"); break;
    case SlicePhase::kCommitting: info->set_state("PENDING"); break;
    case SlicePhase::kReserved: info->set_state("RESERVED"); break;
    case SlicePhase::kBroken: info->set_state("BROKEN"); break;
  }
  info->set_alternative(slice.alternative);
  for (const std::string& domain : slice.domains) info->add_domains(domain);
  for (const DomainBundle& bundle : slice.bundles) {
    v1::SliceHost* host = info->add_hosts();
    host->set_domain(bundle.domain);
    host->set_node_id(bundle.node.value());
    host->set_worker(bundle.worker);
    rpc::AllocationToProto(bundle.allocation, host->mutable_allocation());
  }
  std::string explanation = slice.explanation;
  if (slice.phase == SlicePhase::kCommitting && explanation.empty()) {
    explanation = "reserving on the node agents";
  }
  info->set_explanation(explanation);
}

void HeadService::TryPlaceSlice(SliceEntry& slice) {
  auto result = slices_scheduler_.ReserveSlices(slice.parsed);
  if (!result.ok()) {
    slice.phase = SlicePhase::kInfeasible;
    slice.explanation = std::string(result.status().message());
    return;
  }
  if (result->status == ScheduleStatus::kPlaced) {
    slice.scheduled = result->id;
    slice.alternative = static_cast<int>(result->alternative);
    slice.domains = result->domains;
    slice.bundles = result->bundles;
    slice.phase = SlicePhase::kCommitting;
    slice.explanation.clear();
    return;
  }
  slice.phase = result->status == ScheduleStatus::kPending ? SlicePhase::kPending
                                                           : SlicePhase::kInfeasible;
  slice.explanation = result->explanation;
}

void HeadService::SyncSlice(const std::string& name) {
  std::vector<NodeWork> work;
  {
    absl::MutexLock lock(&mu_);
    auto it = slices_.find(name);
    if (it == slices_.end() || it->second.busy || it->second.phase != SlicePhase::kCommitting) {
      return;
    }
    SliceEntry& slice = it->second;
    std::map<std::string, NodeWork> by_node;
    for (size_t i = 0; i < slice.bundles.size(); ++i) {
      const DomainBundle& bundle = slice.bundles[i];
      NodeWork& w = by_node[bundle.node.value()];
      w.node = bundle.node.value();
      w.client = ClientFor(w.node);
      w.prepare.emplace_back(static_cast<int>(i), Exact(bundle.allocation));
    }
    for (auto& [node, w] : by_node) work.push_back(std::move(w));
    slice.busy = true;
  }
  absl::Status status = TwoPhase(name, work);
  absl::MutexLock lock(&mu_);
  SliceEntry& slice = slices_.at(name);
  slice.busy = false;
  idle_.SignalAll();
  if (status.ok()) {
    if (slice.phase == SlicePhase::kCommitting) slice.phase = SlicePhase::kReserved;
  } else {
    if (slice.scheduled.has_value()) (void)slices_scheduler_.Release(*slice.scheduled);
    slice.scheduled.reset();
    slice.bundles.clear();
    slice.domains.clear();
    slice.phase = SlicePhase::kPending;
    slice.explanation = absl::StrCat("two-phase commit failed: ", status.message());
    RecordEvent(absl::StrCat("slice group ", name, ": ", slice.explanation));
  }
  PersistSlice(slice);
}

grpc::Status HeadService::ReserveSlices(grpc::ServerContext*,
                                        const v1::ReserveSlicesRequest* request,
                                        v1::SliceGroupInfo* response) {
  ReserveResult result = reserve_cache_.Run(request->request_id(), [&] {
    ReserveResult r;
    r.first = DoReserveSlices(*request, &r.second);
    return r;
  });
  *response = result.second;
  return result.first;
}

grpc::Status HeadService::DoReserveSlices(const v1::ReserveSlicesRequest& request,
                                          v1::SliceGroupInfo* response) {
  auto parsed = rpc::DomainGroupRequestFromProto(request);
  if (!parsed.ok()) return Invalid(parsed.status());
  std::string name = request.name();
  {
    absl::MutexLock lock(&mu_);
    if (!name.empty() && (groups_.count(name) != 0 || slices_.count(name) != 0)) {
      return grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                          absl::StrCat("a group named ", name, " exists"));
    }
    std::string id;
    do {
      id = absl::StrCat("slices-", next_slice_++);
    } while (name.empty() && (groups_.count(id) != 0 || slices_.count(id) != 0));
    if (name.empty()) name = id;
    SliceEntry entry;
    entry.id = id;
    entry.name = name;
    entry.request = request;
    entry.parsed = *std::move(parsed);
    entry.parsed.name = name;
    // The scheduler refuses shapes it does not know; that is bad input and changes nothing.
    auto result = slices_scheduler_.ReserveSlices(entry.parsed);
    if (!result.ok()) return Invalid(result.status());
    if (result->status == ScheduleStatus::kPlaced) {
      entry.scheduled = result->id;
      entry.alternative = static_cast<int>(result->alternative);
      entry.domains = result->domains;
      entry.bundles = result->bundles;
      entry.phase = SlicePhase::kCommitting;
    } else {
      entry.phase = result->status == ScheduleStatus::kPending ? SlicePhase::kPending
                                                               : SlicePhase::kInfeasible;
      entry.explanation = result->explanation;
    }
    SliceEntry& slice = slices_.emplace(name, std::move(entry)).first->second;
    PersistSlice(slice);
    if (slice.phase != SlicePhase::kCommitting) {
      FillSliceInfo(slice, response);
      return grpc::Status::OK;
    }
  }
  SyncSlice(name);
  absl::MutexLock lock(&mu_);
  auto it = slices_.find(name);
  while (it != slices_.end() && it->second.busy) {
    idle_.Wait(&mu_);
    it = slices_.find(name);
  }
  if (it == slices_.end()) {
    response->set_name(name);
    response->set_state("RELEASED");
    return grpc::Status::OK;
  }
  FillSliceInfo(it->second, response);
  return grpc::Status::OK;
}

grpc::Status HeadService::ReleaseSlices(grpc::ServerContext*,
                                        const v1::ReleaseSlicesRequest* request,
                                        v1::ReleaseSlicesResponse* response) {
  ReleaseResult result = release_cache_.Run(request->request_id(), [&] {
    ReleaseResult r;
    r.first = DoReleaseSlices(*request, &r.second);
    return r;
  });
  *response = result.second;
  return result.first;
}

grpc::Status HeadService::DoReleaseSlices(const v1::ReleaseSlicesRequest& request,
                                          v1::ReleaseSlicesResponse* response) {
  const std::string& name = request.name();
  if (name.empty()) return InvalidText("name: is empty");
  std::vector<NodeWork> work;
  {
    absl::MutexLock lock(&mu_);
    auto it = slices_.find(name);
    while (it != slices_.end() && it->second.busy) {
      idle_.Wait(&mu_);
      it = slices_.find(name);
    }
    if (it == slices_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no slice group named ", name));
    }
    SliceEntry& slice = it->second;
    slice.busy = true;
    if (slice.phase == SlicePhase::kReserved || slice.phase == SlicePhase::kBroken) {
      std::map<std::string, NodeWork> by_node;
      for (size_t i = 0; i < slice.bundles.size(); ++i) {
        NodeWork& w = by_node[slice.bundles[i].node.value()];
        w.node = slice.bundles[i].node.value();
        w.client = ClientFor(w.node);
        w.cancel.push_back(static_cast<int>(i));
      }
      for (auto& [node, w] : by_node) work.push_back(std::move(w));
    }
  }
  CancelOn(name, work);
  absl::MutexLock lock(&mu_);
  SliceEntry& slice = slices_.at(name);
  for (const DomainBundle& bundle : slice.bundles) {
    v1::SliceHost* host = response->add_released();
    host->set_domain(bundle.domain);
    host->set_node_id(bundle.node.value());
    host->set_worker(bundle.worker);
    rpc::AllocationToProto(bundle.allocation, host->mutable_allocation());
  }
  if (slice.scheduled.has_value()) (void)slices_scheduler_.Release(*slice.scheduled);
  (void)options_.store->Delete(kSliceGroupsTable, name);
  slices_.erase(name);
  idle_.SignalAll();
  MarkChanged();
  return grpc::Status::OK;
}

void HeadService::FillSlices(v1::ListSlicesResponse* response) const {
  struct Catalog {
    std::string accelerator_type;
    std::string topology;
    std::set<std::string> workers;
    std::set<std::string> alive_workers;
    int64_t tpu_per_host = 0;
  };
  std::map<std::string, Catalog> slices;
  for (const auto& [id, node] : nodes_) {
    const auto& labels = node.description.labels();
    auto name = labels.find(std::string(labels::kTpuSliceName));
    if (name == labels.end() || name->second.empty()) continue;
    Catalog& c = slices[name->second];
    if (auto t = labels.find(std::string(labels::kAcceleratorType)); t != labels.end()) {
      c.accelerator_type = t->second;
    }
    if (auto t = labels.find(std::string(labels::kTpuTopology)); t != labels.end()) c.topology = t->second;
    std::string worker;
    if (auto w = labels.find(std::string(labels::kTpuWorkerId)); w != labels.end()) worker = w->second;
    c.workers.insert(worker);
    if (node.health == NodeHealth::kAlive) c.alive_workers.insert(worker);
    auto tpu = node.description.resources().raw().find("TPU");
    if (tpu != node.description.resources().raw().end()) {
      c.tpu_per_host = std::max(c.tpu_per_host, tpu->second / Quantity::kScale);
    }
  }
  std::map<std::string, std::string> holders;
  for (const auto& [name, slice] : slices_) {
    for (const std::string& domain : slice.domains) holders[domain] = name;
  }
  for (const auto& [name, c] : slices) {
    auto* out = response->add_slices();
    out->set_name(name);
    out->set_accelerator_type(c.accelerator_type);
    out->set_topology(c.topology);
    int64_t chips = TopologyChips(c.topology);
    int64_t hosts = (chips > 0 && c.tpu_per_host > 0)
                        ? std::max<int64_t>(1, chips / c.tpu_per_host)
                        : static_cast<int64_t>(c.workers.size());
    out->set_hosts(static_cast<int>(hosts));
    out->set_hosts_alive(static_cast<int>(c.alive_workers.size()));
    out->set_intact(static_cast<int64_t>(c.alive_workers.size()) >= hosts);
    if (auto h = holders.find(name); h != holders.end()) out->set_held_by(h->second);
  }
  for (const auto& [name, slice] : slices_) FillSliceInfo(slice, response->add_groups());
}

grpc::Status HeadService::ListSlices(grpc::ServerContext*, const v1::ListRequest*,
                                     v1::ListSlicesResponse* response) {
  absl::MutexLock lock(&mu_);
  FillSlices(response);
  return grpc::Status::OK;
}

// --- inspection ---

void HeadService::FillNodeInfo(const NodeEntry& node, v1::NodeInfo* info) const {
  *info->mutable_node() = node.description;
  info->set_state(node.health == NodeHealth::kAlive ? "ALIVE" : "DEAD");
  if (node.health == NodeHealth::kAlive) {
    if (std::optional<NodeIndex> index = view_.Find(NodeId(node.id)); index.has_value()) {
      rpc::ResourcesToProto(view_.node(*index).available, info->mutable_available());
    }
  }
  info->set_last_heartbeat_age_ms(absl::ToInt64Milliseconds(clock_->Now() - node.last_heartbeat));
  info->set_workers(node.workers);
}

grpc::Status HeadService::ListNodes(grpc::ServerContext*, const v1::ListRequest*,
                                    v1::ListNodesResponse* response) {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, node] : nodes_) FillNodeInfo(node, response->add_nodes());
  return grpc::Status::OK;
}

grpc::Status HeadService::GetClusterStatus(grpc::ServerContext*, const v1::ListRequest*,
                                           v1::ClusterStatus* response) {
  absl::MutexLock lock(&mu_);
  std::map<std::string, std::pair<int64_t, int64_t>> usage;  // resource -> (used, total)
  for (const auto& [id, node] : nodes_) {
    FillNodeInfo(node, response->add_nodes());
    if (node.health != NodeHealth::kAlive) continue;
    std::optional<NodeIndex> index = view_.Find(NodeId(id));
    if (!index.has_value()) continue;
    const NodeRecord& record = view_.node(*index);
    for (const auto& [resource, total] : record.total) {
      auto& [used, sum] = usage[resource];
      sum += total.raw();
      used += total.raw() - record.available.Get(resource).raw();
    }
  }
  for (const auto& [resource, amounts] : usage) {
    v1::ResourceUsage* out = response->add_usage();
    out->set_resource(resource);
    out->set_used_raw(amounts.first);
    out->set_total_raw(amounts.second);
  }
  FillSlices(response->mutable_slices());
  for (const auto& [name, group] : groups_) {
    FillGroupInfo(group, response->add_placement_groups());
    if (group.phase == GroupPhase::kPending || group.phase == GroupPhase::kInfeasible ||
        group.phase == GroupPhase::kRescheduling) {
      v1::Demand* demand = response->add_demand();
      demand->set_kind("placement group");
      demand->set_name(name);
      demand->set_status(group.phase == GroupPhase::kInfeasible ? "infeasible" : "pending");
      demand->set_explanation(group.explanation);
    }
  }
  for (const auto& [name, slice] : slices_) {
    if (slice.phase == SlicePhase::kPending || slice.phase == SlicePhase::kInfeasible) {
      v1::Demand* demand = response->add_demand();
      demand->set_kind("slices");
      demand->set_name(name);
      demand->set_status(slice.phase == SlicePhase::kInfeasible ? "infeasible" : "pending");
      demand->set_explanation(slice.explanation);
    }
  }
  for (const std::string& event : events_) response->add_events(event);
  return grpc::Status::OK;
}

// --- jobs and KV ---

grpc::Status HeadService::RecordJob(grpc::ServerContext*, const v1::RecordJobRequest* request,
                                    v1::JobInfo* response) {
  const v1::JobInfo& job = request->job();
  if (job.job_id().empty()) return InvalidText("job.job_id: is empty");
  const std::string& state = job.state();
  if (!state.empty() && state != "RUNNING" && state != "SUCCEEDED" && state != "FAILED") {
    return InvalidText(absl::StrCat("job.state: ", Quote(state),
                                    " is not RUNNING, SUCCEEDED or FAILED"));
  }
  absl::MutexLock lock(&mu_);
  auto [it, created] = jobs_.try_emplace(job.job_id());
  v1::JobInfo& stored = it->second;
  if (created) {
    stored = job;
    if (stored.state().empty()) stored.set_state("RUNNING");
    if (stored.start_time_ms() == 0) stored.set_start_time_ms(absl::ToUnixMillis(clock_->Now()));
  } else {
    // An update: fields given replace the stored ones; a finished job stays finished.
    if (job.argv_size() > 0) *stored.mutable_argv() = job.argv();
    if (!job.node_id().empty()) stored.set_node_id(job.node_id());
    if (!job.worker_id().empty()) stored.set_worker_id(job.worker_id());
    if (!state.empty() && stored.state() == "RUNNING") stored.set_state(state);
    if (!job.exit_reason().empty()) stored.set_exit_reason(job.exit_reason());
    if (job.start_time_ms() != 0) stored.set_start_time_ms(job.start_time_ms());
    if (job.end_time_ms() != 0) stored.set_end_time_ms(job.end_time_ms());
  }
  if (stored.state() != "RUNNING" && stored.end_time_ms() == 0) {
    stored.set_end_time_ms(absl::ToUnixMillis(clock_->Now()));
  }
  (void)options_.store->Put(kJobsTable, stored.job_id(), stored.SerializeAsString());
  *response = stored;
  return grpc::Status::OK;
}

grpc::Status HeadService::ListJobs(grpc::ServerContext*, const v1::ListRequest*,
                                   v1::ListJobsResponse* response) {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, job] : jobs_) *response->add_jobs() = job;
  return grpc::Status::OK;
}

grpc::Status HeadService::KvPut(grpc::ServerContext*, const v1::KvPutRequest* request,
                                v1::KvPutResponse* response) {
  if (request->key().empty()) return InvalidText("key: is empty");
  // Under the head's mutex so check-then-write is one step.
  absl::MutexLock lock(&mu_);
  auto existing = options_.store->Get(kKvTable, request->key());
  if (!existing.ok()) return rpc::ToGrpcStatus(existing.status());
  bool exists = existing->has_value();
  if (exists && !request->overwrite()) {
    response->set_added(false);
    return grpc::Status::OK;
  }
  absl::Status put = options_.store->Put(kKvTable, request->key(), request->value());
  if (!put.ok()) return rpc::ToGrpcStatus(put);
  response->set_added(!exists);
  return grpc::Status::OK;
}

grpc::Status HeadService::KvGet(grpc::ServerContext*, const v1::KvGetRequest* request,
                                v1::KvGetResponse* response) {
  auto value = options_.store->Get(kKvTable, request->key());
  if (!value.ok()) return rpc::ToGrpcStatus(value.status());
  response->set_found(value->has_value());
  if (value->has_value()) response->set_value(**value);
  return grpc::Status::OK;
}

grpc::Status HeadService::KvDelete(grpc::ServerContext*, const v1::KvDeleteRequest* request,
                                   v1::KvDeleteResponse* response) {
  absl::MutexLock lock(&mu_);
  auto deleted = options_.store->Delete(kKvTable, request->key());
  if (!deleted.ok()) return rpc::ToGrpcStatus(deleted.status());
  response->set_deleted(*deleted);
  return grpc::Status::OK;
}

grpc::Status HeadService::KvList(grpc::ServerContext*, const v1::KvListRequest* request,
                                 v1::KvListResponse* response) {
  auto entries = options_.store->List(kKvTable, request->prefix());
  if (!entries.ok()) return rpc::ToGrpcStatus(entries.status());
  for (const auto& [key, value] : *entries) response->add_keys(key);
  return grpc::Status::OK;
}

grpc::Status HeadService::Shutdown(grpc::ServerContext*, const v1::ShutdownRequest*,
                                   v1::ShutdownResponse*) {
  if (options_.on_shutdown) options_.on_shutdown();
  return grpc::Status::OK;
}

// --- health and reconciliation ---

void HeadService::Tick() {
  std::vector<std::string> groups_to_sync;
  std::vector<std::string> slices_to_sync;
  {
    absl::MutexLock lock(&mu_);
    absl::Time now = clock_->Now();
    for (auto& [id, node] : nodes_) {
      if (node.health != NodeHealth::kAlive) continue;
      absl::Duration silent = now - node.last_heartbeat;
      if (silent > options_.node_timeout) {
        DeclareDead(node, absl::StrCat("no heartbeat for ", ShortDuration(silent)));
      }
    }
    if (changed_ || now - last_retry_ >= options_.retry_interval) {
      changed_ = false;
      last_retry_ = now;
      std::vector<RescheduleReport> reports = groups_scheduler_.OnClusterChanged();
      for (const RescheduleReport& report : reports) {
        for (auto& [name, group] : groups_) {
          if (group.scheduled == report.id && !report.placed) group.explanation = report.explanation;
        }
      }
      for (auto& [name, group] : groups_) {
        if (group.busy) continue;
        if (group.phase == GroupPhase::kPending || group.phase == GroupPhase::kInfeasible) {
          TryPlaceGroup(group);
          if (group.phase != GroupPhase::kCommitting) continue;
          PersistGroup(group);
        }
      }
      for (auto& [name, slice] : slices_) {
        if (slice.busy) continue;
        if (slice.phase == SlicePhase::kPending || slice.phase == SlicePhase::kInfeasible) {
          TryPlaceSlice(slice);
          PersistSlice(slice);
        }
      }
    }
    for (const auto& [name, group] : groups_) {
      if (group.busy) continue;
      if (group.phase == GroupPhase::kCommitting || group.phase == GroupPhase::kRescheduling) {
        groups_to_sync.push_back(name);
      }
    }
    for (const auto& [name, slice] : slices_) {
      if (!slice.busy && slice.phase == SlicePhase::kCommitting) slices_to_sync.push_back(name);
    }
  }
  for (const std::string& name : groups_to_sync) SyncGroup(name);
  for (const std::string& name : slices_to_sync) SyncSlice(name);
}

}  // namespace tessera

// HeadService, the node registry: registration (an agent restart replaces the node; a second
// live agent with the same node id is refused), heartbeats mirroring the agents' leases into the
// view and reconciling the bundles they hold with the reservations, and health (a silent node is
// declared dead, its bundles re-placed or its slices broken, its running jobs presumed failed;
// silence is counted only while the head could hear).
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/string_util.h"
#include "head/head_service.h"
#include "head/head_service_internal.h"
#include "head/request_limits.h"

namespace tessera {

using head_internal::Invalid;
using head_internal::InvalidText;

std::shared_ptr<NodeAgentClient> HeadService::ClientFor(const std::string& node) const {
  auto it = nodes_.find(node);
  if (it == nodes_.end() || it->second.health != NodeHealth::kAlive) return nullptr;
  return it->second.client;
}

AgentLookup HeadService::Agents() const {
  // Called under mu_ by the plans built under mu_.
  return [this](const std::string& node) { return ClientFor(node); };
}

void HeadService::PersistNode(const NodeEntry& node) {
  StorePut(kNodesTable, node.id, node.description.SerializeAsString());
}

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

absl::Time HeadService::LastHeard(const NodeEntry& node) const {
  absl::MutexLock lock(&heard_mu_);
  auto it = heard_.find(node.id);
  if (it != heard_.end() && it->second.incarnation == node.incarnation) {
    return std::max(node.last_heartbeat, it->second.at);
  }
  return node.last_heartbeat;
}

// The rule: a node is dead once it has been silent for node_timeout of time the head watched.
// The ticker checks far more often than once per heartbeat interval; a check that comes later
// than that means the head itself was not running its checks (a request held mu_, the ticker was
// stuck, the process was paused) and heartbeats sent meanwhile may not have been read yet. Such a
// check does not declare anyone dead on that gap: a node it would declare dead instead has the
// start of its silence moved forward by the gap (at most to now), once per silence — a node that
// stays silent is declared dead by a later check, at most one gap late.
void HeadService::CheckHealth(absl::Time now) {
  const absl::Duration gap = now - last_health_check_;
  last_health_check_ = now;
  const bool late = gap > options_.heartbeat_interval;
  auto format = [](absl::Duration d) {
    return absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(1)));
  };
  int spared = 0;
  for (auto& [id, node] : nodes_) {
    if (node.health != NodeHealth::kAlive) continue;
    const absl::Time heard = LastHeard(node);
    absl::Time from = std::max(heard, node.watched_from);
    if (now - from <= options_.node_timeout) continue;
    // A grace always moves watched_from past the heartbeat it followed, so a heartbeat at or
    // after it is a new one.
    if (late && heard >= node.watched_from) {
      node.watched_from = std::min(now, heard + gap);
      from = std::max(heard, node.watched_from);
      if (now - from <= options_.node_timeout) {
        ++spared;
        continue;
      }
    }
    DeclareDead(node, absl::StrCat("no heartbeat for ", format(now - from)));
  }
  if (spared > 0) {
    RecordEvent(absl::StrCat("the health check ran ", format(gap),
                             " after the previous one (the head was busy or paused); ", spared,
                             " nodes silent past the timeout were given that much longer"));
  }
  absl::MutexLock lock(&heard_mu_);
  for (auto it = heard_.begin(); it != heard_.end();) {
    auto node = nodes_.find(it->first);
    if (node == nodes_.end() || node->second.incarnation != it->second.incarnation) {
      heard_.erase(it++);
    } else {
      ++it;
    }
  }
}

void HeadService::DeclareDead(NodeEntry& node, const std::string& reason) {
  if (node.health == NodeHealth::kDead) return;
  node.health = NodeHealth::kDead;
  node.leases.clear();
  node.committed_epochs.clear();
  auto lost = view_.FailNode(NodeId(node.id));
  std::vector<Allocation> lost_allocations = lost.ok() ? *std::move(lost) : std::vector<Allocation>();
  std::vector<std::string> moved;
  std::vector<std::string> broken;
  ReservationsLostNode(node.id, reason, lost_allocations, &moved, &broken);
  int failed_jobs = FailJobsOn(node.id, reason);
  std::string event = absl::StrCat("node ", node.id, " declared dead: ", reason);
  if (!moved.empty()) {
    absl::StrAppend(&event, "; bundles of ", absl::StrJoin(moved, ", "), " are re-placed");
  }
  if (!broken.empty()) absl::StrAppend(&event, "; slice groups ", absl::StrJoin(broken, ", "),
                                       " are broken");
  if (failed_jobs > 0) {
    absl::StrAppend(&event, "; ", failed_jobs,
                    " running jobs are presumed failed (until their real end is recorded)");
  }
  RecordEvent(std::move(event));
  PersistNode(node);
  MarkChanged();
}

void HeadService::DropNodeFromView(NodeEntry& node, const std::string& reason) {
  DeclareDead(node, reason);
  (void)view_.RemoveNode(NodeId(node.id));
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
  // Another incarnation that is still heard from keeps its node: this is a second agent started
  // with the same node id, not a restart. (At the same address the old agent cannot be running:
  // the new one took its port. Once silent past the timeout it is dead either way.)
  if (existing != nodes_.end() && existing->second.health == NodeHealth::kAlive &&
      existing->second.incarnation != registration->incarnation &&
      existing->second.description.address() != registration->address) {
    const absl::Duration silent = clock_->Now() - LastHeard(existing->second);
    if (silent <= options_.node_timeout) {
      const NodeEntry& live = existing->second;
      std::string message = absl::StrCat(
          "node ", id, " is already held by a live agent at ", live.description.address(),
          " (incarnation ", live.incarnation, ", heard from ",
          absl::FormatDuration(absl::Trunc(silent, absl::Milliseconds(1))),
          " ago); stop that agent first, or give this one another node id");
      RecordEvent(absl::StrCat("a second agent for node ", id, " (at ", registration->address,
                               ") was refused: ", message));
      return grpc::Status(grpc::StatusCode::ALREADY_EXISTS, std::move(message));
    }
  }
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
    bool known = NameTaken(group);
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
  response->set_bundles_epoch(bundles_epoch_);
  return grpc::Status::OK;
}

grpc::Status HeadService::Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* request,
                                    v1::HeartbeatResponse* response) {
  const absl::Time arrived = clock_->Now();
  for (int i = 0; i < request->leases_size(); ++i) {
    auto allocation = rpc::AllocationFromProto(request->leases(i).allocation(),
                                               absl::StrCat("leases[", i, "].allocation"));
    if (!allocation.ok()) return Invalid(allocation.status());
  }
  for (int i = 0; i < request->bundles_size(); ++i) {
    if (request->bundles(i).placement_group().empty()) {
      return InvalidText(absl::StrCat("bundles[", i, "].placement_group: is empty"));
    }
    if (request->bundles(i).bundle_index() < 0) {
      return InvalidText(absl::StrCat("bundles[", i, "].bundle_index: ",
                                      request->bundles(i).bundle_index(), " is negative"));
    }
  }
  {
    // Before mu_: a heartbeat that waits behind a slow request counts from its arrival.
    absl::MutexLock heard(&heard_mu_);
    heard_[request->node_id()] = HeardFrom{request->incarnation(), arrived};
  }
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(request->node_id());
  if (it == nodes_.end() || it->second.health != NodeHealth::kAlive ||
      it->second.incarnation != request->incarnation()) {
    response->set_known(false);
    return grpc::Status::OK;
  }
  NodeEntry& node = it->second;
  node.last_heartbeat = std::max(node.last_heartbeat, arrived);
  node.workers = request->workers();
  MirrorLeases(node, request->leases());
  ReconcileBundles(node, *request, response);
  response->set_known(true);
  response->set_bundles_epoch(bundles_epoch_);
  return grpc::Status::OK;
}

void HeadService::NoteCommitted(const std::string& node, const std::string& reservation,
                                int index) {
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return;
  it->second.committed_epochs[{reservation, index}] = ++bundles_epoch_;
}

void HeadService::ReconcileBundles(NodeEntry& node, const v1::HeartbeatRequest& request,
                                   v1::HeartbeatResponse* response) {
  // Held by the agent, not by the head: a prepare applied after the head cancelled it (or gave
  // up on it), or a group removed while its cancel did not get through. KnowsBundle counts a
  // reservation with a round in flight as known: a prepare in flight is not an orphan.
  std::set<std::pair<std::string, int>> reported;
  std::map<std::string, std::vector<int>> released;
  for (const v1::HeldBundle& bundle : request.bundles()) {
    reported.emplace(bundle.placement_group(), bundle.bundle_index());
    if (KnowsBundle(node.id, bundle)) continue;
    *response->add_release() = bundle;
    released[bundle.placement_group()].push_back(bundle.bundle_index());
  }
  for (const auto& [group, indices] : released) {
    RecordEvent(absl::StrCat(
        "bundles ", absl::StrJoin(indices, ","), " of ", group, " on ", node.id,
        NameTaken(group) ? " were held by the agent but not by the head (prepared after the head "
                           "had cancelled them); they were released"
                         : " belong to no group the head holds (removed, or prepared after the "
                           "head gave up on it); they were released"));
  }
  // Committed here by the head, missing on the agent. Judged only from a report taken after
  // the agent saw the epoch of that commit, so the report cannot predate the prepare.
  for (auto it = node.committed_epochs.begin(); it != node.committed_epochs.end();) {
    const auto& [key, epoch] = *it;
    Reservation* reservation = FindReservation(key.first);
    const bool still_committed =
        reservation != nullptr && key.second < static_cast<int>(reservation->confirmed.size()) &&
        reservation->confirmed[key.second].has_value() &&
        reservation->confirmed[key.second]->node == node.id;
    if (!still_committed) {
      it = node.committed_epochs.erase(it);
      continue;
    }
    if (reservation->busy || epoch > request.bundles_epoch_seen() || reported.contains(key)) {
      ++it;
      continue;
    }
    const int index = key.second;
    it = node.committed_epochs.erase(it);
    ReservationLostBundle(*reservation, index, node.id);
  }
}

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

grpc::Status HeadService::ListNodes(grpc::ServerContext*, const v1::ListRequest* request,
                                    v1::ListNodesResponse* response) {
  // Pages by node id: a node registered or dropped meanwhile moves no other node across pages.
  constexpr std::string_view kListing = "nodes";
  if (absl::Status limits = request_limits::Check(*request); !limits.ok()) return Invalid(limits);
  auto page = head_internal::ParsePageRequest(*request, kListing, options_.max_page_size);
  if (!page.ok()) return Invalid(page.status());
  absl::MutexLock lock(&mu_);
  head_internal::PageFiller filler(page->size, options_.max_page_bytes);
  std::optional<std::string> resume = head_internal::AppendPage(
      nodes_.upper_bound(page->after), nodes_.end(), filler, response->mutable_nodes(),
      [](const auto& entry) { return entry.first; },
      [&](const auto& entry, v1::NodeInfo* out) { FillNodeInfo(entry.second, out); });
  if (resume.has_value()) response->set_next_page_token(head_internal::PageToken(kListing, *resume));
  return grpc::Status::OK;
}

}  // namespace tessera

#include "head/node_registry.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/ignore_status.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "head/state_store.h"
#include "scheduling/explanation.h"

namespace tessera {

namespace {

std::string Millis(absl::Duration d) {
  return absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(1)));
}

}  // namespace

const NodeRegistry::Node* NodeRegistry::Find(const std::string& node) const {
  auto it = nodes_.find(node);
  return it == nodes_.end() ? nullptr : &it->second;
}

bool NodeRegistry::IsAlive(const std::string& node) const {
  const Node* found = Find(node);
  return found != nullptr && found->health == Health::kAlive;
}

std::shared_ptr<NodeAgentClient> NodeRegistry::ClientFor(const std::string& node) const {
  const Node* found = Find(node);
  if (found == nullptr || found->health != Health::kAlive) return nullptr;
  return found->client;
}

AgentLookup NodeRegistry::Agents() const {
  // Called by the plans built under the controller's mutex, while it is held.
  return [this](const std::string& node) { return ClientFor(node); };
}

void NodeRegistry::Persist(const Node& node) const {
  options_.writer->Put(kNodesTable, node.id, node.description.SerializeAsString());
}

void NodeRegistry::MirrorLeases(Node& node, const std::vector<ReportedLease>& leases) {
  ClusterView& view = cluster_->view;
  std::optional<NodeIndex> index = view.Find(NodeId(node.id));
  if (!index.has_value()) return;
  absl::flat_hash_set<std::string> seen;
  for (const ReportedLease& lease : leases) {
    seen.insert(lease.lease_id);
    if (node.leases.contains(lease.lease_id)) continue;
    auto taken = view.AllocateExact(*index, lease.allocation.resources, lease.allocation.devices);
    // A lease the view cannot take (the head reserved those devices for a bundle the agent has
    // not prepared yet) is retried at the next heartbeat; the bundle's prepare fails meanwhile.
    if (!taken.ok()) continue;
    IgnoreStatus(view.SetHolder(taken->id, Holder{HolderKind::kLease, lease.lease_id}),
                 "cannot fail: the allocation was just taken");
    node.leases.emplace(lease.lease_id, taken->id);
  }
  for (auto it = node.leases.begin(); it != node.leases.end();) {
    if (seen.contains(it->first)) {
      ++it;
      continue;
    }
    IgnoreStatus(view.Release(it->second),
                 "NotFound only after the node's failure gave everything back");
    node.leases.erase(it++);
    cluster_->changed = true;
  }
}

void HeartbeatArrivals::Note(const std::string& node, const std::string& incarnation,
                             absl::Time arrived) {
  absl::MutexLock lock(&mu_);
  heard_[node] = HeardFrom{incarnation, arrived};
}

std::optional<absl::Time> HeartbeatArrivals::Latest(const std::string& node,
                                                    const std::string& incarnation) const {
  absl::MutexLock lock(&mu_);
  auto it = heard_.find(node);
  if (it == heard_.end() || it->second.incarnation != incarnation) return std::nullopt;
  return it->second.at;
}

void HeartbeatArrivals::KeepOnly(
    absl::FunctionRef<bool(const std::string&, const std::string&)> current) {
  absl::MutexLock lock(&mu_);
  for (auto it = heard_.begin(); it != heard_.end();) {
    if (current(it->first, it->second.incarnation)) {
      ++it;
    } else {
      heard_.erase(it++);
    }
  }
}

absl::Time NodeRegistry::LastHeard(const Node& node) const {
  const std::optional<absl::Time> arrived = arrivals_->Latest(node.id, node.incarnation);
  return arrived.has_value() ? std::max(node.last_heartbeat, *arrived) : node.last_heartbeat;
}

// The rule: a node is dead once it has been silent for node_timeout of time the head watched.
// The ticker checks far more often than once per heartbeat interval; a check that comes later
// than that means the head itself was not running its checks (a request held the lock, the
// ticker was stuck, the process was paused) and heartbeats sent meanwhile may not have been read
// yet. Such a check does not declare anyone dead on that gap: a node it would declare dead
// instead has the start of its silence moved forward by the gap (at most to now), once per
// silence — a node that stays silent is declared dead by a later check, at most one gap late.
void NodeRegistry::CheckHealth(absl::Time now) {
  const absl::Duration gap = now - last_health_check_;
  last_health_check_ = now;
  const bool late = gap > options_.heartbeat_interval;
  int spared = 0;
  for (auto& [id, node] : nodes_) {
    if (node.health != Health::kAlive) continue;
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
    DeclareDead(node, absl::StrCat("no heartbeat for ", Millis(now - from)));
  }
  if (spared > 0) {
    options_.events->Record(
        absl::StrCat("the health check ran ", Millis(gap),
                     " after the previous one (the head was busy or paused); ", spared,
                     " nodes silent past the timeout were given that much longer"),
        "node");
  }
  arrivals_->KeepOnly([this](const std::string& id, const std::string& incarnation) {
    auto node = nodes_.find(id);
    return node != nodes_.end() && node->second.incarnation == incarnation;
  });
}

void NodeRegistry::DeclareDead(Node& node, const std::string& reason) {
  if (node.health == Health::kDead) return;
  node.health = Health::kDead;
  node.leases.clear();
  std::vector<Holder> leases;
  if (const std::optional<NodeIndex> index = cluster_->view.Find(NodeId(node.id))) {
    const NodeIndex dying[] = {*index};
    for (const Holder& h : HoldersOn(cluster_->view, dying)) {
      if (h.kind == HolderKind::kLease) leases.push_back(h);
    }
  }
  auto lost = cluster_->view.FailNode(NodeId(node.id));
  std::vector<Allocation> lost_allocations =
      lost.ok() ? *std::move(lost) : std::vector<Allocation>();
  std::string event = absl::StrCat("node ", node.id, " declared dead: ", reason);
  if (!leases.empty()) absl::StrAppend(&event, "; work lost: ", DescribeHolders(leases));
  listener_->OnNodeDead(node.id, reason, lost_allocations, &event);
  options_.events->Record(std::move(event), "node");
  Persist(node);
  cluster_->changed = true;
}

absl::Status NodeRegistry::Register(const wire::NodeRegistration& registration,
                                    const v1::NodeDescription& description,
                                    const std::vector<ReportedLease>& leases,
                                    const std::vector<ReportedBundle>& bundles,
                                    std::vector<size_t>* release) {
  const std::string id = registration.spec.id.value();
  const absl::Time now = options_.clock->Now();
  auto existing = nodes_.find(id);
  // Another incarnation that is still heard from keeps its node: this is a second agent started
  // with the same node id, not a restart. (At the same address the old agent cannot be running:
  // the new one took its port. Once silent past the timeout it is dead either way.)
  if (existing != nodes_.end() && existing->second.health == Health::kAlive &&
      existing->second.incarnation != registration.incarnation &&
      existing->second.description.address() != registration.address) {
    const absl::Duration silent = now - LastHeard(existing->second);
    if (silent <= options_.node_timeout) {
      const Node& live = existing->second;
      std::string message = absl::StrCat(
          "node ", id, " is already held by a live agent at ", live.description.address(),
          " (incarnation ", live.incarnation, ", heard from ", Millis(silent),
          " ago); stop that agent first, or give this one another node id");
      options_.events->Record(absl::StrCat("a second agent for node ", id, " (at ",
                                           registration.address, ") was refused: ", message),
                              "node");
      return absl::AlreadyExistsError(std::move(message));
    }
  }
  const bool same_agent = existing != nodes_.end() && existing->second.health == Health::kAlive &&
                          existing->second.incarnation == registration.incarnation;
  if (!same_agent) {
    if (existing != nodes_.end()) {
      Node& old = existing->second;
      if (old.health == Health::kAlive) {
        DeclareDead(old, absl::StrCat("its agent restarted (incarnation ", old.incarnation, " -> ",
                                      registration.incarnation, ")"));
      }
      IgnoreStatus(cluster_->view.RemoveNode(NodeId(id)),
                   "NotFound only for a node the view holds no more: nothing to remove");
      nodes_.erase(existing);
    }
    auto added = cluster_->view.AddNode(registration.spec);
    if (!added.ok()) return absl::InvalidArgumentError(added.status().message());
    Node entry;
    entry.id = id;
    entry.incarnation = registration.incarnation;
    entry.client = options_.agent_clients(id, registration.address);
    existing = nodes_.emplace(id, std::move(entry)).first;
    cluster_->changed = true;
    options_.events->RecordChange(
        absl::StrCat("node ", id, " joined (agent at ", registration.address,
                     "): ", registration.spec.resources.ToString()),
        "node");
  } else if (existing->second.description.address() != registration.address) {
    existing->second.client = options_.agent_clients(id, registration.address);
  }
  Node& node = existing->second;
  node.description = description;
  node.last_heartbeat = now;
  MirrorLeases(node, leases);
  *release = listener_->OnBundlesReported(id, bundles, std::nullopt);
  Persist(node);
  return absl::OkStatus();
}

bool NodeRegistry::Heartbeat(const std::string& id, const std::string& incarnation,
                             absl::Time arrived, int workers,
                             const std::vector<ReportedLease>& leases,
                             const std::vector<ReportedBundle>& bundles, int64_t epoch_seen,
                             std::vector<size_t>* release) {
  auto it = nodes_.find(id);
  if (it == nodes_.end() || it->second.health != Health::kAlive ||
      it->second.incarnation != incarnation) {
    return false;
  }
  Node& node = it->second;
  node.last_heartbeat = std::max(node.last_heartbeat, arrived);
  node.workers = workers;
  MirrorLeases(node, leases);
  *release = listener_->OnBundlesReported(id, bundles, epoch_seen);
  return true;
}

absl::Status NodeRegistry::Restore() {
  auto corrupt = [](const std::string& key, absl::string_view why) {
    return absl::DataLossError(
        absl::StrCat("state store table ", ToAbsl(kNodesTable), ", key ", key, ": ", why));
  };
  TESSERA_ASSIGN_OR_RETURN(auto records, options_.writer->store()->List(kNodesTable));
  for (const auto& [key, value] : records) {
    v1::NodeDescription description;
    if (!description.ParseFromString(value)) return corrupt(key, "not a node record");
    auto node = wire::NodeFromProto(description);
    if (!node.ok()) return corrupt(key, node.status().message());
    const std::string id = node->spec.id.value();
    if (id != key) return corrupt(key, absl::StrCat("holds node ", id));
    auto added = cluster_->view.AddNode(node->spec);
    if (!added.ok()) return corrupt(key, added.status().message());
    Node entry;
    entry.id = id;
    entry.incarnation = node->incarnation;
    entry.description = std::move(description);
    entry.client = options_.agent_clients(id, node->address);
    // Heard from "now": its agent has a whole node timeout to heartbeat this head.
    entry.last_heartbeat = options_.clock->Now();
    nodes_.emplace(id, std::move(entry));
  }
  if (!records.empty()) {
    options_.events->Record(absl::StrCat("restored ", records.size(),
                                         " nodes from the state store; waiting for their agents"),
                            "node");
  }
  return absl::OkStatus();
}

}  // namespace tessera

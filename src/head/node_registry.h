// NodeRegistry: the head's nodes — registration (an agent restart replaces the node; a second
// live agent with the same node id is refused), heartbeats (mirroring the agents' leases into
// the ClusterView), health (a silent node is declared dead; silence counts only while the head
// could hear) — and their records in the StateStore (table "nodes"). What a node's death or an
// agent's bundle report means for reservations, jobs and actors is the NodeListener's business.
//
// Thread-safety: the node table is guarded by ClusterState::mu, which callers hold (the
// ABSL_EXCLUSIVE_LOCKS_REQUIRED methods) — except NoteArrival, which stamps a heartbeat's arrival
// under a small lock of its own before the caller waits for ClusterState::mu, so a heartbeat
// queued behind a slow request still counts from its arrival.
// Cost: Register/Heartbeat O(that node's leases); CheckHealth O(nodes).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "head/cluster_state.h"
#include "head/event_log.h"
#include "head/node_agent_client.h"
#include "head/reservation.h"
#include "head/store_writer.h"
#include "tessera/v1/common.pb.h"
#include "wire/proto_convert.h"

namespace tessera {

// A lease an agent holds outside any bundle (leases inside bundles use the bundle's allocation).
struct ReportedLease {
  std::string lease_id;
  wire::ExactAllocation allocation;
};

// A bundle an agent holds, prepared or committed.
struct ReportedBundle {
  std::string reservation;  // the name the head gave the agent
  int index = 0;
};

// What the rest of the head does about nodes. Called with ClusterState::mu held.
class NodeListener {
 public:
  virtual ~NodeListener() = default;
  // `node` was declared dead for `reason`; `lost` are the allocations the view held there.
  // Appends to `event` ("; ..." clauses) what that did.
  virtual void OnNodeDead(const std::string& node, const std::string& reason,
                          const std::vector<Allocation>& lost, std::string* event) = 0;
  // The agent of `node` reported the bundles it holds: at registration (epoch_seen nullopt) or in
  // a heartbeat that saw `epoch_seen`. Returns the positions in `bundles` the agent must release.
  virtual std::vector<size_t> OnBundlesReported(const std::string& node,
                                                const std::vector<ReportedBundle>& bundles,
                                                std::optional<int64_t> epoch_seen) = 0;
};

struct NodeRegistryOptions {
  absl::Duration heartbeat_interval = absl::Milliseconds(500);
  absl::Duration node_timeout = absl::Seconds(5);
  Clock* clock = nullptr;                // required
  StoreWriter* writer = nullptr;         // required
  EventLog* events = nullptr;            // required
  NodeAgentClientFactory agent_clients;  // required
};

class NodeRegistry {
 public:
  enum class Health { kAlive, kDead };
  struct Node {
    std::string id;
    v1::NodeDescription description;  // as its agent registered it (listed as it came)
    std::string incarnation;
    Health health = Health::kAlive;
    absl::Time last_heartbeat;
    int workers = 0;
    std::shared_ptr<NodeAgentClient> client;
    // Leases outside bundles, mirrored into the view: lease id -> allocation id.
    absl::flat_hash_map<std::string, AllocationId> leases;
    // Where the silence the health check counts starts when a late check moved it (the node's
    // grace); a grace is given again only after a heartbeat newer than this.
    absl::Time watched_from = absl::InfinitePast();
  };

  NodeRegistry(NodeRegistryOptions options, ClusterState* cluster)
      : options_(std::move(options)), cluster_(cluster) {}
  // Required before the first call; must outlive the registry.
  void set_listener(NodeListener* listener) { listener_ = listener; }
  // The mutex its methods require: ClusterState::mu (ClusterLock names it).
  absl::Mutex* mutex() const ABSL_LOCK_RETURNED(cluster_->mu) { return &cluster_->mu; }

  // Registers (or re-registers) a node with what its agent holds. AlreadyExists when another
  // live agent holds the node id; InvalidArgument when the view refuses the node. `release`
  // gets the positions of `bundles` the agent must give back.
  absl::Status Register(const wire::NodeRegistration& registration,
                        const v1::NodeDescription& description,
                        const std::vector<ReportedLease>& leases,
                        const std::vector<ReportedBundle>& bundles, std::vector<size_t>* release)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(cluster_->mu);
  // Before waiting for ClusterState::mu: the heartbeat of this incarnation arrived at `arrived`.
  void NoteArrival(const std::string& node, const std::string& incarnation, absl::Time arrived)
      ABSL_LOCKS_EXCLUDED(heard_mu_);
  // A heartbeat; false when the head does not know this live incarnation (register again).
  bool Heartbeat(const std::string& node, const std::string& incarnation, absl::Time arrived,
                 int workers, const std::vector<ReportedLease>& leases,
                 const std::vector<ReportedBundle>& bundles, int64_t epoch_seen,
                 std::vector<size_t>* release) ABSL_EXCLUSIVE_LOCKS_REQUIRED(cluster_->mu);
  // Declares dead the nodes silent for node_timeout of time the head watched (see the .cc).
  void CheckHealth(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(cluster_->mu);

  const std::map<std::string, Node, std::less<>>& nodes() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(cluster_->mu) {
    return nodes_;
  }
  const Node* Find(const std::string& node) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(cluster_->mu);
  bool IsAlive(const std::string& node) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(cluster_->mu);
  // The live agent of a node, or nullptr.
  std::shared_ptr<NodeAgentClient> ClientFor(const std::string& node) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(cluster_->mu);
  // ClientFor as a function, for plans built under ClusterState::mu.
  AgentLookup Agents() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(cluster_->mu);

  // Reads back a previous head's nodes: each is known as registered and has a whole node
  // timeout to be heard from. DataLoss naming the key when a record cannot be read.
  absl::Status Restore() ABSL_EXCLUSIVE_LOCKS_REQUIRED(cluster_->mu);

 private:
  void DeclareDead(Node& node, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(cluster_->mu);
  void MirrorLeases(Node& node, const std::vector<ReportedLease>& leases)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(cluster_->mu);
  // When the head last heard this incarnation: its last heartbeat processed, or a later one
  // that arrived and waits for ClusterState::mu.
  absl::Time LastHeard(const Node& node) const ABSL_LOCKS_EXCLUDED(heard_mu_);
  void Persist(const Node& node) const;

  NodeRegistryOptions options_;
  ClusterState* cluster_;
  NodeListener* listener_ = nullptr;
  std::map<std::string, Node, std::less<>> nodes_ ABSL_GUARDED_BY(cluster_->mu);
  absl::Time last_health_check_ ABSL_GUARDED_BY(cluster_->mu) = options_.clock->Now();

  struct HeardFrom {
    std::string incarnation;
    absl::Time at;
  };
  mutable absl::Mutex heard_mu_ ABSL_ACQUIRED_AFTER(cluster_->mu);
  absl::flat_hash_map<std::string, HeardFrom> heard_ ABSL_GUARDED_BY(heard_mu_);
};

}  // namespace tessera

// NodeRegistry: the head's nodes — registration (an agent restart replaces the node; a second
// live agent with the same node id is refused), heartbeats (mirroring the agents' leases into
// the ClusterView), health (a silent node is declared dead; silence counts only while the head
// could hear) — and their records in the StateStore (table "nodes"). What a node's death or an
// agent's bundle report means for reservations, jobs and actors is the NodeListener's business.
//
// Thread-safety: none of its own. It is a part of the ClusterController, which holds it guarded by
// its mutex (cluster_controller.h): every method runs with that mutex held. Heartbeats' arrivals
// are stamped before the controller's mutex is waited for, in HeartbeatArrivals (below, its own
// small lock), so a heartbeat queued behind a slow request still counts from its arrival.
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
#include "absl/functional/function_ref.h"
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

// What the rest of the head does about nodes. Called with the ClusterController's mutex held.
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

// When each node's latest heartbeat arrived, stamped before the heartbeat waits for the
// controller's mutex. Thread-safe (a small lock of its own, never held while waiting for another).
class HeartbeatArrivals {
 public:
  // The heartbeat of `incarnation` of `node` arrived at `arrived`.
  void Note(const std::string& node, const std::string& incarnation, absl::Time arrived)
      ABSL_LOCKS_EXCLUDED(mu_);
  // When the latest heartbeat of `incarnation` of `node` noted arrived; nullopt when none was, or
  // the latest noted came from another incarnation.
  std::optional<absl::Time> Latest(const std::string& node, const std::string& incarnation) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets the arrivals for which `current(node, incarnation)` is false.
  void KeepOnly(absl::FunctionRef<bool(const std::string&, const std::string&)> current)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct HeardFrom {
    std::string incarnation;
    absl::Time at;
  };
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, HeardFrom> heard_ ABSL_GUARDED_BY(mu_);
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

  // `cluster` and `arrivals` belong to the controller and outlive the registry.
  NodeRegistry(NodeRegistryOptions options, ClusterState* cluster, HeartbeatArrivals* arrivals)
      : options_(std::move(options)), cluster_(cluster), arrivals_(arrivals) {}
  // Required before the first call; must outlive the registry.
  void set_listener(NodeListener* listener) { listener_ = listener; }

  // Registers (or re-registers) a node with what its agent holds. AlreadyExists when another
  // live agent holds the node id; InvalidArgument when the view refuses the node. `release`
  // gets the positions of `bundles` the agent must give back.
  absl::Status Register(const wire::NodeRegistration& registration,
                        const v1::NodeDescription& description,
                        const std::vector<ReportedLease>& leases,
                        const std::vector<ReportedBundle>& bundles, std::vector<size_t>* release);
  // A heartbeat; false when the head does not know this live incarnation (register again).
  bool Heartbeat(const std::string& node, const std::string& incarnation, absl::Time arrived,
                 int workers, const std::vector<ReportedLease>& leases,
                 const std::vector<ReportedBundle>& bundles, int64_t epoch_seen,
                 std::vector<size_t>* release);
  // Declares dead the nodes silent for node_timeout of time the head watched (see the .cc).
  void CheckHealth(absl::Time now);

  const std::map<std::string, Node, std::less<>>& nodes() const { return nodes_; }
  const Node* Find(const std::string& node) const;
  bool IsAlive(const std::string& node) const;
  // The live agent of a node, or nullptr.
  std::shared_ptr<NodeAgentClient> ClientFor(const std::string& node) const;
  // ClientFor as a function, for plans built under the controller's mutex.
  AgentLookup Agents() const;

  // Reads back a previous head's nodes: each is known as registered and has a whole node
  // timeout to be heard from. DataLoss naming the key when a record cannot be read.
  absl::Status Restore();

 private:
  void DeclareDead(Node& node, const std::string& reason);
  void MirrorLeases(Node& node, const std::vector<ReportedLease>& leases);
  // When the head last heard this incarnation: its last heartbeat processed, or a later one
  // that arrived and waits for the controller's mutex.
  absl::Time LastHeard(const Node& node) const;
  void Persist(const Node& node) const;

  NodeRegistryOptions options_;
  ClusterState* cluster_;
  HeartbeatArrivals* arrivals_;
  NodeListener* listener_ = nullptr;
  std::map<std::string, Node, std::less<>> nodes_;
  absl::Time last_health_check_ = options_.clock->Now();
};

}  // namespace tessera

// NodeObjectStore: how a driver or a worker uses the object store of the node it runs on for
// large values (docs/objects.md): Put makes the primary copy there; Read hands out a pinned view
// of an object in that store, first pulling it through the local agent (NodeAgent.PullObject)
// when its primary copy is on another node; Delete drops copies when the owner lets go. An
// object whose node died is reported lost ("object <id> is lost: node <n> died (...)") rather
// than waited for.
//
// The store connection is made on first use and again after a failure, so a process started
// before its node's store (or on a node without one) simply keeps values inline.
//
// Threading: thread-safe (one mutex around the connection and the per-node clients; reads of
// the mapped bytes need no lock).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "objects/object_store_client.h"
#include "tessera/object_id.h"
#include "tessera/tessera.h"
#include "tessera/v1/head.grpc.pb.h"
#include "tessera/v1/node_agent.grpc.pb.h"
#include "tessera/v1/worker.pb.h"

namespace tessera {

struct NodeObjectStoreOptions {
  std::string socket_path;    // this node's store; "" none (values stay inline)
  std::string node_id;        // this node
  std::string agent_address;  // this node's agent (pulls go through it)
  std::string token;
  // The head, asked whether a node holding an unreachable object died; "" never asked.
  std::string head_address;
  // This host's state folder: a primary copy on another node of this host is deleted through
  // that node's socket there; "" only this node's copies are deleted.
  std::string state_dir;
  // The owner of the values this process puts (a driver's or worker's id, as the head knows it):
  // the store frees them when that owner dies. "" none (only Delete frees them).
  std::string owner_id;
  // This process is that owner: its connection to this node's store is declared as the owner's
  // life there (ObjectStoreClient::DeclareOwner), so the store frees its objects when it exits
  // or dies. A worker storing results for its driver leaves it false.
  bool declare_owner = false;
  // How long an object whose holder cannot be reached waits for the head to say whether that
  // node died (the head's node timeout is a few seconds) before failing as unreachable.
  absl::Duration lost_verdict_wait = absl::Seconds(20);
};

// This process's counters (GetObjectPathStats): a snapshot, and one more of a field.
internal::ObjectPathStats ObjectPathSnapshot();
void CountObjectPath(int64_t internal::ObjectPathStats::*field);

class NodeObjectStore {
 public:
  explicit NodeObjectStore(NodeObjectStoreOptions options);

  const std::string& node_id() const { return options_.node_id; }
  // Whether this node's store can be reached now (connects when not yet connected).
  bool Available();

  // Puts `bytes` as the primary copy (not evictable) of `id` in this node's store, owned by
  // `owner_id`. A copy left by an earlier attempt of the same task is replaced. Unavailable when
  // this node has no store; ResourceExhausted ("object store full: ...", naming the sizes) when
  // it does not fit even after spilling.
  absl::StatusOr<v1::StoredObject> Put(const ObjectId& id, std::string_view bytes);
  // The same for a value in pieces: each is copied once, straight into the store's memory.
  absl::StatusOr<v1::StoredObject> PutParts(const ObjectId& id,
                                            const std::vector<std::string_view>& parts);

  // This node's store's counters (connecting when not yet connected); Unavailable without one.
  absl::StatusOr<ObjectStoreStats> Stats();

  // A pinned view of `id`, which `where` says lies on some node: read in place on this node,
  // else pulled into this node's store first (a secondary, evictable copy).
  absl::StatusOr<internal::SerializedValue> Read(const ObjectId& id, const v1::StoredObject& where,
                                                 absl::Time deadline);

  // Deletes the copies this process can reach: this node's (primary or pulled) and, when
  // `where` is another node of this host's state folder, the primary there. NotFound is fine.
  void Delete(const ObjectId& id, const v1::StoredObject& where);

  // The "is lost" error when the head says `where`'s node died (waiting up to
  // lost_verdict_wait for its verdict after `why` made the node look unreachable); OK when the
  // node is alive or no head is known.
  absl::Status CheckLost(const ObjectId& id, const v1::StoredObject& where, const absl::Status& why,
                         absl::Time deadline);

 private:
  absl::StatusOr<ObjectStoreClient*> Local() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<internal::SerializedValue> ReadLocal(const ObjectId& id);
  absl::Status Pull(const ObjectId& id, const v1::StoredObject& where, absl::Time deadline);
  // The head's state of `node_id`; nullopt when the head does not know it.
  absl::StatusOr<std::optional<v1::NodeState>> HeadNodeState(const std::string& node_id);

  const NodeObjectStoreOptions options_;
  absl::Mutex mu_;
  std::unique_ptr<ObjectStoreClient> local_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<ObjectStoreClient>> others_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<v1::NodeAgent::Stub> agent_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<v1::HeadNodes::Stub> head_nodes_ ABSL_GUARDED_BY(mu_);  // ListNodes
};

}  // namespace tessera

// Copying objects between the stores of two nodes through their node agents. The puller asks the
// holder's agent to offer the object (NodeAgent.OfferObject: size, metadata, data port, one-time
// ticket, transfer key; both ends proved the cluster token there), creates the object in its own
// store, then receives the bytes over a raw TCP connection to the holder's data port
// (object_data_server.h) as AES-256-GCM chunks under the offer's key (object_data_cipher.h), each
// read straight into its place in the new object's memory and opened there, and seals it. Two
// copies (the holder's kernel copies the sealed chunk into the socket, this side copies it out
// into the arena) and one cipher pass on each side. A pulled copy is a secondary copy, so it is
// created evictable (docs/objects.md).
//
// Thread-safe: no state of its own; ObjectStore is thread-safe, and each pull writes only the
// range its Create reserved.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "objects/object_store.h"
#include "objects/shared_memory.h"
#include "tessera/object_id.h"
#include "tessera/v1/node_agent.grpc.pb.h"

namespace tessera {

// A node's store as its agent holds it.
struct LocalObjectStore {
  ObjectStore* store = nullptr;
  const SharedMemoryArena* arena = nullptr;
};

struct PullResult {
  uint64_t size = 0;
  bool already_here = false;
};

// The holder of a pull: its agent's stub and the host its data port is on (the host of the
// agent's address).
struct PullSource {
  v1::NodeAgent::StubInterface* stub = nullptr;
  std::string host;
};

// Copies object `id` from the agent behind `from` into `local` and seals it (the stub's channel
// proves the cluster token, rpc/channel.h); the whole copy must finish within `timeout`.
// Already sealed here: nothing is copied. On any failure nothing is left behind (the unfinished
// copy is aborted, an unused ticket dropped). Errors, each prefixed with "fetching <id>: ": the
// holder's (NotFound, Unauthenticated, ...), ResourceExhausted when this store has no room,
// Unavailable when another pull of the same object is under way or the data port cannot be
// reached, FailedPrecondition when the offer carries no transfer key, DataLoss when the stream is
// shorter or longer than the sealed object or a chunk fails authentication ("the bytes did not
// come from the holder": changed on the way, or another listener on the data port).
absl::StatusOr<PullResult> PullObject(const PullSource& from, absl::Duration timeout,
                                      const ObjectId& id, const LocalObjectStore& local);

// Pulls objects from other node agents into this node's store (PullObject above), with one
// channel per agent address, kept. Thread-safe.
class ObjectPuller {
 public:
  ObjectPuller(LocalObjectStore local, std::string token, absl::Duration timeout)
      : local_(local), token_(std::move(token)), timeout_(timeout) {}

  // InvalidArgument when `from_address` is not host:port.
  absl::StatusOr<PullResult> Pull(const ObjectId& id, const std::string& from_address);

 private:
  v1::NodeAgent::Stub& StubFor(const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);

  const LocalObjectStore local_;
  const std::string token_;
  const absl::Duration timeout_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<v1::NodeAgent::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera

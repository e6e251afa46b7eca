// Copying objects between the stores of two nodes through their node agents: the holder streams
// an object in chunks straight from its arena (FetchObject), the puller writes them into a new
// object of its own store and seals it (PullObject). A pulled copy is a secondary copy, so it is
// created evictable (docs/objects.md).
//
// Thread-safe: no state of its own; ObjectStore is thread-safe, and each pull writes only the
// range its Create reserved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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

// Under gRPC's default 4 MiB message limit, large enough that per-message costs stay small.
inline constexpr size_t kObjectChunkBytes = size_t{2} << 20;

// Streams sealed object `id` of `local` as chunks through `write` (false: the reader went away,
// Cancelled). The object stays pinned while it streams. NotFound when it is not sealed here.
absl::Status StreamObject(const LocalObjectStore& local, const ObjectId& id,
                          const std::function<bool(const v1::ObjectChunk&)>& write);

struct PullResult {
  uint64_t size = 0;
  bool already_here = false;
};

// Copies object `id` from the agent behind `from` into `local` and seals it; calls carry `token`
// and the whole copy must finish within `timeout`. Already sealed here: nothing is copied. On
// any failure nothing is left behind (the unfinished copy is aborted). Errors: the holder's
// (NotFound, Unauthenticated, ...) prefixed with "fetching <id>: ", ResourceExhausted when this
// store has no room, Unavailable when another pull of the same object is under way, DataLoss
// when the chunks do not add up to the object.
absl::StatusOr<PullResult> PullObject(v1::NodeAgent::StubInterface& from, std::string_view token,
                                      absl::Duration timeout, const ObjectId& id,
                                      const LocalObjectStore& local);

// Pulls objects from other node agents into this node's store (PullObject above), with one
// channel per agent address, kept. Thread-safe.
class ObjectPuller {
 public:
  ObjectPuller(LocalObjectStore local, std::string token, absl::Duration timeout)
      : local_(local), token_(std::move(token)), timeout_(timeout) {}

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

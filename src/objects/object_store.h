// ObjectStore: the bookkeeping of a node's shared-memory object store: which objects exist, where
// their bytes lie in the arena, who pins them, and which may be evicted. It never touches the
// memory itself (ObjectStoreServer owns the arena and serves clients over a socket); tests and
// the node agent can drive it directly.
//
// Lifetimes (docs/objects.md):
//   Create    -> an unsealed object, writable by its creator only, invisible to Get.
//   Seal      -> immutable and visible; the creator's hold ends.
//   Get       -> pins it for that client until Release (counted: two Gets need two Releases).
//   Delete    -> gone at once when unpinned, else invisible now and freed at the last Release.
//   Abort     -> an unsealed object is dropped by its creator.
//   DisconnectClient -> every pin of that client released, every object it left unsealed aborted.
// Memory: a Create that does not fit evicts sealed, unpinned objects created as evictable (least
// recently used first); primary copies (not evictable) are never evicted. An object larger than
// the whole capacity is refused without evicting anything.
//
// Threading: thread-safe; one absl::Mutex guards all state.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/strong_id.h"
#include "objects/arena_allocator.h"
#include "tessera/object_id.h"

namespace tessera {

// One connection to the store (a worker, a driver, or the agent itself).
using StoreClientId = StrongId<struct StoreClientIdTag, int64_t>;

struct ObjectStoreOptions {
  uint64_t capacity_bytes = 0;
  // Metadata travels in protocol messages; this bounds it well under the message size limit.
  uint64_t max_metadata_bytes = 64 * 1024;
  // Called after every successful Seal, outside the lock, on the sealing thread (the server uses
  // it to answer clients waiting in Get).
  std::function<void(const ObjectId&)> on_sealed;
};

struct CreateObjectOptions {
  // A secondary copy (fetched from another node) may be evicted when unpinned; a primary copy
  // (the one its owner counts references for) may not.
  bool evictable = false;
};

// Where an object's bytes lie in the arena.
struct ObjectLocation {
  uint64_t offset = 0;
  uint64_t data_size = 0;
  std::string metadata;
};

struct ObjectStoreStats {
  uint64_t capacity_bytes = 0;
  uint64_t allocated_bytes = 0;  // including alignment padding
  uint64_t pinned_bytes = 0;     // data bytes of objects pinned by a reader or being created
  uint64_t num_objects = 0;      // sealed and unsealed, not counting ones waiting to be freed
  uint64_t num_unsealed = 0;
  uint64_t num_evictable = 0;    // sealed, unpinned, evictable: what eviction could free now
  uint64_t evictions = 0;        // objects evicted since start
  uint64_t evicted_bytes = 0;
};

class ObjectStore {
 public:
  explicit ObjectStore(ObjectStoreOptions options);

  // Reserves `data_size` bytes for a new object; the creator writes them, then calls Seal.
  // AlreadyExists if the id is known (even if waiting to be freed); InvalidArgument if it can
  // never fit or the metadata is too large; ResourceExhausted if it does not fit now even after
  // eviction.
  absl::StatusOr<ObjectLocation> Create(StoreClientId client, const ObjectId& id,
                                        uint64_t data_size, std::string metadata,
                                        CreateObjectOptions options);
  // Only the creator may seal, once.
  absl::Status Seal(StoreClientId client, const ObjectId& id);
  // Only the creator may abort, and only before sealing.
  absl::Status Abort(StoreClientId client, const ObjectId& id);
  // A sealed object, pinned for `client` until Release. NotFound if absent, unsealed or deleted.
  absl::StatusOr<ObjectLocation> Get(StoreClientId client, const ObjectId& id);
  absl::Status Release(StoreClientId client, const ObjectId& id);
  // Deletes a sealed object (freed when its last pin goes). NotFound if absent or already
  // deleted; FailedPrecondition if unsealed (its creator aborts it instead).
  absl::Status Delete(const ObjectId& id);
  void DisconnectClient(StoreClientId client);

  // Sealed and not deleted.
  bool Contains(const ObjectId& id) const;
  // O(number of objects): for reports and tests, not for hot paths.
  ObjectStoreStats Stats() const;
  const ObjectStoreOptions& options() const { return options_; }

 private:
  struct Entry {
    ObjectId id;
    ObjectLocation location;
    StoreClientId creator;
    bool sealed = false;
    bool evictable = false;
    bool deleted = false;  // invisible; freed at the last Release
    int64_t total_pins = 0;
    absl::flat_hash_map<StoreClientId, int64_t> pins;
    std::list<ObjectId>::iterator lru;  // valid while in lru_
    bool in_lru = false;
  };
  struct ClientState {
    absl::flat_hash_set<ObjectId> unsealed;  // created, not sealed yet
    absl::flat_hash_set<ObjectId> pinned;    // holds at least one pin on
  };

  absl::Status MarkSealed(StoreClientId client, const ObjectId& id) ABSL_LOCKS_EXCLUDED(mu_);
  void FreeLocked(Entry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateLruLocked(Entry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UnpinLocked(Entry& entry, StoreClientId client, int64_t count)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ObjectStoreOptions options_;
  mutable absl::Mutex mu_;
  ArenaAllocator allocator_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<ObjectId, Entry> entries_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<StoreClientId, ClientState> clients_ ABSL_GUARDED_BY(mu_);
  // Eviction candidates (sealed, unpinned, evictable, not deleted), least recently used first.
  std::list<ObjectId> lru_ ABSL_GUARDED_BY(mu_);
  uint64_t evictions_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t evicted_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera

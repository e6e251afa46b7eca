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
// Memory: a Create (or a restore) that does not fit evicts sealed, unpinned objects created as
// evictable (least recently used first); then, with a spill folder, it spills sealed, unpinned
// primary copies to files there (least recently used first), freeing their arena bytes; a Get of
// a spilled object reads it back into the arena (and deletes its file). What still does not fit
// is ResourceExhausted naming the size, the capacity and what is used, as is an object larger
// than the whole capacity (refused without evicting or spilling anything).
// Owners: each object may name its owner (the id of the process that counts its references). A
// client that declares itself an owner (DeclareOwner) is that owner's life here: when the last
// connection declaring it closes, or OwnerDied names it (the head saw it die), every object it
// owns is deleted, spilled files included, and later Creates for it are refused.
//
// Threading: thread-safe; one absl::Mutex guards all state. Cost: spilling and restoring write and
// read the object's bytes to and from its file under that mutex (other requests wait).
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <string>
#include <string_view>

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
  // Spilling: the arena's memory in this process and a folder (existing, 0700) for the files of
  // spilled primary copies (each 0600, named by the object's hex id). Either empty: no spilling.
  uint8_t* memory = nullptr;
  std::string spill_dir;
  // How many dead owners are remembered (their late Creates refused); the oldest are forgotten.
  size_t max_dead_owners = 4096;
};

struct CreateObjectOptions {
  // A secondary copy (fetched from another node) may be evicted when unpinned; a primary copy
  // (the one its owner counts references for) may not.
  bool evictable = false;
  // The owner's id (a driver's or worker's id); "" none: only Delete frees it.
  std::string owner;
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
  uint64_t num_evictable = 0;  // sealed, unpinned, evictable: what eviction could free now
  uint64_t evictions = 0;      // objects evicted since start
  uint64_t evicted_bytes = 0;
  uint64_t num_spilled = 0;    // objects whose bytes lie in the spill folder now
  uint64_t spilled_bytes = 0;  // their data bytes
  uint64_t spills = 0;         // objects spilled since start
  uint64_t restores = 0;       // spilled objects read back since start
};

class ObjectStore {
 public:
  explicit ObjectStore(ObjectStoreOptions options);

  // Reserves `data_size` bytes for a new object; the creator writes them, then calls Seal.
  // AlreadyExists if the id is known (even if waiting to be freed); InvalidArgument if the
  // metadata is too large; ResourceExhausted ("object store full: ...", naming the sizes) if it
  // can never fit, or does not fit now even after eviction and spilling; FailedPrecondition if
  // its owner died.
  absl::StatusOr<ObjectLocation> Create(StoreClientId client, const ObjectId& id,
                                        uint64_t data_size, std::string metadata,
                                        CreateObjectOptions options);
  // Only the creator may seal, once.
  absl::Status Seal(StoreClientId client, const ObjectId& id);
  // Only the creator may abort, and only before sealing.
  absl::Status Abort(StoreClientId client, const ObjectId& id);
  // A sealed object, pinned for `client` until Release (a spilled one is read back first:
  // ResourceExhausted when there is no room for it, DataLoss when its file cannot be read).
  // NotFound if absent, unsealed or deleted.
  absl::StatusOr<ObjectLocation> Get(StoreClientId client, const ObjectId& id);
  absl::Status Release(StoreClientId client, const ObjectId& id);
  // Deletes a sealed object (freed when its last pin goes). NotFound if absent or already
  // deleted; FailedPrecondition if unsealed (its creator aborts it instead).
  absl::Status Delete(const ObjectId& id);
  // Also ends the owner `client` declared when no other client declares it (OwnerDied).
  void DisconnectClient(StoreClientId client);

  // `client` is (a connection of) the process `owner`; once per client. InvalidArgument if empty
  // or the client already declared another; FailedPrecondition if that owner died.
  absl::Status DeclareOwner(StoreClientId client, const std::string& owner);
  // `owner` is gone: every object it owns is deleted (freed now or at its last release; an
  // unsealed one at its seal, which then fails) and its later Creates are refused. Idempotent;
  // returns how many objects it deleted.
  int64_t OwnerDied(const std::string& owner);

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
    std::string owner;
    bool spilled = false;   // its bytes are in its spill file, not in the arena
    uint64_t last_use = 0;  // use_clock_ at its creation or latest Get
  };
  struct ClientState {
    absl::flat_hash_set<ObjectId> unsealed;  // created, not sealed yet
    absl::flat_hash_set<ObjectId> pinned;    // holds at least one pin on
    std::string owner;                       // declared, "" none
  };

  absl::Status MarkSealed(StoreClientId client, const ObjectId& id) ABSL_LOCKS_EXCLUDED(mu_);
  void FreeLocked(Entry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateLruLocked(Entry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UnpinLocked(Entry& entry, StoreClientId client, int64_t count)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An arena offset for `size` bytes, evicting and then spilling as needed; ResourceExhausted
  // naming `what` and the sizes when none.
  absl::StatusOr<uint64_t> AllocateLocked(uint64_t size, const std::string& what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes one sealed, unpinned primary to its file and frees its bytes; false when there is no
  // candidate or the write failed (`spill_error_` says why).
  bool SpillOneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RestoreLocked(Entry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string SpillPath(const ObjectId& id) const;
  int64_t OwnerDiedLocked(const std::string& owner) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DeleteLocked(Entry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ObjectStoreOptions options_;
  mutable absl::Mutex mu_;
  ArenaAllocator allocator_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<ObjectId, Entry> entries_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<StoreClientId, ClientState> clients_ ABSL_GUARDED_BY(mu_);
  // Eviction candidates (sealed, unpinned, evictable, not deleted), least recently used first.
  std::list<ObjectId> lru_ ABSL_GUARDED_BY(mu_);
  uint64_t evictions_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t evicted_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Objects by owner, and how many clients declare each owner.
  absl::flat_hash_map<std::string, absl::flat_hash_set<ObjectId>> owned_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int64_t> owner_clients_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> dead_owners_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> dead_order_ ABSL_GUARDED_BY(mu_);  // oldest first, bounds dead_owners_
  uint64_t use_clock_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t num_spilled_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t spilled_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t spills_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t restores_ ABSL_GUARDED_BY(mu_) = 0;
  std::string spill_error_ ABSL_GUARDED_BY(mu_);  // why the latest spill failed, "" none
};

}  // namespace tessera

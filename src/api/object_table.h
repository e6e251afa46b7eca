// ObjectTable: the values this process owns (task results and Puts): small ones inline, large
// ones as the stored-value envelope of object_location.h (where the value lies). An entry is
// pending until its task finishes, then holds the value or the error, set once: a second result
// for the same object is refused (and counted by the caller), never delivered.
//
// Callbacks registered with OnReady run once the entry is done (at once when it already is),
// outside the table's lock, on the thread that completed it.
//
// `on_drop` sees each done value the table lets go of (its last reference went, or a result
// arrived for an entry already released), outside the lock: the owner deletes stored copies.
//
// Threading: thread-safe (one mutex); Get and Wait block the calling thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tessera/object_id.h"

namespace tessera::api {

class ObjectTable {
 public:
  // The outcome handed to OnReady callbacks: the value, or why there is none.
  using ReadyCallback = std::function<void(const absl::StatusOr<std::string>& value)>;
  using DropCallback = std::function<void(const ObjectId& id, const std::string& value)>;

  ObjectTable() = default;
  explicit ObjectTable(DropCallback on_drop) : on_drop_(std::move(on_drop)) {}

  // A pending entry (a task's return).
  void AddPending(const ObjectId& id);
  // A done entry (a Put).
  void AddValue(const ObjectId& id, std::string value);

  // Completes a pending entry. False (nothing changed) when it is already done; true when it
  // was set, or when the entry is gone (every ref dropped: the value is not wanted).
  bool Complete(const ObjectId& id, absl::StatusOr<std::string> value);

  // Drops an entry (the last local reference went), unless it is kept.
  void Release(const ObjectId& id);

  // Keeps an entry past the release of its local references, until the table ends: its ref was
  // written inside a value (an argument, a Put), so other processes may hold it, and borrowers
  // are not tracked. False for an id the table does not hold.
  bool Keep(const ObjectId& id);

  // The value, waiting until `deadline`. NotFound for an id this table does not hold,
  // DeadlineExceeded at the deadline.
  absl::StatusOr<std::string> Get(const ObjectId& id, absl::Time deadline);

  // Whether each id is done (an unknown id counts as done: Get answers it at once), after
  // waiting until `num` are or `deadline` passes; with `stop_at_failure`, also as soon as one
  // of them is done with an error (a get of many fails at its first failure).
  std::vector<bool> Wait(const std::vector<ObjectId>& ids, int num, absl::Time deadline,
                         bool stop_at_failure = false);

  // The error `id` is done with; OK while it is pending, done with a value, or unknown.
  absl::Status Failure(const ObjectId& id) const;

  // Runs `callback` when `id` is done (NotFound at once for an unknown id).
  void OnReady(const ObjectId& id, ReadyCallback callback);

  // Fails every pending entry with `status` (shutdown).
  void FailAllPending(const absl::Status& status);

  size_t size() const;

 private:
  struct Entry {
    bool done = false;
    bool kept = false;  // Keep: Release leaves it
    absl::StatusOr<std::string> value = std::string();
    std::vector<ReadyCallback> callbacks;
  };
  bool IsDone(const ObjectId& id) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool IsFailed(const ObjectId& id) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const DropCallback on_drop_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<ObjectId, Entry> entries_ ABSL_GUARDED_BY(mu_);
  int waiters_ ABSL_GUARDED_BY(mu_) = 0;
  absl::CondVar changed_;
};

}  // namespace tessera::api

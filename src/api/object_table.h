// ObjectTable: the values this process owns (task results and Puts): small ones inline, large
// ones as the stored-value envelope of object_location.h (where the value lies). An entry is
// pending until its task finishes, then holds the value or the error, set once: a second result
// for the same object is refused (and counted by the caller), never delivered.
//
// Callbacks registered with OnReady run once the entry is done (at once when it already is),
// outside the table's lock, on the thread that completed it.
//
// An entry lives while this process holds references to it (AddLocal / Release) or another
// process is counted as holding some (UpdateBorrows: borrowers, docs/objects.md). A done value
// with refs inside keeps references to them (its holds: what `contained` makes of the value, run
// outside the lock), let go with the entry.
//
// `on_drop` sees each done value the table lets go of (its last reference went, or a result
// arrived for an entry already released), outside the lock: the owner deletes stored copies.
//
// A Get, or a Wait for one object, first watches the table for a short while before it sleeps
// (base/adaptive_spin.h): a result that comes back over a local round trip is then taken without
// a wake. Waits for many objects sleep at once.
//
// Threading: thread-safe (one mutex); Get and Wait block the calling thread only.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/adaptive_spin.h"
#include "tessera/object_id.h"
#include "tessera/object_ref.h"

namespace tessera::api {

class ObjectTable {
 public:
  // The outcome handed to OnReady callbacks: the value, or why there is none.
  using ReadyCallback = std::function<void(const absl::StatusOr<std::string>& value)>;
  using DropCallback = std::function<void(const ObjectId& id, const std::string& value)>;
  // The references a value keeps to the objects whose refs are written inside it.
  using Holds = std::vector<std::shared_ptr<internal::LocalReference>>;
  using ContainedHolds = std::function<Holds(const std::string& value)>;

  // How long a waiter for one object watches before it sleeps: a little more than a sync
  // round trip to a worker on this host takes.
  static constexpr absl::Duration kSpinLimit = absl::Microseconds(200);

  ObjectTable() = default;
  explicit ObjectTable(DropCallback on_drop, ContainedHolds contained = nullptr)
      : on_drop_(std::move(on_drop)), contained_(std::move(contained)) {}

  // A pending entry (a task's return).
  void AddPending(const ObjectId& id);
  // A done entry (a Put).
  void AddValue(const ObjectId& id, std::string value);

  // Completes a pending entry. False (nothing changed) when it is already done; true when it
  // was set, or when the entry is gone (every ref dropped: the value is not wanted). The holds
  // of a value not taken are let go before it returns.
  bool Complete(const ObjectId& id, absl::StatusOr<std::string> value);

  // Gives back what a value that no entry takes lent this process (a duplicate result or
  // generator item): its holds are made and let go at once.
  void Discard(const std::string& value) const { HoldsFor(value); }

  // One more local reference to `id` (false, nothing changed: the table no longer holds it).
  bool AddLocal(const ObjectId& id);
  // One local reference fewer: the entry goes once none is left and no borrower holds one. An
  // entry never given a local reference goes at its first Release.
  void Release(const ObjectId& id);

  // `borrower`'s count of references to `id` changes by `delta` (Owner.UpdateBorrows); the
  // entry goes once no count and no local reference is left. False for an id the table does not
  // hold.
  bool UpdateBorrows(const ObjectId& id, const std::string& borrower, int64_t delta);
  // The processes counted as holding references to `id`, with their counts (tests, debugging).
  std::vector<std::pair<std::string, int64_t>> Borrowers(const ObjectId& id) const;
  // Every borrower counted for any object.
  std::vector<std::string> AllBorrowers() const;
  // How many entries some borrower holds.
  size_t BorrowedCount() const;
  // Forgets every count of `borrower` (its process is gone); the entries nothing else holds go.
  void DropBorrower(const std::string& borrower);

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
    int64_t local = 0;                                    // this process's references
    absl::flat_hash_map<std::string, int64_t> borrowers;  // other processes' counts
    absl::StatusOr<std::string> value = std::string();
    std::vector<ReadyCallback> callbacks;
    Holds holds;  // the references its value keeps (refs written inside it)
  };
  // What erasing an entry leaves to do outside the lock.
  struct Erased {
    ObjectId id;
    std::optional<std::string> dropped;  // a done value, for on_drop_
    std::vector<ReadyCallback> callbacks;
    Holds holds;
  };
  bool IsDone(const ObjectId& id) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool IsFailed(const ObjectId& id) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Watches for `id` to be done for at most spin_'s limit (none when `deadline` comes first).
  void SpinUntilDone(const ObjectId& id, absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  // Erases `it` when nothing references it any more.
  std::optional<Erased> EraseIfUnreferenced(absl::flat_hash_map<ObjectId, Entry>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Finish(std::optional<Erased> erased);
  Holds HoldsFor(const absl::StatusOr<std::string>& value) const;

  const DropCallback on_drop_;
  const ContainedHolds contained_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<ObjectId, Entry> entries_ ABSL_GUARDED_BY(mu_);
  int waiters_ ABSL_GUARDED_BY(mu_) = 0;
  size_t borrowed_ ABSL_GUARDED_BY(mu_) = 0;  // entries with a borrower
  absl::CondVar changed_;
  std::atomic<uint64_t> completions_{0};  // entries done so far: what a spinning waiter watches
  AdaptiveSpin spin_{kSpinLimit};
};

}  // namespace tessera::api

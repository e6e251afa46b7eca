// ReferenceCounter: how a process knows when an object can be freed. The owner of an object (the
// process that created it by Put or by submitting the task that returns it) counts every
// reference to it; a process that received a reference from elsewhere (a borrower) counts its own
// and tells the owner when it has none left. When every count of an object reaches zero the
// callback fires, exactly once, and the object is forgotten:
//   - owned: free its value (drop the inline value, delete it from the node's store);
//   - borrowed: tell the owner this process no longer borrows it.
//
// Counts per object (docs/objects.md, "Reference counting"):
//   local       ObjectRef copies in this process (AddLocalReference / RemoveLocalReference);
//   submitted   tasks this process submitted that take it as an argument, until they finish;
//   borrowers   other processes that received it in an argument or a result and still hold it
//               (owner side; each reports when it drops the ref, or dies);
//   contained   objects still alive whose serialized value contains a reference to it (the
//               outer object keeps the inner ones alive).
// An object starts with one local reference (the ObjectRef about to be handed out), so it is not
// freed before anyone could hold it. A count on an unknown (or already freed) id is NotFound and
// changes nothing; removing more than was added is FailedPrecondition and changes nothing.
//
// Threading: thread-safe (one absl::Mutex). The callback runs on the calling thread after the
// lock is released, so it may call back into the counter.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "base/strong_id.h"
#include "tessera/object_id.h"
#include "tessera/object_ref_data.h"

namespace tessera {

// A process that borrows a reference: its worker id (as in OwnerAddress::worker_id).
using BorrowerId = StrongId<struct BorrowerIdTag, std::string>;

struct ReferenceCounts {
  bool owned = false;
  int64_t local = 0;
  int64_t submitted = 0;
  int64_t borrowers = 0;
  int64_t contained = 0;
};

// What the callback is told about an object whose counts all reached zero.
struct ZeroReferences {
  ObjectId id;
  bool owned = false;
  OwnerAddress owner;  // for a borrowed object: whom to tell
};

struct OwnedObjectOptions {
  // References inside the object's value: kept alive while this object lives. Each must be
  // known to this counter (owned or borrowed). Unknown ahead of time for a task's return value:
  // use AddContainedReferences when the value arrives.
  std::vector<ObjectId> contained;
};

class ReferenceCounter {
 public:
  using ZeroCallback = std::function<void(const ZeroReferences&)>;
  explicit ReferenceCounter(ZeroCallback on_zero);

  // Registers an object this process owns, with one local reference. AlreadyExists if known.
  absl::Status AddOwnedObject(const ObjectId& id, OwnedObjectOptions options);
  // Registers a reference received from `owner`, with one local reference; a second receipt of a
  // known id just adds a local reference.
  absl::Status AddBorrowedObject(const ObjectId& id, const OwnerAddress& owner);
  // `outer`'s value turned out to contain `inner` references; they live while `outer` does.
  absl::Status AddContainedReferences(const ObjectId& outer, absl::Span<const ObjectId> inner);

  absl::Status AddLocalReference(const ObjectId& id);
  absl::Status RemoveLocalReference(const ObjectId& id);
  // A submitted task takes these as arguments (repeats count twice) ...
  absl::Status AddSubmittedTaskReferences(absl::Span<const ObjectId> ids);
  // ... and finished (or failed for good).
  absl::Status RemoveSubmittedTaskReferences(absl::Span<const ObjectId> ids);
  // Owner side: `borrower` holds the ref (idempotent) / dropped it.
  absl::Status AddBorrower(const ObjectId& id, const BorrowerId& borrower);
  absl::Status RemoveBorrower(const ObjectId& id, const BorrowerId& borrower);
  // A borrower process died: it holds nothing any more.
  void RemoveBorrowerEverywhere(const BorrowerId& borrower);

  bool Has(const ObjectId& id) const;
  absl::StatusOr<ReferenceCounts> Counts(const ObjectId& id) const;
  size_t size() const;

 private:
  struct Entry {
    bool owned = false;
    OwnerAddress owner;
    int64_t local = 0;
    int64_t submitted = 0;
    int64_t contained = 0;
    absl::flat_hash_set<BorrowerId> borrowers;
    std::vector<ObjectId> inner;  // references inside this object's value
  };
  using Freed = std::vector<ZeroReferences>;

  absl::Status NotKnown(const ObjectId& id) const;
  // Frees `id` if all its counts are zero, cascading into its inner references.
  void MaybeFreeLocked(const ObjectId& id, Freed& freed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Notify(const Freed& freed);

  const ZeroCallback on_zero_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<ObjectId, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera

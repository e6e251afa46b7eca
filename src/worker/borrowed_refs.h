// Borrowed references: this process's side of borrower reference counting (docs/objects.md).
//
// An object lives while its owner holds references to it or any other process (a borrower) is
// counted as holding one. A process counts itself at an object's owner when it first holds a
// reference to another process's object (Borrow: the first copy adds one, the last removes it),
// and a process hands references on by counting the receiver first (Lend: a worker counts its
// caller for the refs inside its result before it replies; a put counts its own process for the
// refs inside the stored value). Counts for this process's own objects are applied to its own
// table at once (SetLocalOwner); those for other owners go out in order on one sender thread,
// each batch's additions acknowledged before its removals are sent, so that no owner sees a
// reference let go before the one handed on from it was counted. FlushBorrows waits for the
// additions queued so far: a worker calls it before it replies to a task, so the references its
// task borrowed from the arguments are counted before the caller lets go of them.
//
// Threading: thread-safe. Owners that cannot be reached are skipped (their objects are lost).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/object_ref.h"
#include "tessera/object_ref_data.h"

namespace tessera::worker {

// Applies one count change for an object of this process's own table.
using LocalBorrowChange =
    std::function<void(const ObjectId& id, const std::string& borrower, int64_t delta)>;

// This process's Owner address, and how its own objects' counts change (the runtime that owns
// them, from its creation); an empty address forgets them (its shutdown).
void SetLocalOwner(const std::string& address, LocalBorrowChange change);
// The cluster token the changes are sent with (the worker's, or the runtime's of the latest
// Init: a process may reach one cluster after another).
void SetBorrowToken(const std::string& token);
// This process's id as a borrower of what it holds from now: the address of a gRPC server in it
// (a worker's Worker service, a driver's Owner service), so that owners can tell when it is gone
// (BorrowerWatch). Until set, a random id no owner can probe. References already held keep the
// id they were counted under.
void SetBorrowerId(const std::string& id);

// A reference to `ref`, another process's object, held here: one per object per process is
// counted at its owner while any copy of the returned reference lives.
std::shared_ptr<internal::LocalReference> Borrow(const ObjectRefData& ref);

// Counts `borrower` as holding one more reference to each of `refs` (a value with these refs
// goes to it), at each ref's owner.
void Lend(const std::vector<ObjectRefData>& refs, const std::string& borrower);
// Undoes Lend (the value did not go to `borrower` after all).
void Unlend(const std::vector<ObjectRefData>& refs, const std::string& borrower);
// The reference `borrower` holds through Lend for `ref`: its count goes when this does.
std::shared_ptr<internal::LocalReference> LentReference(const ObjectRefData& ref,
                                                        const std::string& borrower);

// Waits until every addition queued so far has been answered by its owner (or its owner found
// unreachable; one that answers too slowly is asked again a few times, and an addition it may
// have taken twice only keeps the object longer).
void FlushBorrows();

}  // namespace tessera::worker

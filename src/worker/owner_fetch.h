// Reading an object from the process that owns it (its Owner service): what a worker does for
// a ref it received, and a driver for a ref another process made (a task's nested put, an
// actor's result).
#pragma once

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "objects/object_node_store.h"
#include "tessera/object_ref_data.h"
#include "tessera/tessera.h"
#include "tessera/v1/worker.grpc.pb.h"

namespace tessera::worker {

// The Owner service of the process at `address`: one stub per address and token (cluster) for
// the whole process, made on first use (channels, and their TLS handshakes, are not made again
// per call). Kept until the process ends. Thread-safe.
v1::Owner::Stub& OwnerStubFor(const std::string& address, const std::string& token);

// A failed object's status as Owner.GetObject answers it (ObjectFailure), and back: code,
// message and every payload kept.
v1::ObjectFailure ObjectFailureOf(const absl::Status& status);
absl::Status StatusOfObjectFailure(const v1::ObjectFailure& failure);

// The value of `ref` from `owner` (the Owner service of the process that owns it), waiting up to
// `timeout` for it to be made: inline, or read through `store` (this process's node store,
// nullptr: none) after the owner said where it lies, pulled to this node first when it lies
// elsewhere. A holder that cannot be reached is asked about once more, and the owner then says
// whether the object is lost. A failed object is its owner's failure status. When the owner
// itself cannot be reached (it has exited), *owner_unreachable (if given) is set.
absl::StatusOr<internal::SerializedValue> ReadFromOwner(v1::Owner::Stub& owner,
                                                        const ObjectRefData& ref,
                                                        NodeObjectStore* store,
                                                        absl::Duration timeout,
                                                        bool* owner_unreachable = nullptr);

// Whether `ref` is done at `owner` (GetObjectRequest.peek), waiting up to `wait` there: true
// once it is, or when the owner cannot say (gone, or no longer holding it: a read then says
// why); false while it is being made.
bool IsDoneAtOwner(v1::Owner::Stub& owner, const ObjectRefData& ref, absl::Duration wait);

}  // namespace tessera::worker

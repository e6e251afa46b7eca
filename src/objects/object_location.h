// Where a large value lies, as it travels through paths built for inline values: the owner's
// object table, TaskResult.value and the submitter between them hold a StoredObject (worker.proto)
// in a small envelope instead of the value's bytes. The envelope starts with 0xc1, a byte msgpack
// never uses, so no serialized value is ever taken for one.
//
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tessera/object_ref_data.h"
#include "tessera/v1/worker.pb.h"

namespace tessera {

// Values this large or larger go into the node's object store instead of traveling inline
// (docs/objects.md): below it, one more copy costs less than a store round trip and a pull.
inline constexpr uint64_t kInlineValueLimitBytes = 100 * 1024;

std::string EncodeStoredEnvelope(const v1::StoredObject& where);
// The location when `bytes` is an envelope; nullopt for a value (or anything else).
std::optional<v1::StoredObject> DecodeStoredEnvelope(std::string_view bytes);
bool IsStoredEnvelope(std::string_view bytes);

// A ref as the protos carry it, and back.
void RefToProto(const ObjectRefData& ref, v1::ObjectRefProto* proto);
absl::StatusOr<ObjectRefData> RefFromProto(const v1::ObjectRefProto& proto);

// The refs an owner-table value holds (borrowing, docs/objects.md): a stored value's envelope's
// contained_refs, or those written inside an inline value (in order, repeats kept); none for a
// value that is malformed or holds none.
std::vector<ObjectRefData> RefsInsideValue(std::string_view value);

// TaskError.kind of a task whose large result its node's store refused: "object_store_full"
// (ResourceExhausted: it does not fit even after spilling; the owner raises ObjectStoreFullError)
// or "object_store" (any other refusal). Neither is retried: the next run would make the same
// result.
inline constexpr std::string_view kTaskErrorStoreFull = "object_store_full";
inline constexpr std::string_view kTaskErrorStore = "object_store";
// The error a result gets when the store refused it with `why`.
v1::TaskError ResultNotStoredError(const absl::Status& why);

}  // namespace tessera

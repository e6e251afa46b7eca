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

#include "absl/status/status.h"

#include "tessera/v1/worker.pb.h"

namespace tessera {

// Values this large or larger go into the node's object store instead of traveling inline
// (docs/objects.md): below it, one more copy costs less than a store round trip and a pull.
inline constexpr uint64_t kInlineValueLimitBytes = 100 * 1024;

std::string EncodeStoredEnvelope(const v1::StoredObject& where);
// The location when `bytes` is an envelope; nullopt for a value (or anything else).
std::optional<v1::StoredObject> DecodeStoredEnvelope(std::string_view bytes);
bool IsStoredEnvelope(std::string_view bytes);

// TaskError.kind of a task whose large result its node's store refused: "object_store_full"
// (ResourceExhausted: it does not fit even after spilling; the owner raises ObjectStoreFullError)
// or "object_store" (any other refusal). Neither is retried: the next run would make the same
// result.
inline constexpr std::string_view kTaskErrorStoreFull = "object_store_full";
inline constexpr std::string_view kTaskErrorStore = "object_store";
// The error a result gets when the store refused it with `why`.
v1::TaskError ResultNotStoredError(const absl::Status& why);

}  // namespace tessera

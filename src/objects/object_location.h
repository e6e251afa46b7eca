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

#include "tessera/v1/worker.pb.h"

namespace tessera {

// Values this large or larger go into the node's object store instead of traveling inline
// (docs/objects.md): below it, one more copy costs less than a store round trip and a pull.
inline constexpr uint64_t kInlineValueLimitBytes = 100 * 1024;

std::string EncodeStoredEnvelope(const v1::StoredObject& where);
// The location when `bytes` is an envelope; nullopt for a value (or anything else).
std::optional<v1::StoredObject> DecodeStoredEnvelope(std::string_view bytes);
bool IsStoredEnvelope(std::string_view bytes);

}  // namespace tessera

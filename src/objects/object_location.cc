#include "objects/object_location.h"

namespace tessera {
namespace {

// 0xc1 is "never used" in the msgpack format; the tag tells this envelope from any other use.
constexpr std::string_view kEnvelopeTag("\xc1TSTORED1", 9);

}  // namespace

std::string EncodeStoredEnvelope(const v1::StoredObject& where) {
  std::string out(kEnvelopeTag);
  out += where.SerializeAsString();
  return out;
}

bool IsStoredEnvelope(std::string_view bytes) {
  return bytes.size() >= kEnvelopeTag.size() &&
         bytes.substr(0, kEnvelopeTag.size()) == kEnvelopeTag;
}

std::optional<v1::StoredObject> DecodeStoredEnvelope(std::string_view bytes) {
  if (!IsStoredEnvelope(bytes)) return std::nullopt;
  bytes.remove_prefix(kEnvelopeTag.size());
  v1::StoredObject where;
  if (!where.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return std::nullopt;
  if (where.node_id().empty()) return std::nullopt;
  return where;
}

v1::TaskError ResultNotStoredError(const absl::Status& why) {
  v1::TaskError error;
  const bool full = why.code() == absl::StatusCode::kResourceExhausted;
  error.set_kind(std::string(full ? kTaskErrorStoreFull : kTaskErrorStore));
  error.set_type(full ? "ObjectStoreFullError" : "ObjectStoreError");
  error.set_message(std::string(why.message()));
  return error;
}

}  // namespace tessera

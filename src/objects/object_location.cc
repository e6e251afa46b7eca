#include "objects/object_location.h"

#include "tessera/serialization.h"

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

void RefToProto(const ObjectRefData& ref, v1::ObjectRefProto* proto) {
  proto->set_object_id(ref.id.Binary());
  proto->set_owner_node_id(ref.owner.node_id);
  proto->set_owner_address(ref.owner.address);
  proto->set_owner_worker_id(ref.owner.worker_id);
}

absl::StatusOr<ObjectRefData> RefFromProto(const v1::ObjectRefProto& proto) {
  auto id = ObjectId::FromBinary(proto.object_id());
  if (!id.ok()) return id.status();
  return ObjectRefData{
      *id, OwnerAddress{proto.owner_node_id(), proto.owner_address(), proto.owner_worker_id()}};
}

std::vector<ObjectRefData> RefsInsideValue(std::string_view value) {
  std::vector<ObjectRefData> refs;
  if (std::optional<v1::StoredObject> where = DecodeStoredEnvelope(value); where.has_value()) {
    for (const v1::ObjectRefProto& proto : where->contained_refs()) {
      if (auto ref = RefFromProto(proto); ref.ok()) refs.push_back(*std::move(ref));
    }
    return refs;
  }
  if (!MayHoldObjectRefs(value)) return refs;
  auto found = FindObjectRefs(value);
  if (found.ok()) refs = *std::move(found);
  return refs;
}

}  // namespace tessera

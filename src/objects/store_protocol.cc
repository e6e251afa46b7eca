#include "objects/store_protocol.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

class Writer {
 public:
  explicit Writer(StoreMessageType type) {
    out_.push_back(static_cast<char>(kStoreProtocolVersion));
    out_.push_back(static_cast<char>(type));
  }
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void U64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void Bytes(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    out_.append(s.data(), s.size());
  }
  void Id(const ObjectId& id) { out_.append(id.Binary()); }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  Reader(std::string_view in, std::string_view what) : in_(in), what_(what) {}

  bool U8(uint8_t& v) {
    if (!Need(1, "a byte")) return false;
    v = static_cast<uint8_t>(in_[0]);
    in_.remove_prefix(1);
    return true;
  }
  bool U32(uint32_t& v) {
    if (!Need(4, "a 4-byte integer")) return false;
    v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<uint8_t>(in_[i])} << (8 * i);
    in_.remove_prefix(4);
    return true;
  }
  bool U64(uint64_t& v) {
    if (!Need(8, "an 8-byte integer")) return false;
    v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<uint8_t>(in_[i])} << (8 * i);
    in_.remove_prefix(8);
    return true;
  }
  bool Bool(bool& v) {
    uint8_t b = 0;
    if (!U8(b)) return false;
    if (b > 1) return Fail(absl::StrCat("a boolean byte is ", b, ", not 0 or 1"));
    v = b == 1;
    return true;
  }
  bool Bytes(std::string& v) {
    uint32_t n = 0;
    if (!U32(n)) return false;
    if (!Need(n, "a byte string")) return false;
    v.assign(in_.data(), n);
    in_.remove_prefix(n);
    return true;
  }
  bool Id(ObjectId& id) {
    if (!Need(ObjectId::kSize, "an object id")) return false;
    id = *ObjectId::FromBinary(in_.substr(0, ObjectId::kSize));
    in_.remove_prefix(ObjectId::kSize);
    return true;
  }
  // After the last field: anything left is an error.
  absl::Status Finish() {
    if (!error_.empty()) return absl::InvalidArgumentError(error_);
    if (!in_.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(ToAbslView(what_), " has ", in_.size(), " unexpected trailing bytes"));
    }
    return absl::OkStatus();
  }

 private:
  static absl::string_view ToAbslView(std::string_view s) { return {s.data(), s.size()}; }
  bool Need(size_t n, std::string_view field) {
    if (!error_.empty()) return false;
    if (in_.size() < n) {
      return Fail(absl::StrCat(ToAbslView(what_), " is truncated: ", ToAbslView(field), " needs ",
                               n, " bytes, ", in_.size(), " left"));
    }
    return true;
  }
  bool Fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }

  std::string_view in_;
  std::string_view what_;
  std::string error_;
};

bool HasId(StoreMessageType type) {
  switch (type) {
    case StoreMessageType::kCreate:
    case StoreMessageType::kSeal:
    case StoreMessageType::kAbort:
    case StoreMessageType::kGet:
    case StoreMessageType::kRelease:
    case StoreMessageType::kDelete:
    case StoreMessageType::kContains: return true;
    default: return false;
  }
}

bool IsRequestType(uint8_t t) {
  return t >= static_cast<uint8_t>(StoreMessageType::kHello) &&
         t <= static_cast<uint8_t>(StoreMessageType::kOwner);
}

absl::Status CheckVersionAndType(std::string_view body, std::string_view what) {
  if (body.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(absl::string_view(what.data(), what.size()),
                                                   " of ", body.size(),
                                                   " bytes is too short for a version and a type"));
  }
  const uint8_t version = static_cast<uint8_t>(body[0]);
  if (version != kStoreProtocolVersion) {
    return absl::InvalidArgumentError(absl::StrCat("object store protocol version ", version,
                                                   " is not supported (this side speaks ",
                                                   kStoreProtocolVersion, ")"));
  }
  return absl::OkStatus();
}

// Status codes travel as their number; anything outside absl's range is refused.
bool ValidCode(uint32_t code) {
  return code <= static_cast<uint32_t>(absl::StatusCode::kUnauthenticated);
}

}  // namespace

std::string_view StoreMessageTypeName(StoreMessageType type) {
  switch (type) {
    case StoreMessageType::kHello: return "Hello";
    case StoreMessageType::kCreate: return "Create";
    case StoreMessageType::kSeal: return "Seal";
    case StoreMessageType::kAbort: return "Abort";
    case StoreMessageType::kGet: return "Get";
    case StoreMessageType::kRelease: return "Release";
    case StoreMessageType::kDelete: return "Delete";
    case StoreMessageType::kContains: return "Contains";
    case StoreMessageType::kStats: return "Stats";
    case StoreMessageType::kOwner: return "Owner";
    case StoreMessageType::kReply: return "Reply";
  }
  return "unknown";
}

std::string EncodeStoreRequest(const StoreRequest& request) {
  Writer w(request.type);
  if (HasId(request.type)) w.Id(request.id);
  if (request.type == StoreMessageType::kCreate) {
    w.U64(request.data_size);
    w.Bytes(request.metadata);
    w.U8(request.evictable ? 1 : 0);
  }
  if (request.type == StoreMessageType::kCreate || request.type == StoreMessageType::kOwner) {
    w.Bytes(request.owner);
  }
  if (request.type == StoreMessageType::kGet) w.U32(request.wait_ms);
  return w.Take();
}

absl::StatusOr<StoreRequest> ParseStoreRequest(std::string_view body) {
  if (absl::Status s = CheckVersionAndType(body, "object store request"); !s.ok()) return s;
  const uint8_t type = static_cast<uint8_t>(body[1]);
  if (!IsRequestType(type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("object store request has unknown message type ", type));
  }
  StoreRequest request;
  request.type = static_cast<StoreMessageType>(type);
  const std::string what =
      absl::StrCat("object store ",
                   absl::string_view(StoreMessageTypeName(request.type).data(),
                                     StoreMessageTypeName(request.type).size()),
                   " request");
  Reader r(body.substr(2), what);
  if (HasId(request.type)) r.Id(request.id);
  if (request.type == StoreMessageType::kCreate) {
    r.U64(request.data_size);
    r.Bytes(request.metadata);
    r.Bool(request.evictable);
  }
  if (request.type == StoreMessageType::kCreate || request.type == StoreMessageType::kOwner) {
    r.Bytes(request.owner);
  }
  if (request.type == StoreMessageType::kGet) r.U32(request.wait_ms);
  if (absl::Status s = r.Finish(); !s.ok()) return s;
  return request;
}

std::string EncodeStoreReply(const StoreReply& reply) {
  Writer w(StoreMessageType::kReply);
  w.U32(static_cast<uint32_t>(reply.status.code()));
  w.Bytes(std::string_view(reply.status.message().data(), reply.status.message().size()));
  w.U64(reply.location.offset);
  w.U64(reply.location.data_size);
  w.Bytes(reply.location.metadata);
  w.U64(reply.arena_size);
  w.U8(reply.contains ? 1 : 0);
  const ObjectStoreStats& s = reply.stats;
  for (uint64_t v : {s.capacity_bytes, s.allocated_bytes, s.pinned_bytes, s.num_objects,
                     s.num_unsealed, s.num_evictable, s.evictions, s.evicted_bytes, s.num_spilled,
                     s.spilled_bytes, s.spills, s.restores}) {
    w.U64(v);
  }
  return w.Take();
}

absl::StatusOr<StoreReply> ParseStoreReply(std::string_view body) {
  if (absl::Status s = CheckVersionAndType(body, "object store reply"); !s.ok()) return s;
  if (static_cast<uint8_t>(body[1]) != static_cast<uint8_t>(StoreMessageType::kReply)) {
    return absl::InvalidArgumentError(absl::StrCat("object store reply has message type ",
                                                   static_cast<uint8_t>(body[1]), ", expected ",
                                                   static_cast<int>(StoreMessageType::kReply)));
  }
  Reader r(body.substr(2), "object store reply");
  StoreReply reply;
  uint32_t code = 0;
  std::string message;
  r.U32(code);
  r.Bytes(message);
  r.U64(reply.location.offset);
  r.U64(reply.location.data_size);
  r.Bytes(reply.location.metadata);
  r.U64(reply.arena_size);
  r.Bool(reply.contains);
  ObjectStoreStats& s = reply.stats;
  for (uint64_t* v : {&s.capacity_bytes, &s.allocated_bytes, &s.pinned_bytes, &s.num_objects,
                      &s.num_unsealed, &s.num_evictable, &s.evictions, &s.evicted_bytes,
                      &s.num_spilled, &s.spilled_bytes, &s.spills, &s.restores}) {
    r.U64(*v);
  }
  if (absl::Status st = r.Finish(); !st.ok()) return st;
  if (!ValidCode(code)) {
    return absl::InvalidArgumentError(absl::StrCat("object store reply has status code ", code,
                                                   ", which is not a canonical code"));
  }
  reply.status = absl::Status(static_cast<absl::StatusCode>(code), message);
  return reply;
}

std::string Frame(std::string_view body) {
  std::string out;
  out.reserve(kStoreFrameHeaderBytes + body.size());
  const uint32_t n = static_cast<uint32_t>(body.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out.append(body.data(), body.size());
  return out;
}

absl::StatusOr<uint32_t> ParseFrameHeader(std::string_view header) {
  if (header.size() != kStoreFrameHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("object store frame header must be 4 bytes, got ", header.size()));
  }
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= uint32_t{static_cast<uint8_t>(header[i])} << (8 * i);
  if (n < 2 || n > kMaxStoreMessageBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("object store message length ", n, " is outside 2..", kMaxStoreMessageBytes));
  }
  return n;
}

}  // namespace tessera

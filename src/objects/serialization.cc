// Non-template parts of include/tessera/serialization.h: bounded unpacking, error messages, and
// the object-reference ext payload.
#include "tessera/serialization.h"

#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/string_util.h"

namespace tessera {
namespace serialization_internal {
namespace {

// Deep nesting is legal msgpack but no argument type needs it; a bound keeps hostile input cheap.
constexpr size_t kMaxDepth = 128;

std::string Describe(const msgpack::object& obj) {
  switch (obj.type) {
    case msgpack::type::NIL: return "nil";
    case msgpack::type::BOOLEAN: return "bool";
    case msgpack::type::POSITIVE_INTEGER: return absl::StrCat("integer ", obj.via.u64);
    case msgpack::type::NEGATIVE_INTEGER: return absl::StrCat("integer ", obj.via.i64);
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return "float";
    case msgpack::type::STR: return absl::StrCat("string of ", obj.via.str.size, " bytes");
    case msgpack::type::BIN: return absl::StrCat("binary of ", obj.via.bin.size, " bytes");
    case msgpack::type::ARRAY: return absl::StrCat("array of ", obj.via.array.size);
    case msgpack::type::MAP: return absl::StrCat("map of ", obj.via.map.size);
    case msgpack::type::EXT:
      return obj.via.ext.type() == kObjectRefExtType
                 ? std::string("ObjectRef")
                 : absl::StrCat("ext type ", static_cast<int>(obj.via.ext.type()));
  }
  return "unknown value";
}

}  // namespace

std::string CompilerTypeName(std::string_view pretty) {
  // GCC: "... PrettyName() [with T = foo::Bar; ...]"; Clang: "... PrettyName() [T = foo::Bar]".
  const size_t start = pretty.find("T = ");
  if (start == std::string_view::npos) return std::string(pretty);
  std::string_view rest = pretty.substr(start + 4);
  size_t end = rest.find(';');
  if (end == std::string_view::npos) end = rest.rfind(']');
  return std::string(rest.substr(0, end));
}

absl::Status Unpack(std::string_view bytes, std::string_view expected,
                    msgpack::object_handle& out) {
  auto fail = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot deserialize ", ToAbsl(expected), ": ", ToAbsl(why)));
  };
  if (bytes.empty()) return fail("no data");
  // Every array element and every string byte needs at least one input byte (a map entry two),
  // so these limits refuse only lengths the input cannot hold, before anything is allocated.
  const size_t n = bytes.size();
  const msgpack::unpack_limit limit(/*array=*/n, /*map=*/n / 2, /*str=*/n, /*bin=*/n, /*ext=*/n,
                                    /*depth=*/kMaxDepth);
  size_t offset = 0;
  try {
    out = msgpack::unpack(bytes.data(), n, offset, nullptr, nullptr, limit);
  } catch (const msgpack::insufficient_bytes&) {
    return fail(absl::StrCat("truncated data (", n, " bytes)"));
  } catch (const msgpack::depth_size_overflow&) {
    return fail(absl::StrCat("nested deeper than ", kMaxDepth, " levels"));
  } catch (const msgpack::size_overflow&) {
    return fail("a length field is larger than the data");
  } catch (const msgpack::parse_error& e) {
    return fail(absl::StrCat("malformed msgpack (", e.what(), ")"));
  } catch (const std::bad_alloc&) {
    return fail("out of memory while parsing");
  } catch (const std::exception& e) {
    return fail(absl::StrCat("malformed msgpack (", e.what(), ")"));
  } catch (...) {
    return fail("malformed msgpack");
  }
  if (offset != n) {
    return fail(absl::StrCat(n - offset, " trailing bytes after the value (", offset, " of ", n,
                             " bytes used)"));
  }
  return absl::OkStatus();
}

absl::Status Mismatch(std::string_view expected, const msgpack::object& obj,
                      std::string_view detail) {
  // msgpack reports every mismatch as std::bad_cast; say something useful instead.
  const bool generic = detail == "std::bad_cast" || detail.empty();
  return absl::InvalidArgumentError(
      absl::StrCat("cannot deserialize ", ToAbsl(expected), ": found ", Describe(obj),
                   generic ? " (it, or a value inside it, has another type or is out of range)"
                           : absl::StrCat(" (", ToAbsl(detail), ")")));
}

}  // namespace serialization_internal

namespace {
constexpr uint8_t kRefPayloadVersion = 1;

void AppendString(std::string& out, const std::string& s) {
  // The payload caps each field at 64 KiB; an owner address is never near that.
  const size_t n = std::min<size_t>(s.size(), 0xffff);
  out.push_back(static_cast<char>(n >> 8));
  out.push_back(static_cast<char>(n & 0xff));
  out.append(s.data(), n);
}

bool ReadString(std::string_view& in, std::string& out) {
  if (in.size() < 2) return false;
  const size_t n = (size_t{static_cast<uint8_t>(in[0])} << 8) | static_cast<uint8_t>(in[1]);
  in.remove_prefix(2);
  if (in.size() < n) return false;
  out.assign(in.data(), n);
  in.remove_prefix(n);
  return true;
}
}  // namespace

std::string EncodeObjectRefPayload(const ObjectRefData& ref) {
  std::string out;
  out.reserve(1 + ObjectId::kSize + 6 + ref.owner.node_id.size() + ref.owner.address.size() +
              ref.owner.worker_id.size());
  out.push_back(static_cast<char>(kRefPayloadVersion));
  out.append(ref.id.Binary());
  AppendString(out, ref.owner.node_id);
  AppendString(out, ref.owner.address);
  AppendString(out, ref.owner.worker_id);
  return out;
}

absl::StatusOr<ObjectRefData> DecodeObjectRefPayload(std::string_view payload) {
  if (payload.empty() || static_cast<uint8_t>(payload[0]) != kRefPayloadVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("object reference payload has version ",
                     payload.empty() ? -1 : static_cast<int>(static_cast<uint8_t>(payload[0])),
                     ", expected ", kRefPayloadVersion));
  }
  payload.remove_prefix(1);
  if (payload.size() < ObjectId::kSize) {
    return absl::InvalidArgumentError("object reference payload is truncated in its object id");
  }
  ObjectRefData ref;
  ref.id = *ObjectId::FromBinary(payload.substr(0, ObjectId::kSize));
  payload.remove_prefix(ObjectId::kSize);
  if (!ReadString(payload, ref.owner.node_id) || !ReadString(payload, ref.owner.address) ||
      !ReadString(payload, ref.owner.worker_id)) {
    return absl::InvalidArgumentError("object reference payload is truncated in its owner address");
  }
  if (!payload.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("object reference payload has ", payload.size(), " trailing bytes"));
  }
  return ref;
}

absl::StatusOr<std::vector<ObjectRefData>> FindObjectRefs(std::string_view bytes) {
  msgpack::object_handle handle;
  if (absl::Status s = serialization_internal::Unpack(bytes, "a value", handle); !s.ok()) return s;
  std::vector<ObjectRefData> refs;
  // Depth-first in document order with an explicit stack (depth is bounded by Unpack anyway).
  std::vector<const msgpack::object*> stack = {&handle.get()};
  while (!stack.empty()) {
    const msgpack::object* obj = stack.back();
    stack.pop_back();
    switch (obj->type) {
      case msgpack::type::ARRAY:
        for (uint32_t i = obj->via.array.size; i > 0; --i)
          stack.push_back(&obj->via.array.ptr[i - 1]);
        break;
      case msgpack::type::MAP:
        for (uint32_t i = obj->via.map.size; i > 0; --i) {
          stack.push_back(&obj->via.map.ptr[i - 1].val);
          stack.push_back(&obj->via.map.ptr[i - 1].key);
        }
        break;
      case msgpack::type::EXT:
        if (obj->via.ext.type() == kObjectRefExtType) {
          TESSERA_ASSIGN_OR_RETURN(ObjectRefData ref, DecodeObjectRefPayload(std::string_view(
                                                          obj->via.ext.data(), obj->via.ext.size)));
          refs.push_back(std::move(ref));
        }
        break;
      default: break;
    }
  }
  return refs;
}

bool MayHoldObjectRefs(std::string_view bytes) {
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  const auto type = static_cast<unsigned char>(kObjectRefExtType);
  // An ext value is its header byte, its length (0, 1, 2 or 4 bytes), then the type byte.
  for (const void* hit = std::memchr(data, type, n); hit != nullptr;) {
    const size_t i = static_cast<const unsigned char*>(hit) - data;
    if ((i >= 1 && data[i - 1] >= 0xd4 && data[i - 1] <= 0xd8) ||  // fixext 1..16
        (i >= 2 && data[i - 2] == 0xc7) ||                         // ext 8
        (i >= 3 && data[i - 3] == 0xc8) ||                         // ext 16
        (i >= 5 && data[i - 5] == 0xc9)) {                         // ext 32
      return true;
    }
    hit = i + 1 < n ? std::memchr(data + i + 1, type, n - i - 1) : nullptr;
  }
  return false;
}

}  // namespace tessera

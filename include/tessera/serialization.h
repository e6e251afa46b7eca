// Serialization of task arguments, results and Put values with msgpack.
//
// What works out of the box: bool, every integer width, float, double, std::string, std::vector,
// std::map, std::unordered_map, std::set, std::optional, std::tuple, std::pair, std::array, and
// any nesting of them; ObjectRefData (an object reference, see below).
//
// Making your own type serializable:
//
//   1. A struct or class whose members are themselves serializable: list the members with
//      TESSERA_SERIALIZE inside the class (at namespace scope, not a function-local class). The
//      type must be default constructible. Members are written as a msgpack array in the order
//      listed, so reordering them changes the format; reading wants exactly that many elements.
//
//        struct Point {
//          double x = 0, y = 0;
//          std::string label;
//          TESSERA_SERIALIZE(x, y, label);
//        };
//
//   2. A type you cannot edit, or one that needs a custom format: specialize msgpack's adaptors
//      `msgpack::adaptor::pack<T>` and `msgpack::adaptor::convert<T>` (inside
//      `namespace msgpack { MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) { namespace
//      adaptor {` ... `}}}`), as the ObjectRefData adaptor at the end of this file does. A
//      convert adaptor reports a mismatch by throwing `msgpack::type_error`; Deserialize turns it
//      into a Status.
//
// A std::tuple read at the top (the arguments) must have exactly its element count; a tuple nested
// inside another value follows msgpack's lenient rule (missing elements keep their defaults), so
// prefer a TESSERA_SERIALIZE struct inside values.
//
// Error messages name types: specialize `tessera::TypeName<T>` to give yours a short name.
//
// Object references inside values: an ObjectRefData (and so the C++ API's ObjectRef<T>) is
// written as a msgpack ext value of type kObjectRefExtType (payload in docs/objects.md), so
// FindObjectRefs can list every reference inside serialized bytes without knowing their types.
// The owner uses that list to keep nested objects alive while the outer one lives.
//
// Threading: every function here is reentrant; nothing is shared.
#pragma once

#ifndef MSGPACK_NO_BOOST
#define MSGPACK_NO_BOOST
#endif
#ifndef MSGPACK_DEFAULT_API_VERSION
#define MSGPACK_DEFAULT_API_VERSION 3
#endif

#include <array>
#include <cstdint>
#include <map>
#include <msgpack.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tessera/object_ref_data.h"

// Declares the members of a user type that are serialized, in order: MSGPACK_DEFINE_ARRAY, except
// that reading requires an array of exactly that many elements (msgpack alone would accept a
// shorter or longer one and leave members at their defaults, hiding a mismatch).
#define TESSERA_SERIALIZE(...)                                                          \
  template <typename TesseraPacker>                                                     \
  void msgpack_pack(TesseraPacker& tessera_pk) const {                                  \
    msgpack::type::make_define_array(__VA_ARGS__).msgpack_pack(tessera_pk);             \
  }                                                                                     \
  void msgpack_unpack(const msgpack::object& tessera_o) {                               \
    ::tessera::serialization_internal::UnpackExactArray(                                \
        tessera_o, msgpack::type::make_define_array(__VA_ARGS__));                      \
  }                                                                                     \
  template <typename TesseraObject>                                                     \
  void msgpack_object(TesseraObject* tessera_o, msgpack::zone& tessera_z) const {       \
    msgpack::type::make_define_array(__VA_ARGS__).msgpack_object(tessera_o, tessera_z); \
  }

namespace tessera {

// msgpack ext type code of an object reference. Application ext codes are 0..127.
inline constexpr int8_t kObjectRefExtType = 84;  // 'T'

namespace serialization_internal {
template <typename... Members>
void UnpackExactArray(const msgpack::object& o, msgpack::type::define_array<Members...> members) {
  if (o.type != msgpack::type::ARRAY || o.via.array.size != sizeof...(Members)) {
    throw msgpack::type_error();
  }
  members.msgpack_unpack(o);
}

template <typename T>
struct IsTuple : std::false_type {};
template <typename... Ts>
struct IsTuple<std::tuple<Ts...>> : std::true_type {};
}  // namespace serialization_internal

// ---- Type names for error messages ------------------------------------------------------------

namespace serialization_internal {
// The compiler's spelling of T, cut out of __PRETTY_FUNCTION__.
std::string CompilerTypeName(std::string_view pretty_function);
template <typename T>
std::string PrettyName() {
  return CompilerTypeName(__PRETTY_FUNCTION__);
}
}  // namespace serialization_internal

template <typename T>
struct TypeName {
  static std::string Get() { return serialization_internal::PrettyName<T>(); }
};

#define TESSERA_SIMPLE_TYPE_NAME_(type, name) \
  template <>                                 \
  struct TypeName<type> {                     \
    static std::string Get() { return name; } \
  }
TESSERA_SIMPLE_TYPE_NAME_(bool, "bool");
TESSERA_SIMPLE_TYPE_NAME_(int8_t, "int8");
TESSERA_SIMPLE_TYPE_NAME_(int16_t, "int16");
TESSERA_SIMPLE_TYPE_NAME_(int32_t, "int32");
TESSERA_SIMPLE_TYPE_NAME_(int64_t, "int64");
TESSERA_SIMPLE_TYPE_NAME_(uint8_t, "uint8");
TESSERA_SIMPLE_TYPE_NAME_(uint16_t, "uint16");
TESSERA_SIMPLE_TYPE_NAME_(uint32_t, "uint32");
TESSERA_SIMPLE_TYPE_NAME_(uint64_t, "uint64");
TESSERA_SIMPLE_TYPE_NAME_(float, "float");
TESSERA_SIMPLE_TYPE_NAME_(double, "double");
TESSERA_SIMPLE_TYPE_NAME_(std::string, "string");
TESSERA_SIMPLE_TYPE_NAME_(ObjectRefData, "ObjectRef");
#undef TESSERA_SIMPLE_TYPE_NAME_

template <typename T>
struct TypeName<std::vector<T>> {
  static std::string Get() { return "vector<" + TypeName<T>::Get() + ">"; }
};
template <typename T>
struct TypeName<std::set<T>> {
  static std::string Get() { return "set<" + TypeName<T>::Get() + ">"; }
};
template <typename T, size_t N>
struct TypeName<std::array<T, N>> {
  static std::string Get() {
    return "array<" + TypeName<T>::Get() + ", " + std::to_string(N) + ">";
  }
};
template <typename T>
struct TypeName<std::optional<T>> {
  static std::string Get() { return "optional<" + TypeName<T>::Get() + ">"; }
};
template <typename K, typename V>
struct TypeName<std::map<K, V>> {
  static std::string Get() { return "map<" + TypeName<K>::Get() + ", " + TypeName<V>::Get() + ">"; }
};
template <typename K, typename V>
struct TypeName<std::unordered_map<K, V>> {
  static std::string Get() {
    return "unordered_map<" + TypeName<K>::Get() + ", " + TypeName<V>::Get() + ">";
  }
};
template <typename A, typename B>
struct TypeName<std::pair<A, B>> {
  static std::string Get() {
    return "pair<" + TypeName<A>::Get() + ", " + TypeName<B>::Get() + ">";
  }
};
template <typename... Ts>
struct TypeName<std::tuple<Ts...>> {
  static std::string Get() {
    std::string out = "tuple<";
    bool first = true;
    ((out += (first ? "" : ", ") + TypeName<Ts>::Get(), first = false), ...);
    return out + ">";
  }
};

// ---- Serialize / Deserialize ------------------------------------------------------------------

namespace serialization_internal {
// msgpack's stream concept over a std::string (appends).
struct StringWriter {
  std::string* out;
  void write(const char* data, size_t size) { out->append(data, size); }
};

// Parses exactly one msgpack value that spans all of `bytes`, with limits derived from the input
// size so hostile length fields cannot make it allocate more than the input could describe.
// On failure: InvalidArgument naming `expected`.
absl::Status Unpack(std::string_view bytes, std::string_view expected, msgpack::object_handle& out);
// InvalidArgument "expected <expected>, found <what obj is>: <detail>".
absl::Status Mismatch(std::string_view expected, const msgpack::object& obj,
                      std::string_view detail);
}  // namespace serialization_internal

// Serializes one value (a result, a Put value).
template <typename T>
std::string SerializeValue(const T& value) {
  std::string out;
  serialization_internal::StringWriter writer{&out};
  msgpack::pack(writer, value);
  return out;
}

// Serializes the arguments of a call as one msgpack array: Deserialize<std::tuple<Args...>>
// (or DeserializeArgs<Args...>) reads them back.
template <typename... Args>
std::string Serialize(const Args&... args) {
  return SerializeValue(std::forward_as_tuple(args...));
}

// Reads a value of type T that spans all of `bytes` (trailing bytes are an error). Any mismatch,
// truncation or malformed input is InvalidArgument with one line naming the expected type; this
// never throws.
template <typename T>
absl::StatusOr<T> Deserialize(std::string_view bytes) {
  msgpack::object_handle handle;
  const std::string expected = TypeName<T>::Get();
  if (absl::Status s = serialization_internal::Unpack(bytes, expected, handle); !s.ok()) return s;
  try {
    if constexpr (serialization_internal::IsTuple<T>::value) {
      // Arguments: the count must match exactly (msgpack's tuple adaptor alone is lenient).
      const msgpack::object& o = handle.get();
      if (o.type == msgpack::type::ARRAY && o.via.array.size != std::tuple_size_v<T>) {
        return serialization_internal::Mismatch(
            expected, o, "expected " + std::to_string(std::tuple_size_v<T>) + " elements");
      }
    }
    T value{};
    handle.get().convert(value);
    return value;
  } catch (const std::exception& e) {
    return serialization_internal::Mismatch(expected, handle.get(), e.what());
  } catch (...) {
    return serialization_internal::Mismatch(expected, handle.get(), "unknown error");
  }
}

// Reads the arguments written by Serialize(args...).
template <typename... Args>
absl::StatusOr<std::tuple<Args...>> DeserializeArgs(std::string_view bytes) {
  return Deserialize<std::tuple<Args...>>(bytes);
}

// Every object reference inside serialized bytes (in document order, repeats kept). Fails only on
// malformed bytes or a malformed reference payload.
absl::StatusOr<std::vector<ObjectRefData>> FindObjectRefs(std::string_view bytes);

// A scan without unpacking: false only when `bytes` hold no object reference (no msgpack ext
// header of type kObjectRefExtType), so callers skip FindObjectRefs on the common plain value.
// True may be a false alarm (the same bytes inside a string or binary).
bool MayHoldObjectRefs(std::string_view bytes);

// The ext payload of an object reference (see docs/objects.md) and its exact inverse.
std::string EncodeObjectRefPayload(const ObjectRefData& ref);
absl::StatusOr<ObjectRefData> DecodeObjectRefPayload(std::string_view payload);

}  // namespace tessera

// ---- msgpack adaptor for ObjectRefData ----------------------------------------------------------

namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
  namespace adaptor {

  template <>
  struct pack<tessera::ObjectRefData> {
    template <typename Stream>
    packer<Stream>& operator()(packer<Stream>& o, const tessera::ObjectRefData& ref) const {
      const std::string payload = tessera::EncodeObjectRefPayload(ref);
      o.pack_ext(payload.size(), tessera::kObjectRefExtType);
      o.pack_ext_body(payload.data(), payload.size());
      return o;
    }
  };

  template <>
  struct convert<tessera::ObjectRefData> {
    const msgpack::object& operator()(const msgpack::object& o, tessera::ObjectRefData& ref) const {
      if (o.type != msgpack::type::EXT || o.via.ext.type() != tessera::kObjectRefExtType) {
        throw msgpack::type_error();
      }
      auto decoded =
          tessera::DecodeObjectRefPayload(std::string_view(o.via.ext.data(), o.via.ext.size));
      if (!decoded.ok()) throw msgpack::type_error();
      ref = *std::move(decoded);
      return o;
    }
  };

  }  // namespace adaptor
}  // MSGPACK_API_VERSION_NAMESPACE
}  // namespace msgpack

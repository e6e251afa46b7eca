#include "tessera/serialization.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

struct Point {
  double x = 0;
  double y = 0;
  std::string label;
  TESSERA_SERIALIZE(x, y, label);
  friend bool operator==(const Point&, const Point&) = default;
};

struct Shape {
  std::vector<Point> points;
  std::optional<ObjectRefData> texture;
  TESSERA_SERIALIZE(points, texture);
  friend bool operator==(const Shape&, const Shape&) = default;
};

// A type we "cannot edit": serialized as a single string through a hand-written adaptor.
struct Celsius {
  double degrees = 0;
};

}  // namespace
}  // namespace tessera

namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
  namespace adaptor {
  template <>
  struct pack<tessera::Celsius> {
    template <typename Stream>
    packer<Stream>& operator()(packer<Stream>& o, const tessera::Celsius& c) const {
      o.pack(std::to_string(c.degrees) + "C");
      return o;
    }
  };
  template <>
  struct convert<tessera::Celsius> {
    const msgpack::object& operator()(const msgpack::object& o, tessera::Celsius& c) const {
      if (o.type != msgpack::type::STR || o.via.str.size < 2) throw msgpack::type_error();
      c.degrees = std::stod(std::string(o.via.str.ptr, o.via.str.size - 1));
      return o;
    }
  };
  }  // namespace adaptor
}
}  // namespace msgpack

namespace tessera {
template <>
struct TypeName<Point> {
  static std::string Get() { return "Point"; }
};

namespace {

ObjectRefData MakeRef(std::string worker) {
  return ObjectRefData{ObjectId::FromRandom(), OwnerAddress{"node-1", "127.0.0.1:4000", worker}};
}

template <typename T>
void ExpectRoundTrip(const T& value) {
  const std::string bytes = SerializeValue(value);
  absl::StatusOr<T> back = Deserialize<T>(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, value);
}

TEST(SerializationTest, StandardTypesRoundTrip) {
  ExpectRoundTrip(true);
  ExpectRoundTrip(int8_t{-128});
  ExpectRoundTrip(int64_t{-9'000'000'000'000});
  ExpectRoundTrip(uint64_t{18'000'000'000'000'000'000u});
  ExpectRoundTrip(1.5f);
  ExpectRoundTrip(-2.25);
  ExpectRoundTrip(std::string("hello\0world", 11));
  ExpectRoundTrip(std::vector<int>{1, 2, 3});
  ExpectRoundTrip(std::map<std::string, std::vector<double>>{{"a", {1.0}}, {"b", {}}});
  ExpectRoundTrip(std::optional<int>());
  ExpectRoundTrip(std::optional<int>(7));
  ExpectRoundTrip(std::make_pair(std::string("k"), 3));
  ExpectRoundTrip(std::make_tuple(1, std::string("two"), 3.0, std::vector<bool>{true, false}));
}

TEST(SerializationTest, UserTypesThroughTheMacroAndAnAdaptor) {
  ExpectRoundTrip(Point{1.5, -2, "p"});
  ExpectRoundTrip(Shape{{{0, 0, "a"}, {1, 1, "b"}}, MakeRef("w1")});
  auto back = Deserialize<Celsius>(SerializeValue(Celsius{21.5}));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_DOUBLE_EQ(back->degrees, 21.5);
}

TEST(SerializationTest, ArgumentsAreATuple) {
  const std::string bytes = Serialize(7, std::string("x"), Point{1, 2, "z"});
  auto args = DeserializeArgs<int, std::string, Point>(bytes);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(std::get<0>(*args), 7);
  EXPECT_EQ(std::get<1>(*args), "x");
  EXPECT_EQ(std::get<2>(*args), (Point{1, 2, "z"}));
  EXPECT_TRUE(DeserializeArgs<>(Serialize()).ok());
}

TEST(SerializationTest, TypeMismatchNamesTheExpectedType) {
  auto r = Deserialize<std::vector<int>>(SerializeValue(std::string("nope")));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("vector<int32>"));
  EXPECT_THAT(r.status().message(), HasSubstr("found string of 4 bytes"));
  EXPECT_EQ(std::string(r.status().message()).find('\n'), std::string::npos);

  auto p = Deserialize<Point>(SerializeValue(std::make_tuple(1, 2)));
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("Point"));

  auto args = DeserializeArgs<int, std::string>(Serialize(std::string("a"), 1));
  ASSERT_FALSE(args.ok());
  EXPECT_THAT(args.status().message(), HasSubstr("tuple<int32, string>"));
}

TEST(SerializationTest, ArgumentCountMustMatch) {
  auto more = DeserializeArgs<int>(Serialize(1, 2));
  ASSERT_FALSE(more.ok());
  EXPECT_THAT(more.status().message(), HasSubstr("expected 1 elements"));
  EXPECT_FALSE((DeserializeArgs<int, int, int>(Serialize(1, 2)).ok()));
  EXPECT_FALSE(
      Deserialize<Point>(SerializeValue(std::make_tuple(1.0, 2.0, std::string("a"), 4))).ok());
}

TEST(SerializationTest, OutOfRangeIntegerIsAMismatch) {
  auto r = Deserialize<uint8_t>(SerializeValue(300));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("uint8"));
  EXPECT_THAT(r.status().message(), HasSubstr("integer 300"));
}

struct Unnamed {
  int a = 0;
  TESSERA_SERIALIZE(a);
};

TEST(SerializationTest, UnknownTypesAreNamedByTheCompiler) {
  auto r = Deserialize<Unnamed>(SerializeValue(std::string("x")));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("Unnamed"));
}

TEST(SerializationTest, TruncatedAndTrailingDataAreErrors) {
  const std::string bytes = SerializeValue(std::vector<std::string>{"alpha", "beta"});
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto r = Deserialize<std::vector<std::string>>(std::string_view(bytes).substr(0, n));
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("vector<string>"));
  }
  auto r = Deserialize<std::vector<std::string>>(bytes + "x");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("1 trailing bytes"));
}

TEST(SerializationTest, HostileLengthsAreRefusedWithoutAllocating) {
  // array32 header claiming 4 billion elements, then nothing.
  const std::string huge_array("\xdd\xff\xff\xff\xff", 5);
  auto r = Deserialize<std::vector<int>>(huge_array);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  // 1000 nested arrays of one element.
  std::string deep(1000, '\x91');
  deep.push_back('\x01');
  auto d = Deserialize<std::vector<int>>(deep);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("nested deeper"));
}

TEST(SerializationTest, ObjectRefsAreFoundInsideAnyValue) {
  const ObjectRefData a = MakeRef("w1");
  const ObjectRefData b = MakeRef("w2");
  Shape shape{{{0, 0, "x"}}, a};
  std::map<std::string, ObjectRefData> by_name{{"b", b}};
  const std::string bytes = Serialize(shape, 5, by_name, std::vector<ObjectRefData>{a});
  auto refs = FindObjectRefs(bytes);
  ASSERT_TRUE(refs.ok()) << refs.status();
  EXPECT_EQ(*refs, (std::vector<ObjectRefData>{a, b, a}));

  auto none = FindObjectRefs(Serialize(1, std::string("no refs")));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(SerializationTest, MayHoldObjectRefsNeverMissesARef) {
  const ObjectRefData a = MakeRef("w1");
  EXPECT_TRUE(MayHoldObjectRefs(SerializeValue(a)));
  EXPECT_TRUE(MayHoldObjectRefs(Serialize(std::string(300, 'x'), std::vector<ObjectRefData>{a})));
  // Long owner addresses make an ext 16 header.
  EXPECT_TRUE(MayHoldObjectRefs(SerializeValue(MakeRef(std::string(400, 'w')))));
  EXPECT_FALSE(MayHoldObjectRefs(Serialize(1, std::string("no refs"), 2.5)));
  EXPECT_FALSE(MayHoldObjectRefs(""));
  // The type byte alone ('T') is no ref.
  EXPECT_FALSE(MayHoldObjectRefs(SerializeValue(std::string("TTTT"))));
  // Every value FindObjectRefs finds a ref in is flagged.
  for (int n = 0; n < 64; ++n) {
    const std::string bytes = Serialize(std::string(n, 'T'), a, std::vector<int>(n, 84));
    ASSERT_FALSE(FindObjectRefs(bytes)->empty());
    EXPECT_TRUE(MayHoldObjectRefs(bytes)) << n;
  }
}

TEST(SerializationTest, ObjectRefPayloadRoundTripsAndRejectsDamage) {
  const ObjectRefData ref = MakeRef("worker-7");
  const std::string payload = EncodeObjectRefPayload(ref);
  auto back = DecodeObjectRefPayload(payload);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, ref);
  for (size_t n = 0; n < payload.size(); ++n) {
    EXPECT_FALSE(DecodeObjectRefPayload(std::string_view(payload).substr(0, n)).ok()) << n;
  }
  EXPECT_FALSE(DecodeObjectRefPayload(payload + "x").ok());
  std::string wrong_version = payload;
  wrong_version[0] = 9;
  auto v = DecodeObjectRefPayload(wrong_version);
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.status().message(), HasSubstr("version 9"));
  // A ref whose payload is damaged is a mismatch for Deserialize, an error for FindObjectRefs.
  std::string bytes = SerializeValue(ref);
  bytes[3] = 9;  // the payload's version byte (ext8 header is 3 bytes)
  EXPECT_FALSE(Deserialize<ObjectRefData>(bytes).ok());
  EXPECT_FALSE(FindObjectRefs(bytes).ok());
}

TEST(SerializationTest, ObjectRefIsAnExtValue) {
  const std::string bytes = SerializeValue(MakeRef("w"));
  msgpack::object_handle h = msgpack::unpack(bytes.data(), bytes.size());
  ASSERT_EQ(h.get().type, msgpack::type::EXT);
  EXPECT_EQ(h.get().via.ext.type(), kObjectRefExtType);
}

}  // namespace
}  // namespace tessera

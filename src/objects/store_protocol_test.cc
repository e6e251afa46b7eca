#include "objects/store_protocol.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

TEST(StoreProtocolTest, RequestsRoundTrip) {
  const ObjectId id = ObjectId::FromRandom();
  for (uint8_t t = 1; t <= 10; ++t) {
    StoreRequest r{.type = static_cast<StoreMessageType>(t)};
    if (r.type != StoreMessageType::kHello && r.type != StoreMessageType::kStats &&
        r.type != StoreMessageType::kOwner) {
      r.id = id;
    }
    if (r.type == StoreMessageType::kCreate) {
      r.data_size = 12345678901ull;
      r.metadata = std::string("m\0x", 3);
      r.evictable = true;
      r.owner = "driver-0123456789ab";
    }
    if (r.type == StoreMessageType::kOwner) r.owner = "driver-0123456789ab";
    if (r.type == StoreMessageType::kGet) r.wait_ms = 4000000000u;
    auto back = ParseStoreRequest(EncodeStoreRequest(r));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, r) << static_cast<int>(t);
  }
}

TEST(StoreProtocolTest, RepliesRoundTrip) {
  StoreReply r;
  r.status = absl::ResourceExhaustedError("full");
  r.location = ObjectLocation{64, 1000, "meta"};
  r.arena_size = 1 << 30;
  r.contains = true;
  r.stats.evictions = 7;
  r.stats.capacity_bytes = 99;
  r.stats.spilled_bytes = 1234;
  r.stats.restores = 5;
  auto back = ParseStoreReply(EncodeStoreReply(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->status, r.status);
  EXPECT_EQ(back->location.offset, 64u);
  EXPECT_EQ(back->location.metadata, "meta");
  EXPECT_EQ(back->arena_size, r.arena_size);
  EXPECT_TRUE(back->contains);
  EXPECT_EQ(back->stats.evictions, 7u);
  EXPECT_EQ(back->stats.capacity_bytes, 99u);
  EXPECT_EQ(back->stats.spilled_bytes, 1234u);
  EXPECT_EQ(back->stats.restores, 5u);
}

TEST(StoreProtocolTest, MalformedBodiesGetOneLineErrors) {
  const std::string create = EncodeStoreRequest(
      {.type = StoreMessageType::kCreate, .id = ObjectId::FromRandom(), .data_size = 5});
  for (size_t n = 0; n < create.size(); ++n) {
    auto r = ParseStoreRequest(std::string_view(create).substr(0, n));
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(std::string(r.status().message()).find('\n'), std::string::npos);
  }
  auto trailing = ParseStoreRequest(create + "z");
  ASSERT_FALSE(trailing.ok());
  EXPECT_THAT(trailing.status().message(), HasSubstr("1 unexpected trailing bytes"));

  std::string wrong_version = create;
  wrong_version[0] = 7;
  auto v = ParseStoreRequest(wrong_version);
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.status().message(), HasSubstr("version 7 is not supported"));

  std::string unknown = create;
  unknown[1] = 42;
  EXPECT_THAT(ParseStoreRequest(unknown).status().message(), HasSubstr("unknown message type 42"));

  std::string bad_bool = create;
  bad_bool[bad_bool.size() - 5] = 2;  // evictable, before the (empty) owner's 4-byte length
  EXPECT_THAT(ParseStoreRequest(bad_bool).status().message(), HasSubstr("not 0 or 1"));

  std::string bad_code = EncodeStoreReply({});
  bad_code[2] = 99;
  EXPECT_THAT(ParseStoreReply(bad_code).status().message(), HasSubstr("status code 99"));
}

TEST(StoreProtocolTest, FrameHeaderBoundsTheLength) {
  const std::string framed = Frame("ab");
  ASSERT_EQ(framed.size(), 6u);
  auto n = ParseFrameHeader(std::string_view(framed).substr(0, 4));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2u);
  EXPECT_FALSE(ParseFrameHeader(std::string("\xff\xff\xff\x7f", 4)).ok());
  EXPECT_FALSE(ParseFrameHeader(std::string("\x01\x00\x00\x00", 4)).ok());
  EXPECT_FALSE(ParseFrameHeader("abc").ok());
}

}  // namespace
}  // namespace tessera

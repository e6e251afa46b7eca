#include "objects/object_location.h"

#include <gtest/gtest.h>

#include <string>

#include "tessera/serialization.h"

namespace tessera {
namespace {

TEST(ObjectLocationTest, EnvelopeRoundTrip) {
  v1::StoredObject where;
  where.set_node_id("node-b");
  where.set_agent_address("127.0.0.1:4321");
  where.set_size(10 << 20);
  const std::string envelope = EncodeStoredEnvelope(where);
  EXPECT_TRUE(IsStoredEnvelope(envelope));
  auto back = DecodeStoredEnvelope(envelope);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->node_id(), "node-b");
  EXPECT_EQ(back->agent_address(), "127.0.0.1:4321");
  EXPECT_EQ(back->size(), uint64_t{10} << 20);
}

TEST(ObjectLocationTest, SerializedValuesAreNeverEnvelopes) {
  // msgpack never starts a value with 0xc1, whatever it holds.
  for (const std::string& value :
       {SerializeValue(std::string("\xc1TSTORED1")), SerializeValue(42),
        SerializeValue(std::string()), SerializeValue(std::vector<std::string>{"\xc1TSTORED1"})}) {
    EXPECT_FALSE(IsStoredEnvelope(value));
    EXPECT_FALSE(DecodeStoredEnvelope(value).has_value());
  }
  EXPECT_FALSE(DecodeStoredEnvelope("").has_value());
  EXPECT_FALSE(DecodeStoredEnvelope(std::string("\xc1TSTORED1", 9)).has_value());  // no node
}

}  // namespace
}  // namespace tessera

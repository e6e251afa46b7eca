#include "tessera/object_id.h"

#include "absl/container/flat_hash_set.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

TEST(ObjectIdTest, TaskReturnsAndPutsCarryTheirTaskAndIndex) {
  const TaskId task = TaskId::FromRandom();
  const ObjectId ret = ObjectId::ForTaskReturn(task, 3);
  EXPECT_EQ(ret.task_id(), task);
  EXPECT_EQ(ret.index(), 3u);
  EXPECT_FALSE(ret.is_put());
  const ObjectId put = ObjectId::ForPut(task, 3);
  EXPECT_EQ(put.task_id(), task);
  EXPECT_EQ(put.index(), 3u);
  EXPECT_TRUE(put.is_put());
  EXPECT_NE(ret, put);
  EXPECT_EQ(ObjectId::ForPut(task, ObjectId::kMaxIndex).index(), ObjectId::kMaxIndex);
}

TEST(ObjectIdTest, RandomIdsAreUnique) {
  absl::flat_hash_set<ObjectId> seen;
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(seen.insert(ObjectId::FromRandom()).second);
  EXPECT_FALSE(ObjectId::FromRandom().IsNil());
  EXPECT_TRUE(ObjectId().IsNil());
}

TEST(ObjectIdTest, HexAndBinaryFormsRoundTrip) {
  const ObjectId id = ObjectId::ForTaskReturn(TaskId::FromRandom(), 1);
  EXPECT_EQ(id.Hex().size(), 48u);
  EXPECT_EQ(id.Binary().size(), ObjectId::kSize);
  EXPECT_EQ(*ObjectId::FromHex(id.Hex()), id);
  EXPECT_EQ(*ObjectId::FromBinary(id.Binary()), id);
  const TaskId task = id.task_id();
  EXPECT_EQ(*TaskId::FromHex(task.Hex()), task);
  EXPECT_EQ(id.Hex().substr(0, 40), task.Hex());
  EXPECT_EQ(id.Hex().substr(40), "00000001");
  EXPECT_EQ(ObjectId::ForPut(task, 2).Hex().substr(40), "80000002");
}

TEST(ObjectIdTest, ParsingRejectsBadText) {
  auto short_hex = ObjectId::FromHex("abcd");
  ASSERT_FALSE(short_hex.ok());
  EXPECT_EQ(short_hex.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(short_hex.status().message(), HasSubstr("48 hex characters, got 4"));
  std::string upper = ObjectId::FromRandom().Hex();
  upper[5] = 'G';
  auto bad = ObjectId::FromHex(upper);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("position 5"));
  EXPECT_FALSE(ObjectId::FromBinary("short").ok());
  EXPECT_FALSE(TaskId::FromHex(std::string(48, '0')).ok());
}

TEST(ObjectIdDeathTest, ZeroReturnIndexIsACallerBug) {
  EXPECT_DEATH(ObjectId::ForTaskReturn(TaskId::FromRandom(), 0), "");
}

}  // namespace
}  // namespace tessera

#include "head/state_store.h"

#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(InMemoryStateStoreTest, PutGetDeleteList) {
  InMemoryStateStore store;
  EXPECT_FALSE(store.Get("kv", "a")->has_value());
  ASSERT_TRUE(store.Put("kv", "a/1", "one").ok());
  ASSERT_TRUE(store.Put("kv", "a/2", "two").ok());
  ASSERT_TRUE(store.Put("kv", "b", "bee").ok());
  ASSERT_TRUE(store.Put("jobs", "a/1", "job").ok());
  EXPECT_EQ(**store.Get("kv", "a/1"), "one");
  ASSERT_TRUE(store.Put("kv", "a/1", "uno").ok());
  EXPECT_EQ(**store.Get("kv", "a/1"), "uno");

  auto listed = store.List("kv", "a/");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].first, "a/1");
  EXPECT_EQ((*listed)[1].second, "two");
  EXPECT_EQ(store.List("kv")->size(), 3u);
  EXPECT_EQ(store.List("jobs")->size(), 1u);  // tables are separate
  EXPECT_TRUE(store.List("nothing")->empty());

  EXPECT_TRUE(*store.Delete("kv", "a/1"));
  EXPECT_FALSE(*store.Delete("kv", "a/1"));
  EXPECT_FALSE(store.Get("kv", "a/1")->has_value());
}

TEST(InMemoryStateStoreTest, BinaryValues) {
  InMemoryStateStore store;
  std::string value("a\0b", 3);
  ASSERT_TRUE(store.Put("kv", "bin", value).ok());
  EXPECT_EQ(**store.Get("kv", "bin"), value);
}

}  // namespace
}  // namespace tessera

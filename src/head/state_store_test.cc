// The StateStore contract, run against every implementation: InMemoryStateStore, and
// RedisStateStore over a real redis-server (skipped, saying why, where none is installed).
// Redis-only behaviour (reconnecting, passwords, key prefixes) is in redis_state_store_test.cc.
#include "head/state_store.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "head/redis_state_store.h"
#include "head/redis_test_server.h"

namespace tessera {
namespace {

enum class Implementation { kInMemory, kRedis };

std::string ImplementationName(const ::testing::TestParamInfo<Implementation>& info) {
  return info.param == Implementation::kInMemory ? "InMemory" : "Redis";
}

class StateStoreContractTest : public ::testing::TestWithParam<Implementation> {
 protected:
  void SetUp() override {
    if (GetParam() == Implementation::kInMemory) {
      store_ = std::make_unique<InMemoryStateStore>();
      return;
    }
    auto server = testing::RedisTestServer::Create();
    if (!server.ok() && server.status().code() == absl::StatusCode::kNotFound) {
      GTEST_SKIP() << "no Redis to test against: " << server.status().message();
    }
    ASSERT_TRUE(server.ok()) << server.status();
    redis_ = *std::move(server);
    RedisStateStoreOptions options;
    options.address = redis_->address();
    auto store = RedisStateStore::Create(options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  StateStore& store() { return *store_; }

 private:
  std::unique_ptr<testing::RedisTestServer> redis_;  // outlives store_: declared first
  std::unique_ptr<StateStore> store_;
};

TEST_P(StateStoreContractTest, PutGetDeleteList) {
  StateStore& store = this->store();
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
  EXPECT_FALSE(*store.Delete("nothing", "a"));
}

TEST_P(StateStoreContractTest, ValuesAndKeysWithNulBytesAreKeptExactly) {
  StateStore& store = this->store();
  const std::string value("a\0b\0", 4);
  const std::string key("k\0ey", 4);
  ASSERT_TRUE(store.Put("kv", key, value).ok());
  EXPECT_EQ(**store.Get("kv", key), value);
  EXPECT_FALSE(store.Get("kv", "k")->has_value());  // the key is not cut at its NUL
  auto listed = store.List("kv", std::string("k\0", 2));
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].first, key);
  EXPECT_EQ((*listed)[0].second, value);
}

TEST_P(StateStoreContractTest, EmptyKeysAndValuesAreEntries) {
  StateStore& store = this->store();
  ASSERT_TRUE(store.Put("kv", "", "root").ok());
  ASSERT_TRUE(store.Put("kv", "empty", "").ok());
  EXPECT_EQ(**store.Get("kv", ""), "root");
  auto empty = store.Get("kv", "empty");
  ASSERT_TRUE(empty.ok());
  ASSERT_TRUE(empty->has_value());
  EXPECT_EQ(**empty, "");
  EXPECT_EQ(store.List("kv")->size(), 2u);
}

TEST_P(StateStoreContractTest, OneMebibyteValueRoundTrips) {
  StateStore& store = this->store();
  std::string value(1 << 20, '\0');
  for (size_t i = 0; i < value.size(); ++i) value[i] = static_cast<char>(i * 131 % 251);
  ASSERT_TRUE(store.Put("jobs", "big", value).ok());
  auto got = store.Get("jobs", "big");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_value());
  EXPECT_TRUE(**got == value);  // not EXPECT_EQ: a mismatch would print 2 MiB
  auto listed = store.List("jobs");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_TRUE((*listed)[0].second == value);
}

TEST_P(StateStoreContractTest, ListIsSortedBytewiseAndMatchesThePrefixLiterally) {
  StateStore& store = this->store();
  // Inserted out of order; glob characters in keys and prefixes mean nothing.
  for (const char* key : {"b", "a*", "a?", "a[1]", "a\\", "ab", "a", "\xff", "aa"}) {
    ASSERT_TRUE(store.Put("kv", key, key).ok());
  }
  auto all = store.List("kv");
  ASSERT_TRUE(all.ok());
  std::vector<std::string> keys;
  for (const auto& [key, value] : *all) keys.push_back(key);
  EXPECT_EQ(keys,
            (std::vector<std::string>{"a", "a*", "a?", "a[1]", "a\\", "aa", "ab", "b", "\xff"}));
  for (const char* prefix : {"a*", "a?", "a[", "a\\"}) {
    auto listed = store.List("kv", prefix);
    ASSERT_TRUE(listed.ok());
    ASSERT_EQ(listed->size(), 1u) << prefix;
    EXPECT_TRUE((*listed)[0].first.starts_with(prefix));
  }
}

TEST_P(StateStoreContractTest, ListReturnsEveryEntryOfALargeTable) {
  StateStore& store = this->store();
  // More than one HSCAN page, in Redis.
  constexpr int kEntries = 2500;
  for (int i = 0; i < kEntries; ++i) {
    char key[16];
    std::snprintf(key, sizeof(key), "node-%05d", i);
    ASSERT_TRUE(store.Put("nodes", key, std::to_string(i)).ok());
  }
  auto listed = store.List("nodes");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), static_cast<size_t>(kEntries));
  for (int i = 0; i < kEntries; ++i) EXPECT_EQ((*listed)[i].second, std::to_string(i));
  auto some = store.List("nodes", "node-024");
  ASSERT_TRUE(some.ok());
  EXPECT_EQ(some->size(), 100u);
}

INSTANTIATE_TEST_SUITE_P(Implementations, StateStoreContractTest,
                         ::testing::Values(Implementation::kInMemory, Implementation::kRedis),
                         ImplementationName);

}  // namespace
}  // namespace tessera

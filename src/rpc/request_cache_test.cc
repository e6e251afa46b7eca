#include "rpc/request_cache.h"

#include <atomic>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace tessera::rpc {
namespace {

TEST(RequestCacheTest, RepeatGetsFirstResponseWithoutRunningAgain) {
  RequestCache<std::string> cache;
  int runs = 0;
  auto compute = [&] { return "response " + std::to_string(++runs); };
  EXPECT_EQ(cache.Run("a", compute), "response 1");
  EXPECT_EQ(cache.Run("a", compute), "response 1");
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(cache.Run("b", compute), "response 2");
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(*cache.Find("a"), "response 1");
  EXPECT_FALSE(cache.Find("zzz").has_value());
}

TEST(RequestCacheTest, EmptyIdIsNeverDeduplicated) {
  RequestCache<int> cache;
  int runs = 0;
  cache.Run("", [&] { return ++runs; });
  cache.Run("", [&] { return ++runs; });
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(RequestCacheTest, BoundedByLeastRecentlyUsed) {
  RequestCache<int> cache(2);
  cache.Run("a", [] { return 1; });
  cache.Run("b", [] { return 2; });
  cache.Run("a", [] { return 100; });  // touches a
  cache.Run("c", [] { return 3; });    // evicts b, the least recently used
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_TRUE(cache.Find("a").has_value());
  EXPECT_FALSE(cache.Find("b").has_value());
  EXPECT_TRUE(cache.Find("c").has_value());
  // A forgotten id runs again.
  EXPECT_EQ(cache.Run("b", [] { return 20; }), 20);
}

TEST(RequestCacheTest, RepeatWhileFirstRunsWaitsForIt) {
  RequestCache<int> cache;
  std::atomic<int> runs{0};
  absl::Notification first_started;
  absl::Notification release_first;
  std::thread first([&] {
    cache.Run("id", [&] {
      ++runs;
      first_started.Notify();
      release_first.WaitForNotification();
      return 7;
    });
  });
  first_started.WaitForNotification();
  int second_result = 0;
  std::thread second([&] {
    second_result = cache.Run("id", [&] {
      ++runs;
      return 8;
    });
  });
  release_first.Notify();
  first.join();
  second.join();
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(second_result, 7);
}

}  // namespace
}  // namespace tessera::rpc

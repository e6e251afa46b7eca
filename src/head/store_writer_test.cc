// StoreWriter: a degraded store refuses the writes callers are answered on, keeps the head's own
// (the latest value per key) and makes them when a ping finds it back; its metrics follow.
#include "head/store_writer.h"

#include <atomic>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "head/failing_state_store.h"
#include "metrics/metric_registry.h"

namespace tessera {
namespace {

TEST(StoreWriterTest, TheHeadsOwnWritesWaitForTheStoreAndLandAsTheirLatestValue) {
  FailingStateStore store;
  EventLog events(100, Clock::Real());
  metrics::MetricRegistry registry;
  absl::StatusOr<StateStoreMetrics> metrics = StateStoreMetrics::Register(registry);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  StoreWriter writer(&store, &events, *metrics);
  ASSERT_TRUE(writer.Write("t", "gone", "x").ok());
  ASSERT_TRUE(writer.Writable().ok());

  store.fail = true;
  writer.Put("t", "a", "1");  // finds it down
  EXPECT_TRUE(writer.health().degraded);
  writer.Put("t", "a", "2");
  writer.Put("t", "b", "1");
  writer.Delete("t", "gone");
  const absl::Status refused = writer.Write("t", "c", "1");
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(refused.message(),
            "state store unavailable: could not write t/a: redis at unix:/x: HSET: connection "
            "refused; nothing was changed");
  EXPECT_EQ(writer.Erase("t", "gone").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(writer.health().pending, 3u);
  EXPECT_EQ(writer.health().failed, 1u);  // refusals are not failed writes
  EXPECT_EQ(metrics->healthy->Value(), 0);
  EXPECT_EQ(metrics->pending->Value(), 3);
  EXPECT_EQ(metrics->failed_writes->Value(), 1);
  writer.CheckHealth();  // still down
  EXPECT_TRUE(writer.health().degraded);
  EXPECT_FALSE(store.Get("t", "a")->has_value());

  store.fail = false;
  writer.CheckHealth();
  EXPECT_FALSE(writer.health().degraded);
  EXPECT_EQ(**store.Get("t", "a"), "2");
  EXPECT_EQ(**store.Get("t", "b"), "1");
  EXPECT_FALSE(store.Get("t", "gone")->has_value());
  EXPECT_FALSE(store.Get("t", "c")->has_value());  // refused, never made
  EXPECT_EQ(metrics->healthy->Value(), 1);
  EXPECT_EQ(metrics->pending->Value(), 0);
  ASSERT_TRUE(writer.Write("t", "c", "1").ok());
  const std::vector<std::string> notices = events.List();
  ASSERT_EQ(notices.size(), 2u);
  EXPECT_TRUE(absl::StrContains(notices[0], "the state store is degraded: could not write t/a"))
      << notices[0];
  EXPECT_TRUE(absl::StrContains(notices[1], "the state store is back: the 3 writes kept"))
      << notices[1];
}

TEST(StoreWriterTest, AFailedPingDegradesAHealthyStore) {
  FailingStateStore store;
  EventLog events(100, Clock::Real());
  StoreWriter writer(&store, &events);
  writer.MaybeCheckHealth(absl::UnixEpoch(), absl::Seconds(1));
  EXPECT_FALSE(writer.health().degraded);
  store.fail = true;
  writer.MaybeCheckHealth(absl::UnixEpoch() + absl::Milliseconds(500), absl::Seconds(1));
  EXPECT_FALSE(writer.health().degraded);  // not due yet
  writer.MaybeCheckHealth(absl::UnixEpoch() + absl::Seconds(1), absl::Seconds(1));
  EXPECT_TRUE(writer.health().degraded);
  EXPECT_EQ(writer.health().cause, "does not answer: redis at unix:/x: PING: connection refused");
  EXPECT_EQ(writer.Writable().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tessera

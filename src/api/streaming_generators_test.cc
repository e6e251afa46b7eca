#include "api/streaming_generators.h"

#include <gtest/gtest.h>

#include <thread>

namespace tessera::api {
namespace {

ObjectId Item(const TaskId& task, int index) { return ObjectId::ForTaskReturn(task, index + 2); }

// One generator task, expected by its owner's StreamingGenerators over a table of its own.
class StreamingGeneratorsTest : public ::testing::Test {
 protected:
  StreamingGeneratorsTest() { generators.Expect(task); }
  ObjectTable table;
  StreamingGenerators generators{&table};
  const TaskId task = TaskId::FromRandom();
};

TEST_F(StreamingGeneratorsTest, ItemsArriveInOrderAndNextWaitsForEach) {
  EXPECT_EQ(generators.Next(task, 0, absl::Now()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  std::thread producer([&] {
    ASSERT_TRUE(generators.Report(task, 0, "a").ok());
    ASSERT_TRUE(generators.Report(task, 1, "b").ok());
    generators.Finish(task, absl::OkStatus());
  });
  auto first = generators.Next(task, 0, absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_EQ(**first, Item(task, 0));
  EXPECT_EQ(*table.Get(Item(task, 0), absl::InfiniteFuture()), "a");
  auto second = generators.Next(task, 1, absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_EQ(*table.Get(**second, absl::InfiniteFuture()), "b");
  auto end = generators.Next(task, 2, absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());  // StopIteration
  producer.join();
}

TEST_F(StreamingGeneratorsTest, ARetriedRunsItemsAreIgnoredAndAGapIsRefused) {
  ASSERT_TRUE(generators.Report(task, 0, "first run").ok());
  EXPECT_TRUE(generators.Report(task, 0, "second run").ok());
  EXPECT_EQ(*table.Get(Item(task, 0), absl::InfiniteFuture()), "first run");
  EXPECT_EQ(generators.Report(task, 5, "x").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(generators.Report(task, -1, "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(generators.Report(TaskId::FromRandom(), 0, "x").code(), absl::StatusCode::kNotFound);
}

TEST_F(StreamingGeneratorsTest, AFailureIsOneMoreItemHoldingIt) {
  ASSERT_TRUE(generators.Report(task, 0, "a").ok());
  generators.Finish(task, absl::UnknownError("boom mid-stream"));
  auto failure = generators.Next(task, 1, absl::InfiniteFuture());
  ASSERT_TRUE(failure.ok() && failure->has_value());
  EXPECT_EQ(table.Get(**failure, absl::InfiniteFuture()).status().message(), "boom mid-stream");
  auto end = generators.Next(task, 2, absl::InfiniteFuture());
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());
}

TEST_F(StreamingGeneratorsTest, ReleaseLetsUnreadItemsGoAndForgetsTheGeneratorOnceEnded) {
  ASSERT_TRUE(generators.Report(task, 0, "taken").ok());
  ASSERT_TRUE(generators.Report(task, 1, "never read").ok());
  generators.Release(task, 1);
  EXPECT_EQ(table.Get(Item(task, 1), absl::InfiniteFuture()).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(*table.Get(Item(task, 0), absl::InfiniteFuture()), "taken");
  // Later items are not kept for a consumer that has gone.
  EXPECT_EQ(generators.Report(task, 2, "late").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(generators.size(), 1u);
  generators.Finish(task, absl::OkStatus());
  EXPECT_EQ(generators.size(), 0u);
}

}  // namespace
}  // namespace tessera::api

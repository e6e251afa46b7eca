#include "rpc/retry.h"

#include <vector>

#include "base/clock.h"
#include "gtest/gtest.h"
#include "rpc/auth.h"

namespace tessera::rpc {
namespace {

RetryOptions FakeOptions(FakeClock* clock, double u = 0.5) {
  RetryOptions options;
  options.clock = clock;
  options.random = [u] { return u; };  // u = 0.5: no jitter
  return options;
}

TEST(RetryTest, SuccessNeedsOneAttempt) {
  FakeClock clock;
  RetryStats stats;
  int calls = 0;
  absl::Status status = CallWithRetry(
      FakeOptions(&clock),
      [&](grpc::ClientContext*) {
        ++calls;
        return grpc::Status::OK;
      },
      &stats);
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(stats.attempts, 1);
  EXPECT_EQ(clock.sleep_count(), 0);
}

TEST(RetryTest, UnavailableIsRetriedWithDoublingBackoffCappedAtMax) {
  FakeClock clock;
  RetryOptions options = FakeOptions(&clock);
  options.total_budget = absl::Seconds(60);
  std::vector<absl::Time> attempts;
  absl::Status status = CallWithRetry(options, [&](grpc::ClientContext*) {
    attempts.push_back(clock.Now());
    if (attempts.size() < 8) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "down");
    return grpc::Status::OK;
  });
  EXPECT_TRUE(status.ok()) << status;
  ASSERT_EQ(attempts.size(), 8u);
  std::vector<absl::Duration> waits;
  for (size_t i = 1; i < attempts.size(); ++i) waits.push_back(attempts[i] - attempts[i - 1]);
  std::vector<absl::Duration> expected = {absl::Milliseconds(50),  absl::Milliseconds(100),
                                          absl::Milliseconds(200), absl::Milliseconds(400),
                                          absl::Milliseconds(800), absl::Seconds(1),
                                          absl::Seconds(1)};
  EXPECT_EQ(waits, expected);
}

TEST(RetryTest, JitterStaysWithinItsFraction) {
  for (double u : {0.0, 0.999}) {
    FakeClock clock;
    RetryOptions options = FakeOptions(&clock, u);
    int calls = 0;
    (void)CallWithRetry(options, [&](grpc::ClientContext*) {
      return ++calls < 2 ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "x") : grpc::Status::OK;
    });
    absl::Duration wait = clock.total_slept();
    EXPECT_GE(wait, absl::Milliseconds(40) - absl::Microseconds(1));
    EXPECT_LE(wait, absl::Milliseconds(60));
  }
}

TEST(RetryTest, DeadlineExceededIsRetriedOtherErrorsAreNot) {
  FakeClock clock;
  int calls = 0;
  absl::Status status = CallWithRetry(FakeOptions(&clock), [&](grpc::ClientContext*) {
    ++calls;
    if (calls == 1) return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "slow");
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad field");
  });
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(status, absl::InvalidArgumentError("bad field"));
}

TEST(RetryTest, StopsWhenTheBudgetEnds) {
  FakeClock clock;
  RetryOptions options = FakeOptions(&clock);
  options.total_budget = absl::Seconds(3);
  absl::Time start = clock.Now();
  RetryStats stats;
  absl::Status status = CallWithRetry(
      options,
      [&](grpc::ClientContext*) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection refused");
      },
      &stats);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("connection refused"), absl::string_view::npos);
  EXPECT_NE(status.message().find("attempts"), absl::string_view::npos);
  EXPECT_LE(clock.Now() - start, absl::Seconds(3));
  // 50+100+200+400+800 = 1.55 s, then 1 s more fits (2.55 s), a further 1 s does not.
  EXPECT_EQ(stats.attempts, 7);
}

TEST(RetryTest, EveryAttemptCarriesADeadline) {
  FakeClock clock;
  RetryOptions options = FakeOptions(&clock);
  options.attempt_timeout = absl::Seconds(2);
  int calls = 0;
  (void)CallWithRetry(options, [&](grpc::ClientContext* context) {
    ++calls;
    auto deadline = context->deadline();
    auto now = std::chrono::system_clock::now();
    EXPECT_GT(deadline, now);
    EXPECT_LE(deadline, now + std::chrono::seconds(3));
    return calls < 3 ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "x") : grpc::Status::OK;
  });
  EXPECT_EQ(calls, 3);
}

}  // namespace
}  // namespace tessera::rpc

#include "base/clock.h"

#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(FakeClockTest, MovesOnlyWhenTold) {
  FakeClock clock;
  absl::Time start = clock.Now();
  EXPECT_EQ(clock.Now(), start);
  clock.Advance(absl::Seconds(3));
  EXPECT_EQ(clock.Now(), start + absl::Seconds(3));
  clock.Advance(absl::Seconds(-1));  // time never goes back
  EXPECT_EQ(clock.Now(), start + absl::Seconds(3));
}

TEST(FakeClockTest, SleepAdvancesAndIsCounted) {
  FakeClock clock(absl::FromUnixSeconds(100));
  clock.SleepFor(absl::Milliseconds(50));
  clock.SleepFor(absl::Milliseconds(100));
  clock.SleepFor(absl::ZeroDuration());
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(100) + absl::Milliseconds(150));
  EXPECT_EQ(clock.total_slept(), absl::Milliseconds(150));
  EXPECT_EQ(clock.sleep_count(), 3);
}

TEST(RealClockTest, NowMovesForward) {
  Clock* clock = Clock::Real();
  absl::Time a = clock->Now();
  clock->SleepFor(absl::Milliseconds(1));
  EXPECT_GE(clock->Now(), a);
  clock->SleepFor(absl::Seconds(-5));  // returns at once
}

}  // namespace
}  // namespace tessera

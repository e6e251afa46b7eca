#include "base/clock.h"

#include <thread>

#include "absl/time/clock.h"
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

TEST(FakeClockTest, AWaitEndsWhenItsConditionHoldsOrWhenFakeTimePassesTheDeadline) {
  FakeClock clock;
  absl::Mutex mu;
  bool ready = false;
  // The condition holds already: true at once, whatever the deadline.
  {
    absl::MutexLock lock(&mu);
    ready = true;
    EXPECT_TRUE(clock.AwaitWithDeadline(mu, absl::Condition(&ready), clock.Now()));
    ready = false;
  }
  // A deadline an hour of fake time away passes when another thread moves the clock: no real
  // hour is waited.
  const absl::Time deadline = clock.Now() + absl::Hours(1);
  std::thread mover([&] {
    absl::SleepFor(absl::Milliseconds(20));
    clock.Advance(absl::Hours(1));
  });
  const absl::Time real_start = absl::Now();
  {
    absl::MutexLock lock(&mu);
    EXPECT_FALSE(clock.AwaitWithDeadline(mu, absl::Condition(&ready), deadline));
  }
  mover.join();
  EXPECT_LT(absl::Now() - real_start, absl::Seconds(30));
  // Another thread making the condition true wakes the waiter before its deadline.
  std::thread setter([&] {
    absl::SleepFor(absl::Milliseconds(20));
    absl::MutexLock lock(&mu);
    ready = true;
  });
  {
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(
        clock.AwaitWithDeadline(mu, absl::Condition(&ready), clock.Now() + absl::Seconds(1)));
  }
  setter.join();
}

TEST(RealClockTest, AwaitWithDeadlineIsTheMutexsOwn) {
  absl::Mutex mu;
  bool ready = false;
  absl::MutexLock lock(&mu);
  EXPECT_FALSE(Clock::Real()->AwaitWithDeadline(mu, absl::Condition(&ready),
                                                absl::Now() + absl::Milliseconds(5)));
  ready = true;
  EXPECT_TRUE(Clock::Real()->AwaitWithDeadline(mu, absl::Condition(&ready), absl::Now()));
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

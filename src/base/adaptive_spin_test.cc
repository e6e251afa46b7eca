#include "base/adaptive_spin.h"

#include <atomic>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(AdaptiveSpinTest, ReturnsTrueAsSoonAsTheEventIsSeen) {
  AdaptiveSpin spin(absl::Seconds(10), /*cpus=*/2);
  int calls = 0;
  EXPECT_TRUE(spin.Spin([&] { return ++calls == 3; }));
  EXPECT_EQ(calls, 3);
}

TEST(AdaptiveSpinTest, SeesAnEventAnotherThreadMakes) {
  AdaptiveSpin spin(absl::Seconds(10), /*cpus=*/2);
  std::atomic<bool> flag{false};
  std::thread other([&] {
    absl::SleepFor(absl::Milliseconds(1));
    flag.store(true);
  });
  EXPECT_TRUE(spin.Spin([&] { return flag.load(); }));
  other.join();
}

TEST(AdaptiveSpinTest, NeverSpinsWithOneCpu) {
  AdaptiveSpin spin(absl::Seconds(10), /*cpus=*/1);
  int calls = 0;
  EXPECT_FALSE(spin.Spin([&] { return ++calls > 0; }));
  EXPECT_EQ(calls, 0);
}

// Counts the waits that skip spinning (`done` never called) before the next one spins again.
int SkippedBeforeNextSpin(AdaptiveSpin& spin) {
  int skipped = 0;
  while (true) {
    bool called = false;
    spin.Spin([&] {
      called = true;
      return false;
    });
    if (called) return skipped;
    ++skipped;
  }
}

TEST(AdaptiveSpinTest, MissesInARowSkipTwiceAsManyWaitsEachTimeUpToTheCap) {
  AdaptiveSpin spin(absl::Microseconds(1), /*cpus=*/2);
  EXPECT_FALSE(spin.Spin([] { return false; }));  // the first miss
  EXPECT_EQ(SkippedBeforeNextSpin(spin), 2);      // ... then the second
  EXPECT_EQ(SkippedBeforeNextSpin(spin), 4);
  EXPECT_EQ(SkippedBeforeNextSpin(spin), 8);
  for (int i = 0; i < 6; ++i) SkippedBeforeNextSpin(spin);
  EXPECT_EQ(SkippedBeforeNextSpin(spin), AdaptiveSpin::kMaxSkipped);
}

TEST(AdaptiveSpinTest, AHitEndsTheBackOff) {
  AdaptiveSpin spin(absl::Microseconds(1), /*cpus=*/2);
  EXPECT_FALSE(spin.Spin([] { return false; }));
  EXPECT_EQ(SkippedBeforeNextSpin(spin), 2);  // its spin missed too: the next 4 skip
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(spin.Spin([] { return true; }));
  EXPECT_TRUE(spin.Spin([] { return true; }));  // a hit
  // The next miss counts as the first in a row again: 2 skipped after it, not 8.
  EXPECT_FALSE(spin.Spin([] { return false; }));
  EXPECT_EQ(SkippedBeforeNextSpin(spin), 2);
}

}  // namespace
}  // namespace tessera

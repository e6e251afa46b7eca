#include "objects/arena_allocator.h"

#include <map>
#include <random>

#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(ArenaAllocatorTest, AllocatesAlignedAndRefusesWhatDoesNotFit) {
  ArenaAllocator a(1024);
  auto x = a.Allocate(1);
  auto y = a.Allocate(100);
  ASSERT_TRUE(x && y);
  EXPECT_EQ(*x % ArenaAllocator::kAlignment, 0u);
  EXPECT_EQ(*y % ArenaAllocator::kAlignment, 0u);
  EXPECT_EQ(a.allocated_bytes(), 64u + 128u);
  EXPECT_FALSE(a.Allocate(1024).has_value());
  EXPECT_TRUE(a.Allocate(0).has_value());  // an empty object still gets its own offset
}

TEST(ArenaAllocatorTest, FreeMergesNeighbours) {
  ArenaAllocator a(64 * 4);
  auto b0 = *a.Allocate(64), b1 = *a.Allocate(64), b2 = *a.Allocate(64), b3 = *a.Allocate(64);
  EXPECT_FALSE(a.Allocate(1).has_value());
  a.Free(b1);
  a.Free(b3);
  EXPECT_FALSE(a.Allocate(128).has_value());  // fragmented
  a.Free(b2);                                 // merges b1..b3
  EXPECT_EQ(a.largest_free_block(), 192u);
  a.Free(b0);
  EXPECT_EQ(a.free_block_count(), 1u);
  EXPECT_EQ(a.largest_free_block(), 256u);
  EXPECT_TRUE(a.Allocate(256).has_value());
}

TEST(ArenaAllocatorTest, RandomAllocFreeNeverOverlapsAndRestoresFully) {
  std::mt19937 rng(7);
  ArenaAllocator a(1 << 20);
  std::map<uint64_t, uint64_t> live;  // offset -> rounded size
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 2 == 0) {
      const uint64_t size = rng() % 20000;
      auto off = a.Allocate(size);
      if (!off) continue;
      const uint64_t len = ArenaAllocator::RoundUp(size);
      ASSERT_LE(*off + len, a.capacity());
      auto next = live.lower_bound(*off);
      if (next != live.end()) {
        ASSERT_LE(*off + len, next->first);
      }
      if (next != live.begin()) {
        ASSERT_LE(std::prev(next)->first + std::prev(next)->second, *off);
      }
      live[*off] = len;
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      a.Free(it->first);
      live.erase(it);
    }
  }
  for (const auto& [off, len] : live) a.Free(off);
  EXPECT_EQ(a.allocated_bytes(), 0u);
  EXPECT_EQ(a.free_block_count(), 1u);
}

TEST(ArenaAllocatorDeathTest, DoubleFreeIsOurBug) {
  ArenaAllocator a(1024);
  auto x = *a.Allocate(10);
  a.Free(x);
  EXPECT_DEATH(a.Free(x), "");
}

}  // namespace
}  // namespace tessera

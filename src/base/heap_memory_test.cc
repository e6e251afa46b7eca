#include "base/heap_memory.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace tessera {
namespace {

constexpr int64_t kMiB = 1024 * 1024;

// On a thread of its own (its own malloc arena): ~128 MiB in 512-byte blocks, every 64th kept
// alive (so no heap top can shrink), the rest freed. Returns the kept blocks.
std::vector<std::unique_ptr<std::string>> FragmentAnArena() {
  std::vector<std::unique_ptr<std::string>> kept;
  std::thread([&kept] {
    std::vector<std::unique_ptr<std::string>> all;
    for (int i = 0; i < 256 * 1024; ++i) all.push_back(std::make_unique<std::string>(480, 'x'));
    for (size_t i = 0; i < all.size(); i += 64) kept.push_back(std::move(all[i]));
  }).join();
  return kept;
}

TEST(HeapMemoryTest, ResidentBytesReadsTheProcessSize) {
  const int64_t before = ResidentBytes();
  EXPECT_GT(before, kMiB);
  std::vector<char> touched(64 * kMiB, 1);
  EXPECT_GE(ResidentBytes(), before + 60 * kMiB);
}

TEST(HeapMemoryTest, FreedBlocksBetweenLiveOnesGoBackToTheSystem) {
  const int64_t base = ResidentBytes();
  auto kept = FragmentAnArena();
  const int64_t fragmented = ResidentBytes();
  ASSERT_GE(fragmented - base, 100 * kMiB) << "the freed blocks stay resident without a release";
  ReleaseFreeHeapMemory();
  EXPECT_LE(ResidentBytes() - base, 32 * kMiB);
  EXPECT_EQ(kept.size(), 4096u);
  EXPECT_EQ(*kept.back(), std::string(480, 'x'));  // what is in use is untouched
}

}  // namespace
}  // namespace tessera

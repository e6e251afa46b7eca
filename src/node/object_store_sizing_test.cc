#include "node/object_store_sizing.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

// The host of the defect report: 24 GiB, 19.1 GiB available, 1.28 GiB of other stores.
HostMemory ReportedHost() {
  return HostMemory{.total_bytes = 24684092ull * 1024,
                    .available_bytes = 20027802ull * 1024,
                    .shared_bytes = 1342177ull * 1024};
}

TEST(ObjectStoreSizingTest, ATooBigStoreIsRefusedNamingTheSizeTheHostAndOtherStores) {
  auto size = DecideObjectStoreSize({.requested_bytes = 30 * kGiB}, ReportedHost());
  EXPECT_EQ(size.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(size.status().message(),
            "--object-store-memory 30 GiB does not fit: this host has 23.54 GiB of memory, "
            "19.1 GiB available, and 1.28 GiB in shared memory (other object stores are part of "
            "it); at most 17.92 GiB fits, keeping 1.18 GiB free");
}

TEST(ObjectStoreSizingTest, ARequestedSizeMustLeaveTheMarginAvailable) {
  const HostMemory host = ReportedHost();
  const uint64_t room = host.available_bytes - SafetyMarginBytes(host);
  EXPECT_EQ(*DecideObjectStoreSize({.requested_bytes = room}, host), room);
  EXPECT_FALSE(DecideObjectStoreSize({.requested_bytes = room + 1}, host).ok());
}

TEST(ObjectStoreSizingTest, TheMarginIsFivePercentOfTheHostAndAtLeast256MiB) {
  EXPECT_EQ(SafetyMarginBytes({.total_bytes = 100 * kGiB}), 5 * kGiB);
  EXPECT_EQ(SafetyMarginBytes({.total_bytes = 2 * kGiB}), 256 * kMiB);
  // A host with less available than the margin has room for nothing.
  auto size = DecideObjectStoreSize(
      {.requested_bytes = kMiB},
      {.total_bytes = 2 * kGiB, .available_bytes = 200 * kMiB, .shared_bytes = 0});
  EXPECT_THAT(size.status().message(), HasSubstr("; nothing fits, keeping 256 MiB free"));
}

TEST(ObjectStoreSizingTest, ZeroMeansNoStoreAndIsNeverRefused) {
  EXPECT_EQ(*DecideObjectStoreSize({.requested_bytes = 0, .agents = 20},
                                   {.total_bytes = kGiB, .available_bytes = 0}),
            0u);
}

// docs/objects.md: `--object-store-memory 0` turns the store off, so a bare 0 needs no unit.
TEST(ObjectStoreSizingTest, TheFlagTakesABareZeroForNoStoreAndRefusesBadSizesInOneLine) {
  EXPECT_EQ(*ParseObjectStoreMemoryFlag("0"), 0u);
  EXPECT_EQ(*ParseObjectStoreMemoryFlag("0B"), 0u);
  EXPECT_EQ(*ParseObjectStoreMemoryFlag("512MiB"), uint64_t{512} << 20);
  for (const char* bad : {"-1GiB", "-0", "lots", "64", "1.5", ""}) {
    auto parsed = ParseObjectStoreMemoryFlag(bad);
    ASSERT_TRUE(absl::IsInvalidArgument(parsed.status())) << bad;
    const std::string message(parsed.status().message());
    EXPECT_THAT(message, ::testing::StartsWith("--object-store-memory: "));
    EXPECT_THAT(message, ::testing::EndsWith("; 0 turns the store off"));
    EXPECT_EQ(message.find('\n'), std::string::npos) << bad;
  }
}

TEST(ObjectStoreSizingTest, StoresStartingTogetherMustFitTogether) {
  const HostMemory host = ReportedHost();
  EXPECT_TRUE(DecideObjectStoreSize({.requested_bytes = 2 * kGiB, .agents = 8}, host).ok());
  auto size = DecideObjectStoreSize({.requested_bytes = 2 * kGiB, .agents = 20}, host);
  EXPECT_THAT(std::string(size.status().message()),
              HasSubstr("--object-store-memory 2 GiB for each of 20 node agents (40 GiB in all) "
                        "does not fit: this host has 23.54 GiB"));
  EXPECT_THAT(size.status().message(), HasSubstr("; at most 917.66 MiB each fits"));
  // A product past 2^64 is refused, not wrapped around to a small number.
  EXPECT_FALSE(
      DecideObjectStoreSize({.requested_bytes = uint64_t{1} << 62, .agents = 8}, host).ok());
}

TEST(ObjectStoreSizingTest, TheDefaultIsThirtyPercentOfWhatIsAvailable) {
  const HostMemory small{.total_bytes = 4 * kGiB, .available_bytes = 3 * kGiB};
  // 30% of 3 GiB = 921.6 MiB, rounded down to whole MiB.
  EXPECT_EQ(*DecideObjectStoreSize({}, small), 921 * kMiB);
}

TEST(ObjectStoreSizingTest, TheDefaultIsCappedAt2GiB) {
  EXPECT_EQ(*DecideObjectStoreSize({}, ReportedHost()), kDefaultStoreCapBytes);
  EXPECT_EQ(kDefaultStoreCapBytes, 2 * kGiB);
}

TEST(ObjectStoreSizingTest, TheDefaultIsDividedAmongTheAgentsStartingTogether) {
  // 2 GiB (the cap) among 20 agents: 102.4 MiB, rounded down.
  EXPECT_EQ(*DecideObjectStoreSize({.agents = 20}, ReportedHost()), 102 * kMiB);
  const HostMemory small{.total_bytes = 4 * kGiB, .available_bytes = 3 * kGiB};
  EXPECT_EQ(*DecideObjectStoreSize({.agents = 3}, small), 307 * kMiB);
}

TEST(ObjectStoreSizingTest, TheDefaultKeepsTheMarginFree) {
  // 30% of 300 MiB is 90 MiB, but the margin (256 MiB) leaves only 44 MiB.
  const HostMemory tiny{.total_bytes = kGiB, .available_bytes = 300 * kMiB};
  EXPECT_EQ(*DecideObjectStoreSize({}, tiny), 44 * kMiB);
}

TEST(ObjectStoreSizingTest, ADefaultShareTooSmallToUseIsRefused) {
  auto size = DecideObjectStoreSize({.agents = 600}, ReportedHost());
  EXPECT_EQ(size.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(size.status().message(),
            "the default object store (30% of the available memory, at most 2 GiB, keeping "
            "1.18 GiB free, split among 600 node agents: 3.41 MiB each) is below 4 MiB: this "
            "host has 23.54 GiB of memory, 19.1 GiB available, and 1.28 GiB in shared memory "
            "(other object stores are part of it); give --object-store-memory SIZE, or 0 for no "
            "store");
  EXPECT_THAT(DecideObjectStoreSize({}, {.total_bytes = kGiB, .available_bytes = 200 * kMiB})
                  .status()
                  .message(),
              HasSubstr("at most 2 GiB, keeping 256 MiB free: 0 B) is below 4 MiB"));
}

TEST(ObjectStoreSizingTest, AgentsMustBeCounted) {
  EXPECT_EQ(DecideObjectStoreSize({.agents = 0}, ReportedHost()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ObjectStoreSizingTest, ParsesMeminfo) {
  auto memory = ParseMeminfo(
      "MemTotal:       24684092 kB\nMemFree:        19365168 kB\nMemAvailable:   24212756 kB\n"
      "Shmem:              8856 kB\nShmemHugePages:        0 kB\n",
      "/proc/meminfo");
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(memory->total_bytes, 24684092ull * 1024);
  EXPECT_EQ(memory->available_bytes, 24212756ull * 1024);
  EXPECT_EQ(memory->shared_bytes, 8856ull * 1024);  // not ShmemHugePages
}

TEST(ObjectStoreSizingTest, MeminfoWithoutAFieldOrWithAMalformedOneIsAnError) {
  EXPECT_EQ(
      ParseMeminfo("MemTotal: 1024 kB\nShmem: 0 kB\n", "fake/proc/meminfo").status().message(),
      "fake/proc/meminfo has no MemAvailable line, so the object store cannot be sized "
      "against this host's memory");
  EXPECT_EQ(
      ParseMeminfo("MemTotal: lots kB\nMemAvailable: 1 kB\nShmem: 0 kB\n", "m").status().message(),
      "m: MemTotal is \"lots kB\", not a number of kB");
  EXPECT_FALSE(ParseMeminfo("MemTotal: 1024 MB\nMemAvailable: 1 kB\nShmem: 0 kB\n", "m").ok());
}

TEST(ObjectStoreSizingTest, ReadsMeminfoThroughTheSysroot) {
  const std::filesystem::path root = std::filesystem::temp_directory_path() /
                                     ("object_store_sizing_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(root / "proc");
  auto missing = ReadHostMemory(Sysroot(root.string()));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("/proc/meminfo"));
  EXPECT_THAT(missing.status().message(), HasSubstr(root.string()));
  std::ofstream(root / "proc/meminfo")
      << "MemTotal: 2048 kB\nMemAvailable: 1024 kB\nShmem: 512 kB\n";
  auto memory = ReadHostMemory(Sysroot(root.string()));
  std::filesystem::remove_all(root);
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(memory->total_bytes, 2048u * 1024);
  EXPECT_EQ(memory->available_bytes, 1024u * 1024);
  EXPECT_EQ(memory->shared_bytes, 512u * 1024);
}

// A fake tree with a 4 GiB host whose agent runs in a memory cgroup.
class CgroupTree {
 public:
  CgroupTree()
      : root_(std::filesystem::temp_directory_path() /
              ("object_store_cgroup_test_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(root_ / "proc/self");
    std::ofstream(root_ / "proc/meminfo")
        << "MemTotal: 4194304 kB\nMemAvailable: 3145728 kB\nShmem: 0 kB\n";
  }
  ~CgroupTree() { std::filesystem::remove_all(root_); }
  void Write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories((root_ / path).parent_path());
    std::ofstream(root_ / path) << text;
  }
  Sysroot sysroot() const { return Sysroot(root_.string()); }

 private:
  std::filesystem::path root_;
};

TEST(ObjectStoreSizingTest, AnAgentInACgroupV2IsSizedAgainstItsLimit) {
  CgroupTree tree;
  tree.Write("proc/self/cgroup", "0::/agents/n1\n");
  tree.Write("sys/fs/cgroup/agents/n1/memory.max", "max\n");
  tree.Write("sys/fs/cgroup/agents/memory.max", "1073741824\n");  // 1 GiB above it binds
  tree.Write("sys/fs/cgroup/agents/memory.current", "268435456\n");
  auto memory = ReadHostMemory(tree.sysroot());
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(memory->total_bytes, 1 * kGiB);
  EXPECT_EQ(memory->available_bytes, 768 * kMiB);
  EXPECT_EQ(memory->cgroup, "/agents");
  auto refused = DecideObjectStoreSize({.requested_bytes = 1 * kGiB}, *memory);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("within memory cgroup /agents, limited to 1 GiB and using 256 MiB"));
  EXPECT_TRUE(DecideObjectStoreSize({.requested_bytes = 256 * kMiB}, *memory).ok());
}

TEST(ObjectStoreSizingTest, AnAgentInACgroupV1MemoryControllerIsSizedAgainstItsLimit) {
  CgroupTree tree;
  tree.Write("proc/self/cgroup", "5:cpu,cpuacct:/\n4:memory:/job\n0::/\n");
  tree.Write("sys/fs/cgroup/memory/job/memory.limit_in_bytes", "536870912\n");
  tree.Write("sys/fs/cgroup/memory/job/memory.usage_in_bytes", "0\n");
  auto memory = ReadHostMemory(tree.sysroot());
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(memory->total_bytes, 512 * kMiB);
  EXPECT_EQ(memory->available_bytes, 512 * kMiB);
}

TEST(ObjectStoreSizingTest, AnUnlimitedOrUnreadableCgroupLeavesTheHostsFigures) {
  CgroupTree tree;
  tree.Write("proc/self/cgroup", "4:memory:/job\n");
  // cgroup v1's "no limit" is a huge page-rounded number.
  tree.Write("sys/fs/cgroup/memory/job/memory.limit_in_bytes", "9223372036854771712\n");
  auto memory = ReadHostMemory(tree.sysroot());
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(memory->total_bytes, 4 * kGiB);
  EXPECT_EQ(memory->available_bytes, 3 * kGiB);
  EXPECT_TRUE(memory->cgroup.empty());
  tree.Write("proc/self/cgroup", "0::/gone\n");  // no such cgroup folder
  memory = ReadHostMemory(tree.sysroot());
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(memory->total_bytes, 4 * kGiB);
}

TEST(ObjectStoreSizingTest, TheLiveHostHasMeminfo) {
  auto memory = ReadHostMemory(Sysroot("/"));
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_GT(memory->total_bytes, 0u);
  EXPECT_LE(memory->available_bytes, memory->total_bytes);
}

}  // namespace
}  // namespace tessera

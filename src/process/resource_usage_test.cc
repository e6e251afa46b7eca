// Per-worker resource figures from a fake /proc and a fake cgroup directory (exact values, which
// source wins, what falls back), and from this test's own process and cgroup.
#include "process/resource_usage.h"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "process/cgroup.h"
#include "process/file_util.h"
#include "process/test_support.h"

namespace tessera {
namespace {

using ::tessera::testing::TempDir;
using ::tessera::testing::WriteText;
using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Optional;

// /proc/<pid>/stat of a worker whose command holds spaces and parentheses: utime 250, stime 50,
// cutime 100, cstime 0 ticks; rss 3000 pages.
constexpr char kStat[] =
    "4242 (py (worker) 1) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 100 0 20 0 9 0 12345 "
    "900000000 3000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n";
constexpr char kStatus[] =
    "Name:\tpython3\nState:\tS (sleeping)\nVmPeak:\t 99999 kB\n"
    "VmRSS:\t   20480 kB\nThreads:\t9\n";

const long kTick = ::sysconf(_SC_CLK_TCK);
const long kPage = ::sysconf(_SC_PAGESIZE);

class FakeWorkerTest : public ::testing::Test {
 protected:
  FakeWorkerTest() {
    std::filesystem::create_directories(dir_.path() + "/proc/4242");
    std::filesystem::create_directories(dir_.path() + "/cg");
    WriteText(dir_.path() + "/proc/4242/stat", kStat);
    WriteText(dir_.path() + "/proc/4242/status", kStatus);
  }
  ResourceUsageSource Source(bool with_cgroup) const {
    return {.pid = 4242,
            .cgroup_dir = with_cgroup ? dir_.path() + "/cg" : "",
            .proc_root = dir_.path() + "/proc"};
  }

  TempDir dir_;
};

TEST_F(FakeWorkerTest, WithoutACgroupTheProcessFilesGiveCpuAndResidentMemory) {
  auto usage = ReadResourceUsage(Source(false));
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_THAT(usage->cpu_seconds, Optional(DoubleNear(400.0 / kTick, 1e-12)));
  EXPECT_THAT(usage->memory_bytes, Optional(20480u * 1024));  // VmRSS, not VmPeak
  EXPECT_EQ(usage->peak_memory_bytes, std::nullopt);
  EXPECT_EQ(usage->cpu_source, "proc");
  EXPECT_EQ(usage->memory_source, "proc");
  EXPECT_THAT(usage->warnings, IsEmpty());
}

TEST_F(FakeWorkerTest, TheCgroupWinsWhenTheWorkerHasOne) {
  WriteText(dir_.path() + "/cg/cpu.stat",
            "usage_usec 12500000\nuser_usec 10000000\nsystem_usec 2500000\n");
  WriteText(dir_.path() + "/cg/memory.current", "734003200\n");
  WriteText(dir_.path() + "/cg/memory.peak", "1073741824\n");
  auto usage = ReadResourceUsage(Source(true));
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_THAT(usage->cpu_seconds, Optional(12.5));
  EXPECT_THAT(usage->memory_bytes, Optional(734003200u));
  EXPECT_THAT(usage->peak_memory_bytes, Optional(1073741824u));
  EXPECT_EQ(usage->cpu_source, "cgroup");
  EXPECT_EQ(usage->memory_source, "cgroup");
  EXPECT_THAT(usage->warnings, IsEmpty());
}

TEST_F(FakeWorkerTest, ACgroupWithoutTheMemoryControllerTakesMemoryFromTheProcess) {
  WriteText(dir_.path() + "/cg/cpu.stat", "usage_usec 2000000\n");
  auto usage = ReadResourceUsage(Source(true));
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_THAT(usage->cpu_seconds, Optional(2.0));
  EXPECT_EQ(usage->cpu_source, "cgroup");
  EXPECT_THAT(usage->memory_bytes, Optional(20480u * 1024));
  EXPECT_EQ(usage->memory_source, "proc");
  EXPECT_THAT(usage->warnings, IsEmpty());
}

TEST_F(FakeWorkerTest, AnUnreadableCgroupFileIsAWarningAndTheProcessFillsIn) {
  WriteText(dir_.path() + "/cg/cpu.stat", "usage_usec lots\n");
  WriteText(dir_.path() + "/cg/memory.current", "max\n");
  auto usage = ReadResourceUsage(Source(true));
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_EQ(usage->cpu_source, "proc");
  EXPECT_EQ(usage->memory_source, "proc");
  EXPECT_THAT(usage->warnings, ElementsAre(HasSubstr("usage_usec has a non-integer value"),
                                           HasSubstr("\"max\" is not a byte count")));
}

TEST_F(FakeWorkerTest, WithoutVmRssTheStatRssPagesAreUsed) {
  WriteText(dir_.path() + "/proc/4242/status", "Name:\tkworker\n");
  auto usage = ReadResourceUsage(Source(false));
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_THAT(usage->memory_bytes, Optional(3000u * static_cast<uint64_t>(kPage)));
}

TEST_F(FakeWorkerTest, AGoneProcessIsNotFoundAndNoSourceIsInvalid) {
  auto gone = ReadResourceUsage({.pid = 99999, .proc_root = dir_.path() + "/proc"});
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(gone.status().message(), HasSubstr("process 99999 is gone"));
  EXPECT_EQ(ReadResourceUsage({}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ParseProcUsageTest, MalformedStatLinesAreRefused) {
  EXPECT_EQ(ParseProcUsage("4242 no parenthesis", "", 100, 4096).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseProcUsage("4242 (short) S 1 2 3", "", 100, 4096).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto ok = ParseProcUsage(kStat, "", 100, 4096);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_DOUBLE_EQ(ok->cpu_seconds, 4.0);
  EXPECT_EQ(ok->memory_bytes, 3000u * 4096);
}

TEST(ResourceUsageTest, ThisProcessHasAtLeastTheCpuTimeTheKernelReportedJustBefore) {
  struct rusage self {};
  ASSERT_EQ(::getrusage(RUSAGE_SELF, &self), 0);
  const double before = static_cast<double>(self.ru_utime.tv_sec + self.ru_stime.tv_sec) +
                        (self.ru_utime.tv_usec + self.ru_stime.tv_usec) / 1e6;
  auto usage = ReadResourceUsage({.pid = ::getpid()});
  ASSERT_TRUE(usage.ok()) << usage.status();
  // /proc counts in clock ticks: allow one tick per field for rounding.
  EXPECT_GE(*usage->cpu_seconds, before - 2.0 / kTick);
  // VmRSS agrees with the resident pages of /proc/self/statm (a MiB of slack for what the
  // process touched between the two reads).
  auto statm = ReadWholeFile("/proc/self/statm");
  ASSERT_TRUE(statm.ok());
  const std::vector<std::string> pages = absl::StrSplit(*statm, ' ');
  ASSERT_GE(pages.size(), 2u);
  const double resident = std::stod(pages[1]) * static_cast<double>(kPage);
  EXPECT_THAT(static_cast<double>(*usage->memory_bytes), DoubleNear(resident, 1 << 20));
  EXPECT_EQ(usage->cpu_source, "proc");
}

TEST(ResourceUsageTest, ThisProcessesOwnCgroupCountsAtLeastItsCpuTime) {
  auto own = ReadWholeFile("/proc/self/cgroup");
  auto mounts = ReadWholeFile("/proc/self/mounts");
  auto path = own.ok() ? ParseCgroupV2Path(*own) : absl::StatusOr<std::string>(own.status());
  auto mount =
      mounts.ok() ? ParseCgroup2MountPoint(*mounts) : absl::StatusOr<std::string>(mounts.status());
  const std::string dir = path.ok() && mount.ok() ? *mount + *path : "";
  if (dir.empty() || !std::filesystem::exists(dir + "/cpu.stat")) {
    GTEST_SKIP() << "no cgroup v2 cpu.stat for this process";
  }
  auto mine = ReadResourceUsage({.pid = ::getpid()});
  auto group = ReadResourceUsage({.pid = ::getpid(), .cgroup_dir = dir});
  ASSERT_TRUE(mine.ok() && group.ok());
  EXPECT_EQ(group->cpu_source, "cgroup");
  // The cgroup holds this process (and maybe others): at least its own time, less rounding.
  EXPECT_GE(*group->cpu_seconds, *mine->cpu_seconds - 2.0 / kTick);
}

}  // namespace
}  // namespace tessera

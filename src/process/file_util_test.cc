#include "process/file_util.h"

#include <errno.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

TEST(FileUtilTest, KeyedCounterIsFoundByExactKey) {
  std::string vmstat = "oom_kill_extra 4\noom_kill 17\npgfault 3\n";
  EXPECT_EQ(*FindKeyedCounter(vmstat, "oom_kill"), 17);
  EXPECT_EQ(*FindKeyedCounter("low 0\nhigh 0\nmax 2\noom 1\noom_kill 1\n", "oom_kill"), 1);
  EXPECT_EQ(FindKeyedCounter(vmstat, "missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(FindKeyedCounter("oom_kill many\n", "oom_kill").status().message(),
            "counter oom_kill has a non-integer value \"many\"");
}

TEST(FileUtilTest, ReadsKernelFilesWhoseSizeIsZero) {
  auto status = ReadWholeFile("/proc/self/status");
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_THAT(*status, HasSubstr("Pid:"));
}

TEST(FileUtilTest, ErrorsNameThePath) {
  auto missing = ReadWholeFile("/nonexistent/file");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "cannot open /nonexistent/file: No such file or directory");
  // Control files are never created by a write.
  EXPECT_EQ(WriteControlFile("/nonexistent/cgroup.procs", "0").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ErrnoStatus(EACCES, "x").code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace tessera

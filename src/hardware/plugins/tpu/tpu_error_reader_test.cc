// TPU device messages from the runtime's log folder (a folder the test writes, as libtpu
// would): only what was written during the worker's life, error lines first, at most three,
// nothing when the folder is absent, and links never followed.
#include "hardware/plugins/tpu/tpu_error_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "hardware/plugins/tpu/tpu_plugin.h"
#include "hardware/testing/fake_tree.h"
#include "hardware/testing/plugin_test_support.h"

namespace tessera::testing {
namespace {

void Append(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::app) << text;
}

class TpuErrorReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    logs_ = scratch_.Path("/tpu_logs");
    std::filesystem::create_directories(logs_);
    reader_ = MakeTpuPlugin()->OpenErrorWatch(
        DeviceErrorContext{Sysroot(scratch_.root()), {.tpu_log_dir = logs_}});
  }
  const std::vector<Device> chips_ = {{.family = "tpu", .index = 0}, {.family = "tpu", .index = 1}};
  FakeTree scratch_;
  std::string logs_;
  std::unique_ptr<DeviceErrorReader> reader_;
};

TEST_F(TpuErrorReaderTest, OnlyLinesWrittenDuringTheWorkersLifeErrorsFirst) {
  const std::string info = logs_ + "/tpu_driver.host.me.log.INFO.20261203-140509.77";
  Append(info, "I1203 14:05:09.000001    77 init.cc:1] before the worker\n");
  const DeviceErrorSnapshot start = reader_->Snapshot(chips_, absl::Now());
  Append(info,
         "I1203 14:05:10.000001    77 run.cc:5] compiling\n"
         "E1203 14:05:11.000001    77 tpu.cc:9] TPU chip 1 is unhealthy: HBM ECC\n"
         "I1203 14:05:11.000002    77 run.cc:6] shutting down\n");
  EXPECT_THAT(reader_->MessagesSince(start, chips_, absl::Now()).messages,
              ElementsAre("TPU runtime log tpu_driver.host.me.log.INFO.20261203-140509.77: "
                          "E1203 14:05:11.000001    77 tpu.cc:9] "
                          "TPU chip 1 is unhealthy: HBM ECC"));
}

TEST_F(TpuErrorReaderTest, WithoutErrorLinesTheNewestThreeLinesOfANewFile) {
  const DeviceErrorSnapshot start = reader_->Snapshot(chips_, absl::Now() - absl::Seconds(5));
  const std::string log = logs_ + "/runtime.log";
  Append(log, "one\ntwo\nthree\nfour\n");
  EXPECT_THAT(reader_->MessagesSince(start, chips_, absl::Now()).messages,
              ElementsAre(HasSubstr(": two"), HasSubstr(": three"), HasSubstr(": four")));
}

TEST_F(TpuErrorReaderTest, NothingWrittenNothingSaidAndNoFolderNoMessage) {
  Append(logs_ + "/old.log", "E1203 14:00:00.000001    77 x.cc:1] from an earlier program\n");
  const DeviceErrorSnapshot start = reader_->Snapshot(chips_, absl::Now() + absl::Seconds(5));
  EXPECT_THAT(reader_->MessagesSince(start, chips_, absl::Now()).messages, IsEmpty());

  auto absent = MakeTpuPlugin()->OpenErrorWatch(
      DeviceErrorContext{Sysroot(scratch_.root()), {.tpu_log_dir = logs_ + "/none"}});
  const DeviceErrorReport report =
      absent->MessagesSince(absent->Snapshot(chips_, absl::Now()), chips_, absl::Now());
  EXPECT_THAT(report.messages, IsEmpty());
  EXPECT_THAT(report.warnings, IsEmpty());
}

TEST_F(TpuErrorReaderTest, ALinkInTheFolderIsNotFollowed) {
  const std::string outside = scratch_.Write("/secret", "");
  const DeviceErrorSnapshot start = reader_->Snapshot(chips_, absl::Now() - absl::Seconds(5));
  std::filesystem::create_symlink(outside, logs_ + "/link.log");
  Append(outside, "E1203 14:05:11.000001    77 x.cc:1] not a log of the runtime\n");
  EXPECT_THAT(reader_->MessagesSince(start, chips_, absl::Now()).messages, IsEmpty());
}

TEST(TpuLogDirTest, TheLiveMachinesFolderOrNoneOnAFakeTree) {
  EXPECT_EQ(TpuLogDir(DeviceErrorContext{Sysroot("/"), {}}), "/tmp/tpu_logs");
  EXPECT_EQ(TpuLogDir(DeviceErrorContext{Sysroot(FixturePath("tpu-v5e-8")), {}}), "");
}

}  // namespace
}  // namespace tessera::testing

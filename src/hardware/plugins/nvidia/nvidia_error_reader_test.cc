// The nvidia family's device messages on the H100 fixture, with the kernel log a file the test
// writes /dev/kmsg records into: an Xid record reaches the worker holding that GPU only, records
// from before the snapshot do not, lost records are said, and a fake tree reads no kernel log.
#include "hardware/plugins/nvidia/nvidia_error_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "hardware/plugins/nvidia/nvidia_plugin.h"
#include "hardware/testing/fake_tree.h"
#include "hardware/testing/plugin_test_support.h"

namespace tessera::testing {
namespace {

void Append(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::app) << text;
}

std::string XidRecord(int seq, const std::string& slot, int code, const std::string& detail) {
  return "3," + std::to_string(seq) + ",5000000,-;NVRM: Xid (PCI:" + slot +
         "): " + std::to_string(code) + ", pid=4242, name=python3, " + detail + "\n";
}

class NvidiaErrorReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    devices_ = DetectOnFixture(*MakeNvidiaPlugin(), "h100-sxm-8");
    ASSERT_EQ(devices_.size(), 8u);
    kmsg_ = scratch_.Write("/kmsg", "6,1,10,-;NVRM: Xid (PCI:" + Slot(0) + "): 48, old\n");
    reader_ = MakeNvidiaPlugin()->OpenErrorWatch(DeviceErrorContext{
        Sysroot(FixturePath("h100-sxm-8")), DeviceErrorOptions{.kernel_log = kmsg_}});
  }
  // "0000:18:00" of GPU i's "0000:18:00.0": how Xid records name it.
  std::string Slot(size_t i) const {
    return devices_[i].pci_bus_id.substr(0, devices_[i].pci_bus_id.rfind('.'));
  }
  std::vector<Device> Only(size_t i) const { return {devices_[i]}; }

  std::vector<Device> devices_;
  FakeTree scratch_;
  std::string kmsg_;
  std::unique_ptr<DeviceErrorReader> reader_;
};

TEST_F(NvidiaErrorReaderTest, AnXidReachesTheWorkerOfThatGpuOnly) {
  const DeviceErrorSnapshot gpu0 = reader_->Snapshot(Only(0), kFirstReading);
  const DeviceErrorSnapshot gpu1 = reader_->Snapshot(Only(1), kFirstReading);
  Append(kmsg_, "6,2,20,-;nvidia-modeset: something else\n" +
                    XidRecord(3, Slot(0), 79, "GPU has fallen off the bus."));
  const DeviceErrorReport mine = reader_->MessagesSince(gpu0, Only(0), kFirstReading);
  EXPECT_THAT(mine.messages, ElementsAre("GPU 0 (" + devices_[0].pci_bus_id +
                                         "): Xid 79, GPU has fallen off the bus"));
  EXPECT_THAT(mine.warnings, IsEmpty());
  EXPECT_THAT(reader_->MessagesSince(gpu1, Only(1), kFirstReading).messages, IsEmpty());
}

TEST_F(NvidiaErrorReaderTest, RecordsBeforeTheSnapshotAreNotTheWorkersAndPollKeepsThem) {
  Append(kmsg_, XidRecord(2, Slot(2), 13, "Graphics SM Warp Exception"));
  reader_->Poll();
  const DeviceErrorSnapshot start = reader_->Snapshot(Only(2), kFirstReading);
  Append(kmsg_, XidRecord(3, Slot(2), 94, "Contained ECC error."));
  reader_->Poll();  // read between the snapshot and the exit
  EXPECT_THAT(reader_->MessagesSince(start, Only(2), kFirstReading).messages,
              ElementsAre(HasSubstr("Xid 94, Contained ECC error")));
}

TEST_F(NvidiaErrorReaderTest, LostRecordsAreSaid) {
  Append(kmsg_, XidRecord(2, Slot(0), 13, "x"));
  const DeviceErrorSnapshot start = reader_->Snapshot(Only(0), kFirstReading);
  Append(kmsg_, XidRecord(9, Slot(0), 79, "GPU has fallen off the bus."));  // 3..8 lost
  const DeviceErrorReport report = reader_->MessagesSince(start, Only(0), kFirstReading);
  EXPECT_THAT(report.messages, ElementsAre(HasSubstr("Xid 79")));
  EXPECT_THAT(report.warnings, ElementsAre(HasSubstr("6 kernel log records were lost")));
}

TEST(NvidiaErrorReaderNoLogTest, AFakeTreeReadsNoKernelLogAndAnUnreadableOneIsSaid) {
  const std::vector<Device> devices = DetectOnFixture(*MakeNvidiaPlugin(), "h100-sxm-8");
  auto quiet = MakeNvidiaPlugin()->OpenErrorWatch(
      DeviceErrorContext{Sysroot(FixturePath("h100-sxm-8")), {}});
  const DeviceErrorSnapshot start = quiet->Snapshot(devices, kFirstReading);
  const DeviceErrorReport nothing = quiet->MessagesSince(start, devices, kFirstReading);
  EXPECT_THAT(nothing.messages, IsEmpty());
  EXPECT_THAT(nothing.warnings, IsEmpty());

  auto unreadable = MakeNvidiaPlugin()->OpenErrorWatch(
      DeviceErrorContext{Sysroot(FixturePath("h100-sxm-8")), {.kernel_log = "/nonexistent/kmsg"}});
  const DeviceErrorReport said = unreadable->MessagesSince(
      unreadable->Snapshot(devices, kFirstReading), devices, kFirstReading);
  EXPECT_THAT(said.warnings, ElementsAre(HasSubstr("cannot read the kernel log")));
}

}  // namespace
}  // namespace tessera::testing

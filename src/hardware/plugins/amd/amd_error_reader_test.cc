// AMD device messages from amdgpu's RAS counters: the MI300X fixture's counts as a snapshot
// takes them, each rise reported (uncorrectable first), and counters a product cannot answer
// left out, on hand-made trees.
#include "hardware/plugins/amd/amd_error_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hardware/plugins/amd/amd_plugin.h"
#include "hardware/testing/fake_tree.h"
#include "hardware/testing/plugin_test_support.h"

namespace tessera::testing {
namespace {

using ::testing::Pair;

std::unique_ptr<DeviceErrorReader> ReaderOn(const std::string& root) {
  return MakeAmdPlugin()->OpenErrorWatch(DeviceErrorContext{Sysroot(root), {}});
}

TEST(AmdErrorReaderTest, Mi300xCountersAreTheFixturesAndARiseIsReported) {
  const std::vector<Device> devices = DetectOnFixture(*MakeAmdPlugin(), "mi300x-8");
  ASSERT_EQ(devices.size(), 8u);
  auto reader = ReaderOn(FixturePath("mi300x-8"));
  const DeviceErrorSnapshot start = reader->Snapshot(devices, kFirstReading);
  EXPECT_THAT(start.marks, Contains(Pair("3/umc/ue", 2u)));
  EXPECT_THAT(start.marks, Contains(Pair("3/umc/ce", 5u)));
  EXPECT_THAT(start.marks, Contains(Pair("0/xgmi_wafl/ue", 0u)));
  EXPECT_EQ(start.marks.size(), 8u * 5 * 2);  // 8 GPUs, 5 blocks, ue and ce
  // Nothing changed since: nothing to say.
  EXPECT_THAT(reader->MessagesSince(start, devices, kFirstReading).messages, IsEmpty());
  // As if the worker had started before GPU 3's errors.
  DeviceErrorSnapshot earlier = start;
  earlier.marks["3/umc/ue"] = 0;
  earlier.marks["3/umc/ce"] = 1;
  EXPECT_THAT(
      reader->MessagesSince(earlier, devices, kFirstReading).messages,
      ElementsAre(
          "GPU 3 (" + devices[3].pci_bus_id + "): uncorrectable ECC errors in umc rose by 2",
          "GPU 3 (" + devices[3].pci_bus_id + "): correctable ECC errors in umc rose by 4"));
}

TEST(AmdErrorReaderTest, ARiseDuringTheWorkersLifeOnlyForItsGpu) {
  FakeTree tree;
  const std::string a = tree.PciFunction({.bdf = "0000:03:00.0",
                                          .vendor = 0x1002,
                                          .device = 0x740f,
                                          .pci_class = 0x038000,
                                          .driver = "amdgpu"});
  const std::string b = tree.PciFunction({.bdf = "0000:83:00.0",
                                          .vendor = 0x1002,
                                          .device = 0x740f,
                                          .pci_class = 0x038000,
                                          .driver = "amdgpu"});
  tree.Write(a + "/ras/umc_err_count", "ue: 0\nce: 0\n");
  tree.Write(a + "/ras/gfx_err_count", "ue: 0\nce: 0\n");
  tree.Write(b + "/ras/umc_err_count", "ue: 0\nce: 0\n");
  const Device gpu0{.family = "amd", .index = 0, .pci_bus_id = "0000:03:00.0"};
  const Device gpu1{.family = "amd", .index = 1, .pci_bus_id = "0000:83:00.0"};
  auto reader = ReaderOn(tree.root());
  const DeviceErrorSnapshot first = reader->Snapshot(std::vector<Device>{gpu0}, kFirstReading);
  const DeviceErrorSnapshot second = reader->Snapshot(std::vector<Device>{gpu1}, kFirstReading);
  tree.Write(a + "/ras/gfx_err_count", "ue: 1\nce: 0\n");
  EXPECT_THAT(reader->MessagesSince(first, std::vector<Device>{gpu0}, kFirstReading).messages,
              ElementsAre("GPU 0 (0000:03:00.0): uncorrectable ECC errors in gfx rose by 1"));
  EXPECT_THAT(reader->MessagesSince(second, std::vector<Device>{gpu1}, kFirstReading).messages,
              IsEmpty());
}

TEST(AmdErrorReaderTest, CountersTheDriverCannotAnswerOrWithoutRasAreLeftOut) {
  FakeTree tree;
  const std::string fn = tree.PciFunction({.bdf = "0000:03:00.0",
                                           .vendor = 0x1002,
                                           .device = 0x740f,
                                           .pci_class = 0x038000,
                                           .driver = "amdgpu"});
  tree.Write(fn + "/ras/umc_err_count", "Query currently inaccessible\n");
  tree.Write(fn + "/ras/features", "feature mask: 0x3fff\n");
  const Device gpu{.family = "amd", .index = 0, .pci_bus_id = "0000:03:00.0"};
  const Device no_ras{.family = "amd", .index = 1, .pci_bus_id = "0000:04:00.0"};
  auto reader = ReaderOn(tree.root());
  const DeviceErrorSnapshot start =
      reader->Snapshot(std::vector<Device>{gpu, no_ras}, kFirstReading);
  EXPECT_THAT(start.marks, IsEmpty());
  tree.Write(fn + "/ras/umc_err_count", "ue: 3\nce: 0\n");
  // Unknown at the start: no rise can be told.
  const DeviceErrorReport report =
      reader->MessagesSince(start, std::vector<Device>{gpu, no_ras}, kFirstReading);
  EXPECT_THAT(report.messages, IsEmpty());
  EXPECT_THAT(report.warnings, IsEmpty());
}

}  // namespace
}  // namespace tessera::testing

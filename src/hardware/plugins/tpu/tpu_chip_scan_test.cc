#include "hardware/plugins/tpu/tpu_chip_scan.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hardware/testing/fake_tree.h"

namespace tessera {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using testing::FakeTree;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const std::string kFixtures = std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/hardware";

TpuChipScan Scan(const std::string& root, std::optional<TpuGeneration> env = std::nullopt) {
  Sysroot sysroot(root);
  PciInventory pci = PciInventory::Scan(sysroot, nullptr);
  return ScanTpuChips(sysroot, pci, env);
}

TEST(TpuChipScanTest, V6eHostThroughVfio) {
  const TpuChipScan scan = Scan(kFixtures + "/tpu-v6e-4x4-worker2");
  EXPECT_EQ(scan.probe, "vfio");
  EXPECT_THAT(scan.warnings, IsEmpty());
  ASSERT_EQ(scan.chips.size(), 4u);
  const char* bus[] = {"0000:00:04.0", "0000:00:05.0", "0000:80:04.0", "0000:80:05.0"};
  const int numa[] = {0, 0, 1, 1};
  const char* node[] = {"/dev/vfio/2", "/dev/vfio/3", "/dev/vfio/4", "/dev/vfio/5"};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(scan.chips[i].bus_id, bus[i]);
    EXPECT_EQ(scan.chips[i].numa_node, numa[i]);
    EXPECT_EQ(scan.chips[i].device_node, node[i]);
    EXPECT_EQ(scan.chips[i].generation, TpuGeneration::kV6e);
    EXPECT_EQ(scan.chips[i].device_id, 0x006f);
    EXPECT_EQ(scan.chips[i].driver, "vfio-pci");
  }
  // The DPDK gVNIC sits in a VFIO group with vendor 0x1ae0, and is still not a chip.
  EXPECT_THAT(scan.evidence, Contains(AllOf(HasSubstr("/dev/vfio/7"), HasSubstr("1ae0:0042"),
                                            HasSubstr("not counted"))));
}

TEST(TpuChipScanTest, V5eHostThroughAccel) {
  const TpuChipScan scan = Scan(kFixtures + "/tpu-v5e-8");
  EXPECT_EQ(scan.probe, "accel");
  EXPECT_THAT(scan.warnings, IsEmpty());
  ASSERT_EQ(scan.chips.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(scan.chips[i].generation, TpuGeneration::kV5litepod);
    EXPECT_EQ(scan.chips[i].device_node, "/dev/accel" + std::to_string(i));
    EXPECT_EQ(scan.chips[i].numa_node, i < 4 ? 0 : 1);
  }
  EXPECT_EQ(scan.chips[4].bus_id, "0000:80:04.0");
}

TEST(TpuChipScanTest, AccelDirectoryIsNeverATpu) {
  // NVIDIA 570+ and the kernel accel subsystem create /dev/accel/; here it holds a Gaudi node
  // whose class entry points at a Habana function.
  FakeTree t;
  const std::string gaudi = t.PciFunction(
      {.bdf = "0000:00:05.0", .vendor = 0x1da3, .device = 0x1020, .pci_class = 0x120000});
  t.DeviceNode("/dev/accel/accel0");
  t.ClassDevice(gaudi, "accel", "accel0");
  const TpuChipScan scan = Scan(t.root());
  EXPECT_THAT(scan.chips, IsEmpty());
  EXPECT_EQ(scan.probe, "");
  EXPECT_THAT(scan.evidence, Contains(HasSubstr("/dev/accel is a directory")));
}

TEST(TpuChipScanTest, AccelNodeOfAnotherVendorIsNotATpu) {
  FakeTree t;
  const std::string npu = t.PciFunction(
      {.bdf = "0000:00:0b.0", .vendor = 0x8086, .device = 0x643e, .pci_class = 0x120000});
  t.DeviceNode("/dev/accel0");
  t.ClassDevice(npu, "accel", "accel0");
  const TpuChipScan scan = Scan(t.root());
  EXPECT_THAT(scan.chips, IsEmpty());
  EXPECT_THAT(scan.evidence, Contains(HasSubstr("8086:643e) is not a Google device")));
}

TEST(TpuChipScanTest, AccelNodeWithoutClassEntryFailsClosed) {
  FakeTree t;
  t.PciFunction({.bdf = "0000:00:04.0", .vendor = 0x1ae0, .device = 0x0063, .pci_class = 0xff0000});
  t.DeviceNode("/dev/accel0");
  const TpuChipScan scan = Scan(t.root());
  EXPECT_THAT(scan.chips, IsEmpty());
  EXPECT_THAT(scan.warnings, Contains(HasSubstr("/dev/accel0: cannot map to a PCI function")));
}

TEST(TpuChipScanTest, BlueFieldVfioGroupIsNotATpu) {
  FakeTree t;
  t.PciFunction({.bdf = "0000:00:06.0",
                 .vendor = 0x15b3,
                 .device = 0xa2dc,
                 .pci_class = 0x020000,
                 .iommu_group = 9});
  t.DeviceNode("/dev/vfio/9");
  t.DeviceNode("/dev/vfio/vfio");
  const TpuChipScan scan = Scan(t.root());
  EXPECT_THAT(scan.chips, IsEmpty());
  EXPECT_THAT(scan.evidence, Contains(HasSubstr("15b3:a2dc) is not a Google device")));
}

TEST(TpuChipScanTest, UnreadableVfioGroupFailsClosed) {
  FakeTree t;
  t.DeviceNode("/dev/vfio/3");  // no /sys/kernel/iommu_groups/3
  // A group whose TPU function sits beside a function with no vendor file: the group is unknown.
  t.PciFunction({.bdf = "0000:00:04.0",
                 .vendor = 0x1ae0,
                 .device = 0x006f,
                 .pci_class = 0xff0000,
                 .iommu_group = 4});
  t.Mkdir("/sys/kernel/iommu_groups/4/devices/0000:00:04.1");
  t.DeviceNode("/dev/vfio/4");
  const TpuChipScan scan = Scan(t.root());
  EXPECT_THAT(scan.chips, IsEmpty());
  EXPECT_THAT(scan.warnings,
              Contains(AllOf(HasSubstr("VFIO group 3: cannot list"), HasSubstr("not counted"))));
  EXPECT_THAT(scan.warnings, Contains(AllOf(HasSubstr("VFIO group 4: cannot read 0000:00:04.1"),
                                            HasSubstr("not counted"))));
}

TEST(TpuChipScanTest, UnknownGoogleDeviceNeedsTheEnvironment) {
  FakeTree t;
  t.PciFunction({.bdf = "0000:00:04.0",
                 .vendor = 0x1ae0,
                 .device = 0x00ff,
                 .pci_class = 0xff0000,
                 .iommu_group = 2});
  t.DeviceNode("/dev/vfio/2");
  const TpuChipScan alone = Scan(t.root());
  EXPECT_THAT(alone.chips, IsEmpty());
  EXPECT_THAT(alone.warnings, Contains(HasSubstr("unknown TPU device id; not counted")));
  const TpuChipScan vouched = Scan(t.root(), TpuGeneration::kV7x);
  ASSERT_EQ(vouched.chips.size(), 1u);
  EXPECT_EQ(vouched.chips[0].generation, TpuGeneration::kV7x);
  EXPECT_THAT(vouched.warnings, Contains(HasSubstr("counted as TPU-V7X")));
}

TEST(TpuChipScanTest, EmptyTreeFindsNothing) {
  FakeTree t;
  const TpuChipScan scan = Scan(t.root());
  EXPECT_THAT(scan.chips, IsEmpty());
  EXPECT_THAT(scan.warnings, IsEmpty());
}

}  // namespace
}  // namespace tessera

#include "hardware/plugins/amd/pci_claim.h"

#include "gtest/gtest.h"
#include "hardware/plugins/amd/plugin_test_support.h"

namespace tessera {
namespace {

using testing::AnyContains;
using testing::ScratchTree;

TEST(PciClaimTest, DescribeAndFormat) {
  PciFunction f;
  f.bus_id = "0000:18:00.0";
  f.vendor_id = 0x1002;
  f.device_id = 0x74a1;
  f.class_code = 0x120000;
  EXPECT_EQ(DescribeFunction(f), "0000:18:00.0 (1002:74a1, class 0x120000, no driver)");
  f.driver = "amdgpu";
  EXPECT_EQ(DescribeFunction(f), "0000:18:00.0 (1002:74a1, class 0x120000, driver amdgpu)");
  EXPECT_EQ(FormatBusId(0, 0xc1, 0, 0), "0000:c1:00.0");
  EXPECT_EQ(FormatBusId(1, 0x05, 0x1f, 7), "0001:05:1f.7");
  EXPECT_TRUE(LooksLikeBusId("0000:c1:00.0"));
  EXPECT_FALSE(LooksLikeBusId("pci0000:00"));
  EXPECT_EQ(PciClassName(0x040300), "audio");
  EXPECT_EQ(PciClassName(0x060400), "PCI bridge");
}

TEST(PciClaimTest, ClassDeviceMapsThroughDeviceLinkOrParentPath) {
  ScratchTree t;
  const std::string fn = t.PciFunction("0000:19:00.0", "0x1da3", "0x1020", "0x120000", "habanalabs");
  t.Mkdir(fn + "/accel/accel0");
  t.Symlink(fn + "/accel/accel0/device", fn);
  t.Symlink("/sys/class/accel/accel0", fn + "/accel/accel0");
  t.Mkdir(fn + "/accel/accel1");  // no device link: found through the parent path
  t.Symlink("/sys/class/accel/accel1", fn + "/accel/accel1");
  t.Mkdir("/sys/devices/virtual/misc/accel2");
  t.Symlink("/sys/class/accel/accel2", "/sys/devices/virtual/misc/accel2");
  Sysroot root(t.root());
  EXPECT_EQ(PciBusIdOfClassDevice(root, "/sys/class/accel/accel0"), "0000:19:00.0");
  EXPECT_EQ(PciBusIdOfClassDevice(root, "/sys/class/accel/accel1"), "0000:19:00.0");
  EXPECT_FALSE(PciBusIdOfClassDevice(root, "/sys/class/accel/accel2").has_value());
  EXPECT_FALSE(PciBusIdOfClassDevice(root, "/sys/class/accel/accel9").has_value());
}

TEST(PciClaimTest, WarnsPerCandidateAndGroupsTheRest) {
  ScratchTree t;
  t.PciFunction("0000:03:00.0", "0x1002", "0x74a1", "0x120000", "amdgpu");
  t.PciFunction("0000:03:00.1", "0x1002", "0xab28", "0x040300", "snd_hda_intel");
  t.PciFunction("0000:04:00.0", "0x1002", "0x14a0", "0x060400", "pcieport");
  t.PciFunction("0000:05:00.0", "0x10de", "0x2330", "0x030200", "nvidia");
  Sysroot root(t.root());
  std::vector<std::string> scan;
  PciInventory pci = PciInventory::Scan(root, &scan);
  std::vector<std::string> warnings;
  WarnUnclaimedFunctions(pci, kPciVendorAmd, {}, {"amdgpu"}, "amd",
                         [](const PciFunction&) { return std::string("because"); }, &warnings);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0],
            "amd: 0000:03:00.0 (1002:74a1, class 0x120000, driver amdgpu) not counted: because");
  EXPECT_EQ(warnings[1],
            "amd: 2 other 1002 PCI functions not counted (not accelerators): "
            "PCI bridge 0000:04:00.0; audio 0000:03:00.1");
  warnings.clear();
  WarnUnclaimedFunctions(pci, kPciVendorAmd, {"0000:03:00.0"}, {"amdgpu"}, "amd",
                         [](const PciFunction&) { return std::string("because"); }, &warnings);
  EXPECT_FALSE(AnyContains(warnings, "because"));
  EXPECT_FALSE(AnyContains(warnings, "10de"));
}

}  // namespace
}  // namespace tessera

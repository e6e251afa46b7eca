#include "hardware/plugins/common/pci_claim.h"

#include "gtest/gtest.h"
#include "hardware/testing/fake_tree.h"
#include "hardware/testing/plugin_test_support.h"

namespace tessera {
namespace {

using testing::AnyContains;
using testing::FakeTree;

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
  FakeTree t;
  const std::string fn = t.PciFunction({.bdf = "0000:19:00.0",
                                        .vendor = 0x1da3,
                                        .device = 0x1020,
                                        .pci_class = 0x120000,
                                        .driver = "habanalabs"});
  t.ClassDevice(fn, "accel", "accel0");
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
  FakeTree t;
  t.PciFunction({.bdf = "0000:03:00.0",
                 .vendor = 0x1002,
                 .device = 0x74a1,
                 .pci_class = 0x120000,
                 .driver = "amdgpu"});
  t.PciFunction({.bdf = "0000:03:00.1",
                 .vendor = 0x1002,
                 .device = 0xab28,
                 .pci_class = 0x040300,
                 .driver = "snd_hda_intel"});
  t.PciFunction({.bdf = "0000:04:00.0",
                 .vendor = 0x1002,
                 .device = 0x14a0,
                 .pci_class = 0x060400,
                 .driver = "pcieport"});
  t.PciFunction({.bdf = "0000:05:00.0",
                 .vendor = 0x10de,
                 .device = 0x2330,
                 .pci_class = 0x030200,
                 .driver = "nvidia"});
  Sysroot root(t.root());
  std::vector<std::string> scan;
  PciInventory pci = PciInventory::Scan(root, &scan);
  Detection d;
  WarnUnclaimedFunctions(
      pci, kPciVendorAmd, {}, {"amdgpu"}, [](const PciFunction&) { return std::string("because"); },
      &d);
  ASSERT_EQ(d.warnings.size(), 1u);
  EXPECT_EQ(d.warnings[0],
            "0000:03:00.0 (1002:74a1, class 0x120000, driver amdgpu) not counted: because");
  ASSERT_EQ(d.evidence.size(), 1u);
  EXPECT_EQ(d.evidence[0],
            "2 other 1002 PCI functions not counted (not accelerators): "
            "PCI bridge 0000:04:00.0; audio 0000:03:00.1");
  Detection claimed;
  WarnUnclaimedFunctions(
      pci, kPciVendorAmd, {"0000:03:00.0"}, {"amdgpu"},
      [](const PciFunction&) { return std::string("because"); }, &claimed);
  EXPECT_FALSE(AnyContains(claimed.warnings, "because"));
  EXPECT_FALSE(AnyContains(claimed.warnings, "10de"));
  EXPECT_FALSE(AnyContains(claimed.evidence, "10de"));
}

TEST(PciClaimTest, UnclaimedReasonPrefersWhatDetectionRecorded) {
  const std::map<std::string, std::string> rejected = {{"0000:01:00.0", "recorded"}};
  const UnclaimedReasonFn reason = UnclaimedReason(
      rejected,
      [](const PciFunction& f) {
        return f.driver.empty() ? std::string("unbound") : std::string();
      },
      "nothing named it");
  EXPECT_EQ(reason(PciFunction{.bus_id = "0000:01:00.0"}), "recorded");
  EXPECT_EQ(reason(PciFunction{.bus_id = "0000:02:00.0"}), "unbound");
  EXPECT_EQ(reason(PciFunction{.bus_id = "0000:02:00.0", .driver = "amdgpu"}), "nothing named it");
}

}  // namespace
}  // namespace tessera

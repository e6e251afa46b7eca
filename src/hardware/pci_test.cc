#include "hardware/pci.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

const std::string kFixtures = std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/hardware/";

TEST(PciPathAffinityTest, CountsSharedLeadingComponents) {
  EXPECT_EQ(PciPathAffinity("/sys/devices/pci0000:17/0000:17:00.0/0000:18:00.0",
                            "/sys/devices/pci0000:17/0000:17:00.0/0000:19:00.0"),
            4);
  EXPECT_EQ(PciPathAffinity("/sys/devices/pci0000:17/a", "/sys/devices/pci0000:80/b"), 2);
  EXPECT_EQ(PciPathAffinity("", "/sys"), 0);
}

TEST(PciFunctionTest, ClassifiesByBaseClass) {
  PciFunction gpu{.class_code = 0x030200};
  PciFunction accel{.class_code = 0x120000};
  PciFunction nic{.class_code = 0x020000};
  PciFunction audio{.class_code = 0x040300};
  EXPECT_TRUE(gpu.IsDisplayOrAccelerator());
  EXPECT_TRUE(accel.IsDisplayOrAccelerator());
  EXPECT_FALSE(audio.IsDisplayOrAccelerator());
  EXPECT_TRUE(nic.IsNetworkController());
}

TEST(PciInventoryTest, MissingBusIsEmptyNotAnError) {
  std::vector<std::string> warnings;
  PciInventory pci = PciInventory::Scan(Sysroot("/nonexistent-tessera-root"), &warnings);
  EXPECT_TRUE(pci.functions().empty());
  EXPECT_TRUE(warnings.empty());
}

TEST(PciInventoryTest, FindsFunctionsByBusIdAndVendor) {
  PciInventory pci({PciFunction{.bus_id = "0000:b0:00.0", .vendor_id = kPciVendorNvidia},
                    PciFunction{.bus_id = "0000:18:00.0", .vendor_id = kPciVendorAmd}});
  ASSERT_NE(pci.Find("0000:18:00.0"), nullptr);
  EXPECT_EQ(pci.Find("0000:18:00.0")->vendor_id, kPciVendorAmd);
  EXPECT_EQ(pci.Find("0000:18:00.1"), nullptr);
  EXPECT_EQ(pci.ByVendor(kPciVendorNvidia).size(), 1u);
  EXPECT_EQ(pci.functions().front().bus_id, "0000:18:00.0");  // sorted
}

TEST(HexIdTest, FormatsLikeLspci) {
  EXPECT_EQ(HexId(0x10de), "10de");
  EXPECT_EQ(HexId(0x30200, 6), "030200");
}

}  // namespace
}  // namespace tessera

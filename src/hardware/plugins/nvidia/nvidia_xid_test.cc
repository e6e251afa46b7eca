// Xid records as the driver writes them: the code after "): " (not the address's digits), the
// detail after the pid= and name= fields, and lines that are not Xid records.
#include "hardware/plugins/nvidia/nvidia_xid.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(NvidiaXidTest, TheCodeAndDetailFollowTheAddress) {
  auto xid = ParseXidRecord(
      "NVRM: Xid (PCI:0000:01:00): 79, pid=1234, name=python3, GPU has fallen off the bus.");
  ASSERT_TRUE(xid.has_value());
  EXPECT_EQ(xid->slot, (PciSlot{0, 0x01, 0}));
  EXPECT_EQ(xid->code, 79);
  EXPECT_EQ(xid->detail, "GPU has fallen off the bus");
}

TEST(NvidiaXidTest, FieldsMayBeAbsentOrUnknownAndTheDetailKeepsItsCommas) {
  auto mmu = ParseXidRecord(
      "NVRM: Xid (PCI:0000:3b:00): 31, pid='<unknown>', name=<unknown>, Ch 00000008, "
      "intr 10000000. MMU Fault: ENGINE GRAPHICS faulted @ 0x7f2c_00000000.");
  ASSERT_TRUE(mmu.has_value());
  EXPECT_EQ(mmu->slot, (PciSlot{0, 0x3b, 0}));
  EXPECT_EQ(mmu->code, 31);
  EXPECT_EQ(mmu->detail,
            "Ch 00000008, intr 10000000. MMU Fault: ENGINE GRAPHICS faulted @ 0x7f2c_00000000");
  auto bare = ParseXidRecord("NVRM: Xid (PCI:0000:b3:00): 48");
  ASSERT_TRUE(bare.has_value());
  EXPECT_EQ(bare->code, 48);
  EXPECT_EQ(bare->detail, "");
}

TEST(NvidiaXidTest, OtherLinesAreNotXidRecords) {
  EXPECT_FALSE(ParseXidRecord("NVRM: GPU at 0000:03:00: GPU-12345678").has_value());
  EXPECT_FALSE(ParseXidRecord("NVRM: Xid (PCI:0000:01:00): , GPU has fallen").has_value());
  EXPECT_FALSE(ParseXidRecord("NVRM: Xid (PCI:zz): 79, x").has_value());
  EXPECT_FALSE(ParseXidRecord("usb 1-1: new device").has_value());
}

TEST(NvidiaXidTest, PciSlotsOfEverySpelling) {
  EXPECT_EQ(ParsePciSlot("0000:18:00.0"), (PciSlot{0, 0x18, 0}));
  EXPECT_EQ(ParsePciSlot("00000000:18:00.0"), (PciSlot{0, 0x18, 0}));  // NVML's
  EXPECT_EQ(ParsePciSlot("0001:c1:1f"), (PciSlot{1, 0xc1, 0x1f}));
  EXPECT_FALSE(ParsePciSlot("18:00.0").has_value());
  EXPECT_FALSE(ParsePciSlot("").has_value());
}

}  // namespace
}  // namespace tessera

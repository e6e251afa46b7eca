#include "hardware/testing/fake_tree.h"

#include <filesystem>

#include "gtest/gtest.h"
#include "hardware/pci.h"
#include "hardware/sysroot.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;

TEST(FakeTreeTest, EveryTreeHasItsOwnRootAndIsRemoved) {
  std::string kept;
  {
    FakeTree a;
    FakeTree b;
    EXPECT_NE(a.root(), b.root());
    EXPECT_TRUE(fs::is_directory(a.root()));
    kept = a.root();
  }
  EXPECT_FALSE(fs::exists(kept));
}

TEST(FakeTreeTest, PciFunctionIsScannedWithItsDriverGroupAndParents) {
  FakeTree t;
  t.Bridge("0000:15:01.0", {}, 0);
  const std::string dir = t.PciFunction({.bdf = "0000:18:00.0",
                                         .vendor = 0x10de,
                                         .device = 0x2330,
                                         .pci_class = 0x030200,
                                         .numa_node = 1,
                                         .parents = {"0000:15:01.0"},
                                         .driver = "nvidia",
                                         .iommu_group = 7});
  EXPECT_EQ(dir, "/sys/devices/pci0000:15/0000:15:01.0/0000:18:00.0");
  const Sysroot sysroot(t.root());
  const PciInventory pci = PciInventory::Scan(sysroot, nullptr);
  const PciFunction* f = pci.Find("0000:18:00.0");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->vendor_id, 0x10de);
  EXPECT_EQ(f->class_code, 0x030200u);
  EXPECT_EQ(f->numa_node, 1);
  EXPECT_EQ(f->driver, "nvidia");
  EXPECT_TRUE(sysroot.IsDirectory("/sys/kernel/iommu_groups/7/devices/0000:18:00.0"));
}

TEST(FakeTreeTest, ClassDeviceLinksBothWays) {
  FakeTree t;
  const std::string fn = t.PciFunction({.bdf = "0000:19:00.0", .driver = "habanalabs"});
  t.ClassDevice(fn, "accel", "accel0");
  t.DeviceNode("/dev/accel/accel0");
  const Sysroot sysroot(t.root());
  EXPECT_EQ(*sysroot.Resolve("/sys/class/accel/accel0/device"), fn);
  EXPECT_TRUE(sysroot.IsFileLike("/dev/accel/accel0"));
}

TEST(FakeTreeTest, CpuListAndMask) {
  EXPECT_EQ(FakeTree::CpuList({0, 1, 2, 3, 8, 9, 10, 11}), "0-3,8-11");
  EXPECT_EQ(FakeTree::CpuMask({0, 1, 2, 3, 8, 9, 10, 11}, 16), "00000f0f");
  EXPECT_EQ(FakeTree::CpuMask({33}, 40), "00000002,00000000");
}

}  // namespace
}  // namespace tessera::testing

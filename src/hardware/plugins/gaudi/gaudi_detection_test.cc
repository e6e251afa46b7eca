#include "hardware/plugins/gaudi/gaudi_detection.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hardware/testing/fake_tree.h"
#include "hardware/testing/plugin_test_support.h"

namespace tessera {
namespace {

using testing::AnyContains;
using testing::FakeTree;
using testing::FixtureHost;
using testing::FixturePath;

TEST(GaudiDetectionTest, Gaudi2EightCardsIndexedByModuleId) {
  FixtureHost host(FixturePath("gaudi2-8"));
  Detection d = DetectGaudiDevices(host.context());
  EXPECT_EQ(d.probe, "accel");
  ASSERT_EQ(d.devices.size(), 8u);
  // module id -> bus id, from the fixture's slot wiring (module ids 2,3,0,1,6,7,4,5 in PCI order).
  const char* kBusOfModule[] = {"0000:33:00.0", "0000:34:00.0", "0000:19:00.0", "0000:1a:00.0",
                                "0000:b3:00.0", "0000:b4:00.0", "0000:9a:00.0", "0000:9b:00.0"};
  for (int m = 0; m < 8; ++m) {
    const Device& c = d.devices[m];
    EXPECT_EQ(c.family, "gaudi");
    EXPECT_EQ(c.index, m);
    EXPECT_EQ(c.pci_bus_id, kBusOfModule[m]);
    EXPECT_EQ(c.type, "Intel-GAUDI2");
    EXPECT_EQ(c.model, "Intel Gaudi GAUDI2");
    EXPECT_EQ(c.memory_bytes, 96ull << 30);
    EXPECT_EQ(c.numa_node, m < 4 ? 0 : 1);
    EXPECT_EQ(c.attributes.at("module_id"), std::to_string(m));
    EXPECT_EQ(c.uuid.substr(0, 2), "AN");
  }
  EXPECT_TRUE(d.warnings.empty()) << d.warnings.front();
  EXPECT_TRUE(d.errors.empty());
  EXPECT_TRUE(AnyContains(d.evidence, "/sys/class/accel/accel0 -> 0000:19:00.0 (1da3:1020"));
}

TEST(GaudiDetectionTest, Gaudi2AllToAllRoce) {
  FixtureHost host(FixturePath("gaudi2-8"));
  Detection d = DetectGaudiDevices(host.context());
  ASSERT_EQ(d.links.size(), 28u);
  for (const DeviceLink& l : d.links) {
    EXPECT_LT(l.a, l.b);
    EXPECT_EQ(l.kind, LinkKind::kGaudiRoce);
    EXPECT_EQ(l.lanes, 3);
    EXPECT_DOUBLE_EQ(l.gigabytes_per_second, 37.5);
    EXPECT_EQ(l.bandwidth_class, BandwidthClass::kLow);
  }
}

TEST(GaudiDetectionTest, ControlNodesAndOtherFunctionsAreNotCounted) {
  FixtureHost host(FixturePath("gaudi2-8"));
  Detection d = DetectGaudiDevices(host.context());
  for (const Device& c : d.devices) {
    EXPECT_EQ(c.attributes.at("device_node").find("control"), std::string::npos);
    EXPECT_NE(c.pci_bus_id, "0000:02:00.0");  // ASPEED VGA
  }
  EXPECT_EQ(d.devices.size(), 8u);  // 16 files under /dev/accel, 8 cards
}

TEST(GaudiDetectionTest, OtherVendorsAccelEntriesAndDirectoriesAreSkipped) {
  FakeTree t;
  // An Intel NPU owns accel0; accel1 is a Gaudi2 whose device node is a directory; accel2 is fine.
  const std::string npu = t.PciFunction({.bdf = "0000:00:0b.0",
                                         .vendor = 0x8086,
                                         .device = 0x7d1d,
                                         .pci_class = 0x120000,
                                         .driver = "intel_vpu"});
  const std::string g1 = t.PciFunction({.bdf = "0000:19:00.0",
                                        .vendor = 0x1da3,
                                        .device = 0x1020,
                                        .pci_class = 0x120000,
                                        .driver = "habanalabs"});
  const std::string g2 = t.PciFunction({.bdf = "0000:1a:00.0",
                                        .vendor = 0x1da3,
                                        .device = 0x1020,
                                        .pci_class = 0x120000,
                                        .driver = "habanalabs"});
  int n = 0;
  for (const std::string& fn : {npu, g1, g2}) {
    t.ClassDevice(fn, "accel", "accel" + std::to_string(n++));
  }
  t.DeviceNode("/dev/accel/accel0");
  t.Mkdir("/dev/accel/accel1");
  t.DeviceNode("/dev/accel/accel2");
  FixtureHost host(t.root());
  Detection d = DetectGaudiDevices(host.context());
  ASSERT_EQ(d.devices.size(), 1u);
  EXPECT_EQ(d.devices[0].pci_bus_id, "0000:1a:00.0");
  // No module_id attribute: index falls back to device-node order.
  EXPECT_EQ(d.devices[0].index, 0);
  EXPECT_TRUE(AnyContains(d.warnings, "module_id missing"));
  EXPECT_TRUE(AnyContains(d.evidence, "8086:7d1d"));
  EXPECT_FALSE(AnyContains(d.warnings, "8086"));
  EXPECT_TRUE(AnyContains(d.warnings,
                          "0000:19:00.0 (1da3:1020, class 0x120000, driver "
                          "habanalabs) not counted: device node /dev/accel/accel1"));
}

TEST(GaudiDetectionTest, LegacyHabanalabsClass) {
  FakeTree t;
  const std::string fn = t.PciFunction({.bdf = "0000:19:00.0",
                                        .vendor = 0x1da3,
                                        .device = 0x1000,
                                        .pci_class = 0x120000,
                                        .driver = "habanalabs"});
  const std::string hl0 = t.ClassDevice(fn, "habanalabs", "hl0");
  t.Write(hl0 + "/device_type", "GAUDI\n");
  t.Write(hl0 + "/module_id", "3\n");
  t.DeviceNode("/dev/hl0");
  t.DeviceNode("/dev/hl_controlD0");
  FixtureHost host(t.root());
  Detection d = DetectGaudiDevices(host.context());
  EXPECT_EQ(d.probe, "habanalabs");
  ASSERT_EQ(d.devices.size(), 1u);
  EXPECT_EQ(d.devices[0].type, "Intel-GAUDI");
  EXPECT_EQ(d.devices[0].index, 3);
}

TEST(GaudiDetectionTest, UnboundHabanaFunctionIsWarned) {
  FakeTree t;
  t.PciFunction({.bdf = "0000:19:00.0",
                 .vendor = 0x1da3,
                 .device = 0x1020,
                 .pci_class = 0x120000,
                 .driver = "vfio-pci"});
  FixtureHost host(t.root());
  Detection d = DetectGaudiDevices(host.context());
  EXPECT_TRUE(d.devices.empty());
  EXPECT_TRUE(AnyContains(d.warnings, "bound to vfio-pci, not habanalabs"));
}

}  // namespace
}  // namespace tessera

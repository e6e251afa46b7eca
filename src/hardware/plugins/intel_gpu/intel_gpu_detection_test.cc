#include "hardware/plugins/intel_gpu/intel_gpu_detection.h"

#include <filesystem>

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

TEST(IntelGpuDetectionTest, FourMax1550InBusOrder) {
  FixtureHost host(FixturePath("intel-max-1550-4"));
  Detection d = DetectIntelGpus(host.context());
  EXPECT_EQ(d.probe, "drm");
  ASSERT_EQ(d.devices.size(), 4u);
  const char* kBus[] = {"0000:19:00.0", "0000:3b:00.0", "0000:9a:00.0", "0000:bb:00.0"};
  for (int i = 0; i < 4; ++i) {
    const Device& g = d.devices[i];
    EXPECT_EQ(g.family, "intel-gpu");
    EXPECT_EQ(g.index, i);
    EXPECT_EQ(g.type, "Intel-GPU-Max-1550");
    EXPECT_EQ(g.model, "Intel(R) Data Center GPU Max 1550");
    EXPECT_EQ(g.memory_bytes, 128ull << 30);
    EXPECT_EQ(g.pci_bus_id, kBus[i]);
    EXPECT_EQ(g.numa_node, i < 2 ? 0 : 1);
    EXPECT_EQ(g.attributes.at("render_node"), "/dev/dri/renderD" + std::to_string(128 + i));
  }
  EXPECT_TRUE(d.errors.empty());
}

TEST(IntelGpuDetectionTest, NpuIsWarnedAndChipsetIsInEvidence) {
  FixtureHost host(FixturePath("intel-max-1550-4"));
  Detection d = DetectIntelGpus(host.context());
  for (const Device& g : d.devices) EXPECT_NE(g.pci_bus_id, "0000:00:0b.0");
  EXPECT_TRUE(AnyContains(d.warnings,
                          "0000:00:0b.0 (8086:7d1d, class 0x120000, driver intel_vpu) not "
                          "counted: it is a processing accelerator, not a GPU"));
  EXPECT_TRUE(AnyContains(d.evidence, "ethernet 0000:4b:00.0"));
  EXPECT_TRUE(AnyContains(d.evidence, "USB 0000:00:14.0"));
  EXPECT_FALSE(AnyContains(d.warnings, "1a03"));  // the ASPEED VGA is not Intel
}

TEST(IntelGpuDetectionTest, WorkstationIntegratedGpuIsRejected) {
  const std::string root = FixturePath("workstation-rtx4090");
  if (!std::filesystem::exists(root)) GTEST_SKIP() << "fixture workstation-rtx4090 not present";
  FixtureHost host(root);
  Detection d = DetectIntelGpus(host.context());
  EXPECT_TRUE(d.devices.empty());
  EXPECT_TRUE(AnyContains(d.warnings,
                          "0000:00:02.0 (8086:a780, class 0x030000, driver i915) "
                          "not counted: integrated GPU"));
  EXPECT_FALSE(AnyContains(d.warnings, "10de"));  // the RTX 4090 is another family's
}

TEST(IntelGpuDetectionTest, UnknownDiscreteIdAndWrongDriverAreRejected) {
  FakeTree t;
  const std::string a = t.PciFunction({.bdf = "0000:03:00.0",
                                       .vendor = 0x8086,
                                       .device = 0x1234,
                                       .pci_class = 0x030000,
                                       .driver = "i915"});
  const std::string b = t.PciFunction({.bdf = "0000:04:00.0",
                                       .vendor = 0x8086,
                                       .device = 0x56a0,
                                       .pci_class = 0x030000,
                                       .driver = "vfio-pci"});
  const std::string c = t.PciFunction({.bdf = "0000:05:00.0",
                                       .vendor = 0x8086,
                                       .device = 0x56a0,
                                       .pci_class = 0x030000,
                                       .driver = "xe"});
  int n = 128;
  for (const std::string& fn : {a, b, c}) {
    const std::string name = "renderD" + std::to_string(n++);
    t.ClassDevice(fn, "drm", name);
    t.DeviceNode("/dev/dri/" + name);
  }
  FixtureHost host(t.root());
  Detection d = DetectIntelGpus(host.context());
  ASSERT_EQ(d.devices.size(), 1u);
  EXPECT_EQ(d.devices[0].pci_bus_id, "0000:05:00.0");
  EXPECT_EQ(d.devices[0].type, "Intel-GPU-A770-Graphics");
  EXPECT_TRUE(AnyContains(d.warnings, "device id 1234 is not in the discrete-GPU allow-list"));
  EXPECT_TRUE(AnyContains(d.warnings,
                          "0000:04:00.0 (8086:56a0, class 0x030000, driver "
                          "vfio-pci) not counted: bound to vfio-pci, not i915 or xe"));
}

}  // namespace
}  // namespace tessera

// The cpu-only-vm fixture through every accelerator plugin and whole-node discovery: a VM with an
// emulated VGA (a display-class PCI function), virtio devices and software NICs has no
// accelerators.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hardware/node_discovery.h"
#include "hardware/node_label_keys.h"
#include "hardware/plugin_registry.h"

namespace tessera {
namespace {

using ::testing::IsEmpty;

const std::string& Fixture() {
  static const std::string kPath =
      std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/hardware/cpu-only-vm";
  return kPath;
}

TEST(CpuOnlyVmTest, TheDecoysArePresent) {
  // Without these the next test would prove nothing.
  const PciInventory pci = PciInventory::Scan(Sysroot(Fixture()), nullptr);
  const PciFunction* vga = pci.Find("0000:00:01.0");
  ASSERT_NE(vga, nullptr);
  EXPECT_EQ(vga->vendor_id, 0x1234);
  EXPECT_EQ(vga->device_id, 0x1111);
  EXPECT_EQ(vga->class_code, 0x030000u);
  EXPECT_EQ(vga->driver, "bochs");
  EXPECT_TRUE(vga->IsDisplayOrAccelerator());
  const PciFunction* net = pci.Find("0000:00:02.0");
  ASSERT_NE(net, nullptr);
  EXPECT_EQ(net->vendor_id, 0x1af4);
  EXPECT_EQ(net->device_id, 0x1041);
  EXPECT_EQ(net->driver, "virtio-pci");
  EXPECT_EQ(pci.functions().size(), 7u);
}

TEST(CpuOnlyVmTest, NoPluginCountsAnyDevice) {
  const Sysroot sysroot(Fixture());
  const PciInventory pci = PciInventory::Scan(sysroot, nullptr);
  const Environment env = Environment::ForSysroot(sysroot);
  const DetectionOptions options;
  const DetectionContext context{sysroot, env, pci, options};
  ASSERT_FALSE(AcceleratorPlugins().empty());
  for (const AcceleratorPlugin* plugin : AcceleratorPlugins()) {
    const Detection d = plugin->Detect(context);
    EXPECT_THAT(d.devices, IsEmpty()) << plugin->family();
    EXPECT_THAT(d.links, IsEmpty()) << plugin->family();
    EXPECT_THAT(d.errors, IsEmpty()) << plugin->family();
  }
}

TEST(CpuOnlyVmTest, NodeAdvertisesOnlyCpuAndMemory) {
  DiscoveryOptions options;
  options.sysroot = Fixture();
  auto node = DiscoverNode(options);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->AcceleratorCount(), 0);
  EXPECT_THAT(node->families, IsEmpty());
  EXPECT_EQ(node->resources.ToString(), "CPU=8,memory=16GiB");
  EXPECT_EQ(node->labels.count(std::string(labels::kAcceleratorType)), 0u);
  EXPECT_EQ(node->host.source, "hwloc");
  ASSERT_EQ(node->host.nics.size(), 1u);
  EXPECT_EQ(node->host.nics[0].name, "eth0");
  EXPECT_THAT(node->errors, IsEmpty());
}

}  // namespace
}  // namespace tessera

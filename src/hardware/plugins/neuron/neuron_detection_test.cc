#include "hardware/plugins/neuron/neuron_detection.h"

#include <set>

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

TEST(NeuronDetectionTest, Trn1ThirtyTwoCoresOnSixteenChips) {
  FixtureHost host(FixturePath("trn1-32xlarge"));
  Detection d = DetectNeuronCores(host.context());
  EXPECT_EQ(d.probe, "neuron-sysfs");
  ASSERT_EQ(d.devices.size(), 32u);
  for (int i = 0; i < 32; ++i) {
    const Device& c = d.devices[i];
    EXPECT_EQ(c.family, "neuron");
    EXPECT_EQ(c.index, i);
    EXPECT_EQ(c.type, "aws-neuron-core");
    EXPECT_EQ(c.model, "AWS Trainium NeuronCore");
    EXPECT_EQ(c.attributes.at("chip"), std::to_string(i / 2));
    EXPECT_EQ(c.attributes.at("core_in_chip"), std::to_string(i % 2));
    EXPECT_EQ(c.memory_bytes, 16ull << 30);
    EXPECT_EQ(c.numa_node, i < 16 ? 0 : 1);
    EXPECT_FALSE(c.uuid.empty());
  }
  // Chip N is the N-th neuron function in bus order.
  EXPECT_EQ(d.devices[0].pci_bus_id, "0000:10:1c.0");
  EXPECT_EQ(d.devices[1].pci_bus_id, "0000:10:1c.0");
  EXPECT_EQ(d.devices[9].pci_bus_id, "0000:20:1c.0");
  EXPECT_EQ(d.devices[31].pci_bus_id, "0000:a0:1f.0");
  EXPECT_TRUE(d.errors.empty());
}

TEST(NeuronDetectionTest, Trn1TorusLinksBetweenCores) {
  FixtureHost host(FixturePath("trn1-32xlarge"));
  Detection d = DetectNeuronCores(host.context());
  // 16 on-chip pairs + 32 torus edges x 4 core pairs.
  ASSERT_EQ(d.links.size(), 16u + 32u * 4u);
  std::set<std::pair<int, int>> pairs;
  for (const DeviceLink& l : d.links) {
    EXPECT_LT(l.a, l.b);
    EXPECT_EQ(l.kind, LinkKind::kNeuronLink);
    pairs.insert({l.a, l.b});
  }
  EXPECT_EQ(pairs.size(), d.links.size());
  EXPECT_TRUE(pairs.count({0, 1}));    // chip 0's two cores, on-chip
  EXPECT_TRUE(pairs.count({0, 2}));    // chip 0 - chip 1 (torus neighbours)
  EXPECT_TRUE(pairs.count({1, 25}));   // chip 0 - chip 12 (wrap-around)
  EXPECT_FALSE(pairs.count({0, 10}));  // chip 0 - chip 5 are not neighbours
}

TEST(NeuronDetectionTest, EnaEfaNvmeAndVgaAreNotCounted) {
  FixtureHost host(FixturePath("trn1-32xlarge"));
  Detection d = DetectNeuronCores(host.context());
  std::set<std::string> buses;
  for (const Device& c : d.devices) buses.insert(c.pci_bus_id);
  EXPECT_EQ(buses.size(), 16u);
  for (const char* decoy : {"0000:00:05.0", "0000:10:1a.0", "0000:00:04.0", "0000:00:03.0"}) {
    EXPECT_EQ(buses.count(decoy), 0u) << decoy;
  }
  // The Nitro VGA is display class, so it gets its own warning; the rest are grouped.
  EXPECT_TRUE(AnyContains(d.warnings, "0000:00:03.0 (1d0f:1111"));
  EXPECT_TRUE(AnyContains(d.evidence, "ethernet 0000:00:05.0 0000:10:1a.0"));
}

TEST(NeuronDetectionTest, ContainerWithTwoChipsRenumbersCores) {
  // Copy of the PCI facts is not needed: a scratch tree with two of three chips' device nodes.
  FakeTree t;
  for (int n = 0; n < 3; ++n) {
    const std::string bdf = "0000:00:1" + std::string(1, "cde"[n]) + ".0";
    t.PciFunction({.bdf = bdf,
                   .vendor = 0x1d0f,
                   .device = 0x7264,
                   .pci_class = 0x088000,
                   .driver = "neuron"});
    const std::string dir = "/sys/devices/virtual/neuron_device/neuron" + std::to_string(n);
    t.Write(dir + "/core_count", "2\n");
    t.Write(dir + "/connected_devices", n == 0 ? "1\n" : (n == 1 ? "0, 2\n" : "1\n"));
    t.Symlink("/sys/class/neuron_device/neuron" + std::to_string(n), dir);
  }
  t.DeviceNode("/dev/neuron1");
  t.DeviceNode("/dev/neuron2");
  FixtureHost host(t.root());
  Detection d = DetectNeuronCores(host.context());
  ASSERT_EQ(d.devices.size(), 4u);
  EXPECT_EQ(d.devices[0].attributes.at("chip"), "1");
  EXPECT_EQ(d.devices[0].pci_bus_id, "0000:00:1d.0");
  EXPECT_EQ(d.devices[0].model, "AWS Inferentia2 NeuronCore");
  EXPECT_EQ(d.devices[3].attributes.at("chip"), "2");
  EXPECT_EQ(d.links.size(), 2u + 4u);  // two on-chip pairs + chip1-chip2
  EXPECT_TRUE(AnyContains(d.warnings, "/dev/neuron0 is missing"));
}

TEST(NeuronDetectionTest, WithoutSysfsClassUsesBoundFunctions) {
  FakeTree t;
  t.PciFunction({.bdf = "0000:00:1e.0",
                 .vendor = 0x1d0f,
                 .device = 0x7064,
                 .pci_class = 0x088000,
                 .driver = "neuron"});
  t.PciFunction({.bdf = "0000:00:1f.0",
                 .vendor = 0x1d0f,
                 .device = 0x7164,
                 .pci_class = 0x088000,
                 .driver = "vfio-pci"});
  t.DeviceNode("/dev/neuron0");
  FixtureHost host(t.root());
  Detection d = DetectNeuronCores(host.context());
  EXPECT_EQ(d.probe, "pci");
  ASSERT_EQ(d.devices.size(), 4u);  // Inferentia: 4 cores from the table
  EXPECT_TRUE(AnyContains(d.warnings, "bound to vfio-pci, not neuron"));
}

}  // namespace
}  // namespace tessera

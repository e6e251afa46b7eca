#include "hardware/plugins/amd/amd_detection.h"

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hardware/plugins/amd/kfd_topology.h"
#include "hardware/testing/fake_tree.h"
#include "hardware/testing/plugin_test_support.h"

namespace tessera {
namespace {

using testing::AnyContains;
using testing::FakeTree;
using testing::FixtureHost;
using testing::FixturePath;

TEST(AmdDetectionTest, Mi300xEightGpusInKfdOrder) {
  FixtureHost host(FixturePath("mi300x-8"));
  Detection d = DetectAmdGpus(host.context());
  EXPECT_EQ(d.probe, "kfd");
  ASSERT_EQ(d.devices.size(), 8u);
  const char* kBus[] = {"0000:03:00.0", "0000:23:00.0", "0000:43:00.0", "0000:63:00.0",
                        "0000:83:00.0", "0000:a3:00.0", "0000:c3:00.0", "0000:e3:00.0"};
  for (int i = 0; i < 8; ++i) {
    const Device& g = d.devices[i];
    EXPECT_EQ(g.family, "amd");
    EXPECT_EQ(g.index, i);
    EXPECT_EQ(g.type, "AMD-Instinct-MI300X-OAM");
    EXPECT_EQ(g.model, "AMD Instinct MI300X");
    EXPECT_EQ(g.pci_bus_id, kBus[i]);
    EXPECT_EQ(g.numa_node, i < 4 ? 0 : 1);
    EXPECT_EQ(g.memory_bytes, 205822885888u);
    EXPECT_EQ(g.attributes.at("kfd_node"), std::to_string(i + 2));
    EXPECT_EQ(g.attributes.at("render_node"), "/dev/dri/renderD" + std::to_string(128 + i));
    EXPECT_EQ(g.uuid.substr(0, 4), "GPU-");
  }
  std::set<std::string> uuids;
  for (const Device& g : d.devices) uuids.insert(g.uuid);
  EXPECT_EQ(uuids.size(), 8u);
  EXPECT_TRUE(d.errors.empty());
  EXPECT_TRUE(AnyContains(d.evidence, "KFD node 2 -> GPU 0: 0000:03:00.0 (1002:74a1"));
}

TEST(AmdDetectionTest, Mi300xFullXgmiMesh) {
  FixtureHost host(FixturePath("mi300x-8"));
  Detection d = DetectAmdGpus(host.context());
  ASSERT_EQ(d.links.size(), 28u);  // 8 choose 2: one link per pair, not two
  std::set<std::pair<int, int>> pairs;
  for (const DeviceLink& l : d.links) {
    EXPECT_LT(l.a, l.b);
    EXPECT_EQ(l.kind, LinkKind::kXgmi);
    EXPECT_EQ(l.lanes, 1);
    EXPECT_DOUBLE_EQ(l.gigabytes_per_second, 64.0);
    EXPECT_EQ(l.bandwidth_class, BandwidthClass::kMedium);
    pairs.insert({l.a, l.b});
  }
  EXPECT_EQ(pairs.size(), 28u);
}

TEST(AmdDetectionTest, DecoysAreNotCountedNorWarnedAsAmd) {
  // The EPYC's functions are 0x1022 and the BMC VGA is 0x1a03: neither is AMD GPU vendor 0x1002.
  FixtureHost host(FixturePath("mi300x-8"));
  Detection d = DetectAmdGpus(host.context());
  for (const Device& g : d.devices) {
    EXPECT_NE(g.pci_bus_id, "0000:08:00.0");  // ASPEED VGA
  }
  EXPECT_FALSE(AnyContains(d.warnings, "1022"));
  EXPECT_FALSE(AnyContains(d.warnings, "1a03"));
  EXPECT_TRUE(d.warnings.empty()) << d.warnings.front();
}

TEST(AmdDetectionTest, EnvironmentRulesAreErrorsWhenGpusExist) {
  Environment env;
  env.Set("ROCR_VISIBLE_DEVICES", "0");
  env.Set("CUDA_VISIBLE_DEVICES", "0,1");
  env.Set("HIP_VISIBLE_DEVICES", "1,0");
  FixtureHost host(FixturePath("mi300x-8"), env);
  Detection d = DetectAmdGpus(host.context());
  ASSERT_EQ(d.errors.size(), 2u);
  EXPECT_TRUE(AnyContains(d.errors, "ROCR_VISIBLE_DEVICES is set"));
  EXPECT_TRUE(AnyContains(d.errors, "differ"));
  EXPECT_EQ(d.devices.size(), 8u);  // detection still reports the hardware
}

TEST(AmdDetectionTest, EnvironmentRulesOnlyWarnWithoutAmdGpus) {
  Environment env;
  env.Set("ROCR_VISIBLE_DEVICES", "0");
  FakeTree t;
  FixtureHost host(t.root(), env);
  Detection d = DetectAmdGpus(host.context());
  EXPECT_TRUE(d.errors.empty());
  EXPECT_TRUE(AnyContains(d.warnings, "ignored: no AMD GPU"));
}

TEST(AmdDetectionTest, EnvironmentRules) {
  Environment env;
  EXPECT_TRUE(AmdEnvironmentErrors(env).empty());
  env.Set("CUDA_VISIBLE_DEVICES", "0,1");
  env.Set("HIP_VISIBLE_DEVICES", "0,1");
  EXPECT_TRUE(AmdEnvironmentErrors(env).empty());  // identical values are fine
  env.Set("HIP_VISIBLE_DEVICES", "0");
  EXPECT_EQ(AmdEnvironmentErrors(env).size(), 1u);
}

// A small KFD tree: one GPU node with the given PCI function attributes.
void SmallGpuTree(FakeTree& t, uint16_t device, uint32_t klass, std::string_view driver,
                  bool render_node) {
  t.PciFunction({.bdf = "0000:c1:00.0",
                 .vendor = 0x1002,
                 .device = device,
                 .pci_class = klass,
                 .driver = std::string(driver)});
  t.PciFunction({.bdf = "0000:c1:00.1",
                 .vendor = 0x1002,
                 .device = 0xab28,
                 .pci_class = 0x040300,
                 .driver = "snd_hda_intel"});
  const std::string n = std::string(kKfdTopologyNodes) + "/1";
  t.Write(std::string(kKfdTopologyNodes) + "/0/properties", "simd_count 0\ncpu_cores_count 64\n");
  t.Write(n + "/properties", "simd_count 416\nvendor_id 4098\ndevice_id 29711\nlocation_id " +
                                 std::to_string(0xc1 << 8) + "\ndomain 0\ndrm_render_minor 128\n");
  t.DeviceNode("/dev/kfd");
  if (render_node) t.DeviceNode("/dev/dri/renderD128");
}

TEST(AmdDetectionTest, AudioFunctionIsInEvidenceNotCounted) {
  FakeTree t;
  SmallGpuTree(t, 0x740f, 0x038000, "amdgpu", true);
  FixtureHost host(t.root());
  Detection d = DetectAmdGpus(host.context());
  ASSERT_EQ(d.devices.size(), 1u);
  EXPECT_EQ(d.devices[0].type, "AMD-Instinct-MI210");
  EXPECT_EQ(d.devices[0].pci_bus_id, "0000:c1:00.0");
  EXPECT_TRUE(AnyContains(d.evidence, "audio 0000:c1:00.1"));
}

TEST(AmdDetectionTest, UnknownDeviceIdGetsGenericTypeAndWarning) {
  FakeTree t;
  SmallGpuTree(t, 0x7551, 0x030000, "amdgpu", true);
  FixtureHost host(t.root());
  Detection d = DetectAmdGpus(host.context());
  ASSERT_EQ(d.devices.size(), 1u);
  EXPECT_EQ(d.devices[0].type, "AMD-GPU-7551");
  EXPECT_TRUE(AnyContains(d.warnings, "unknown device id 7551"));
}

TEST(AmdDetectionTest, WrongDriverOrMissingRenderNodeIsRejectedWithReason) {
  {
    FakeTree t;
    SmallGpuTree(t, 0x740f, 0x038000, "vfio-pci", true);
    FixtureHost host(t.root());
    Detection d = DetectAmdGpus(host.context());
    EXPECT_TRUE(d.devices.empty());
    EXPECT_TRUE(AnyContains(d.warnings, "bound to vfio-pci, not amdgpu"));
  }
  {
    FakeTree t;
    SmallGpuTree(t, 0x740f, 0x038000, "amdgpu", false);
    FixtureHost host(t.root());
    Detection d = DetectAmdGpus(host.context());
    EXPECT_TRUE(d.devices.empty());
    EXPECT_TRUE(AnyContains(d.warnings, "render node /dev/dri/renderD128 is missing"));
  }
}

}  // namespace
}  // namespace tessera

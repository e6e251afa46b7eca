#include "hardware/plugins/tpu/tpu_plugin.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hardware/plugins/tpu/tpu_detection.h"

namespace tessera {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const std::string kFixtures = std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/hardware";
const std::string kV6e = kFixtures + "/tpu-v6e-4x4-worker2";
const std::string kV5e = kFixtures + "/tpu-v5e-8";

Detection DetectWith(const std::string& root, const Environment& env) {
  Sysroot sysroot(root);
  PciInventory pci = PciInventory::Scan(sysroot, nullptr);
  DetectionOptions options;
  DetectionContext context{sysroot, env, pci, options};
  return MakeTpuPlugin()->Detect(context);
}

Detection Detect(const std::string& root) {
  return DetectWith(root, Environment::ForSysroot(Sysroot(root)));
}

TEST(TpuPluginTest, Names) {
  auto p = MakeTpuPlugin();
  EXPECT_EQ(p->family(), "tpu");
  EXPECT_EQ(p->resource_name(), "TPU");
  EXPECT_EQ(p->visible_devices_env(), "TPU_VISIBLE_CHIPS");
  EXPECT_TRUE(p->unit_instance());
}

TEST(TpuPluginTest, V6eWorker2) {
  const Detection d = Detect(kV6e);
  EXPECT_EQ(d.probe, "vfio");
  EXPECT_THAT(d.warnings, IsEmpty());
  EXPECT_THAT(d.errors, IsEmpty());
  ASSERT_EQ(d.devices.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const Device& dev = d.devices[i];
    EXPECT_EQ(dev.family, "tpu");
    EXPECT_EQ(dev.index, i);
    EXPECT_EQ(dev.type, "TPU-V6E");
    EXPECT_EQ(dev.memory_bytes, 32ull << 30);
    EXPECT_EQ(dev.attributes.at("chip"), std::to_string(i));
    EXPECT_EQ(dev.attributes.at("pci_id"), "1ae0:006f");
  }
  EXPECT_EQ(d.devices[2].pci_bus_id, "0000:80:04.0");
  EXPECT_EQ(d.devices[2].numa_node, 1);
  // Host grid 2x2, x fastest; worker 2 of the 2x2 host grid owns slice rows 2-3, columns 0-1.
  EXPECT_EQ(d.devices[1].attributes.at("host_coords"), "1,0,0");
  EXPECT_EQ(d.devices[2].attributes.at("host_coords"), "0,1,0");
  EXPECT_EQ(d.devices[0].attributes.at("slice_coords"), "0,2,0");
  EXPECT_EQ(d.devices[3].attributes.at("slice_coords"), "1,3,0");

  // ICI inside the 2x2 host: 0-1, 0-2, 1-3, 2-3.
  ASSERT_EQ(d.links.size(), 4u);
  std::vector<std::pair<int, int>> pairs;
  for (const DeviceLink& l : d.links) {
    pairs.emplace_back(l.a, l.b);
    EXPECT_EQ(l.kind, LinkKind::kIci);
    EXPECT_EQ(l.bandwidth_class, BandwidthClass::kMedium);  // ~56 GB/s per link and direction
  }
  EXPECT_THAT(pairs,
              ElementsAre(std::pair(0, 1), std::pair(0, 2), std::pair(1, 3), std::pair(2, 3)));

  EXPECT_EQ(d.labels.at("tessera.io/tpu-slice-name"), "train-v6e-16-a");
  EXPECT_EQ(d.labels.at("tessera.io/tpu-worker-id"), "2");
  EXPECT_EQ(d.labels.at("tessera.io/tpu-topology"), "4x4");
  EXPECT_EQ(d.labels.at("tessera.io/tpu-pod-type"), "v6e-16");
  EXPECT_EQ(d.labels.at("tessera.io/fabric-domain"), "train-v6e-16-a");
  EXPECT_EQ(d.labels.at("tessera.io/fabric-kind"), "ici");
  EXPECT_EQ(d.resources.Get("train-v6e-16-a"), Quantity::FromInt(1));
  EXPECT_EQ(d.resources.Get("TPU-v6e-16-head"), Quantity());  // worker 2 is not the head
  EXPECT_EQ(d.resources.size(), 1u);
  EXPECT_THAT(d.evidence, Contains(HasSubstr("metadata server is not queried")));
}

TEST(TpuPluginTest, V5eSingleHost) {
  const Detection d = Detect(kV5e);
  EXPECT_EQ(d.probe, "accel");
  EXPECT_THAT(d.warnings, IsEmpty());
  ASSERT_EQ(d.devices.size(), 8u);
  for (const Device& dev : d.devices) {
    EXPECT_EQ(dev.type, "TPU-V5LITEPOD");
    EXPECT_EQ(dev.memory_bytes, 16ull << 30);
  }
  EXPECT_EQ(d.devices[7].attributes.at("host_coords"), "1,3,0");
  EXPECT_EQ(d.devices[7].attributes.at("slice_coords"), "1,3,0");
  EXPECT_EQ(d.devices[5].attributes.at("device_node"), "/dev/accel5");
  // 2x4 grid: 4 links along x, 6 along y.
  EXPECT_EQ(d.links.size(), 10u);
  EXPECT_EQ(d.labels.at("tessera.io/tpu-pod-type"), "v5litepod-8");
  EXPECT_EQ(d.labels.at("tessera.io/tpu-topology"), "2x4");
  EXPECT_FALSE(d.labels.contains("tessera.io/fabric-domain"));  // one host: no ICI domain to join
  EXPECT_EQ(d.resources.Get("serve-v5e-8"), Quantity::FromInt(1));
  EXPECT_EQ(d.resources.Get("TPU-v5litepod-8-head"), Quantity::FromInt(1));
}

TEST(TpuPluginTest, ResourcesPerChipSplitsChips) {
  Environment env = Environment::ForSysroot(Sysroot(kV6e));
  env.Set("TESSERA_TPU_RESOURCE_PER_CHIP", "2");
  const Detection d = DetectWith(kV6e, env);
  ASSERT_EQ(d.devices.size(), 8u);
  EXPECT_EQ(d.devices[5].attributes.at("chip"), "2");
  EXPECT_EQ(d.devices[5].attributes.at("core"), "1");
  EXPECT_EQ(d.devices[5].pci_bus_id, "0000:80:04.0");
  EXPECT_EQ(d.devices[5].memory_bytes, 16ull << 30);
  EXPECT_EQ(d.links.size(), 16u);  // 4 chip pairs x 2 x 2 units

  env.Set("TESSERA_TPU_RESOURCE_PER_CHIP", "zero");
  const Detection bad = DetectWith(kV6e, env);
  EXPECT_EQ(bad.devices.size(), 4u);
  EXPECT_THAT(bad.warnings, Contains(HasSubstr("TESSERA_TPU_RESOURCE_PER_CHIP=\"zero\"")));
}

TEST(TpuPluginTest, IncompleteIdentityHasNoMarkers) {
  Environment env = Environment::ForSysroot(Sysroot(kV6e));
  env.Unset("TPU_NAME");
  env.Unset("TPU_WORKER_ID");
  const Detection d = DetectWith(kV6e, env);
  EXPECT_EQ(d.devices.size(), 4u);
  EXPECT_TRUE(d.resources.empty());
  EXPECT_FALSE(d.labels.contains("tessera.io/fabric-domain"));
  EXPECT_EQ(d.labels.at("tessera.io/tpu-pod-type"), "v6e-16");
  EXPECT_THAT(d.warnings, ElementsAre("incomplete TPU identity: missing TPU_NAME, TPU_WORKER_ID; "
                                      "no slice markers"));
  EXPECT_THAT(d.evidence, Contains(HasSubstr("TPU_WORKER_ID=unset")));
  EXPECT_FALSE(d.devices[0].attributes.contains("slice_coords"));
}

TEST(TpuPluginTest, InconsistentIdentityWarns) {
  Environment env = Environment::ForSysroot(Sysroot(kV6e));
  env.Set("TPU_WORKER_ID", "7");
  const Detection d = DetectWith(kV6e, env);
  EXPECT_TRUE(d.resources.empty());
  EXPECT_THAT(d.warnings, Contains(HasSubstr("TPU_WORKER_ID=7 but v6e-16 has 4 hosts")));
}

TEST(TpuPluginTest, GenerationDisagreementWarns) {
  Environment env = Environment::ForSysroot(Sysroot(kV6e));
  env.Set("TPU_ACCELERATOR_TYPE", "v5litepod-16");
  const Detection d = DetectWith(kV6e, env);
  EXPECT_EQ(d.devices.size(), 4u);
  EXPECT_EQ(d.devices[0].type, "TPU-V6E");  // the hardware wins
  EXPECT_THAT(d.warnings,
              Contains(HasSubstr("names TPU-V5LITEPOD, but the chips are TPU-V6E (PCI device id "
                                 "006f)")));
  EXPECT_TRUE(d.resources.empty());
}

TEST(TpuPluginTest, NoChipsNoLabels) {
  Environment env;
  env.Set("TPU_ACCELERATOR_TYPE", "v6e-16");
  const Detection d = DetectWith(kFixtures + "/does-not-exist", env);
  EXPECT_THAT(d.devices, IsEmpty());
  EXPECT_TRUE(d.labels.empty());
  EXPECT_THAT(d.warnings, Contains(HasSubstr("no TPU chip was found")));
}

TEST(TpuPluginTest, ValidateQuantity) {
  auto p = MakeTpuPlugin();
  for (int ok : {1, 2, 4, 8}) EXPECT_TRUE(p->ValidateQuantity(Quantity::FromInt(ok)).ok()) << ok;
  for (int bad : {0, 3, 5, 6, 16}) {
    const absl::Status s = p->ValidateQuantity(Quantity::FromInt(bad));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(s.message()), HasSubstr("1, 2, 4 or 8"));
  }
  EXPECT_FALSE(p->ValidateQuantity(Quantity::FromRaw(5000)).ok());   // 0.5
  EXPECT_FALSE(p->ValidateQuantity(Quantity::FromRaw(20001)).ok());  // 2.0001
}

TEST(TpuPluginTest, MasksHaveChipGranularity) {
  Environment env = Environment::ForSysroot(Sysroot(kV6e));
  env.Set("TESSERA_TPU_RESOURCE_PER_CHIP", "2");
  const Detection d = DetectWith(kV6e, env);
  auto p = MakeTpuPlugin();
  auto parsed = p->ParseMask("2,0", d.devices);
  ASSERT_TRUE(parsed.ok());
  EXPECT_THAT(*parsed, ElementsAre(4, 5, 0, 1));
  EXPECT_THAT(*p->ParseMask("NoDevFiles", d.devices), IsEmpty());
  auto missing = p->ParseMask("9", d.devices);
  ASSERT_TRUE(missing.ok());
  EXPECT_THAT(*missing, ElementsAre(18, 19));  // not detected: the caller reports it
  auto bad = p->ParseMask("0,x", d.devices);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("\"x\" is not a chip index"));
  EXPECT_THAT(*p->ParseMask("1,3", Detect(kV6e).devices), ElementsAre(1, 3));
}

}  // namespace
}  // namespace tessera

// NVIDIA detection on the fixture machines, with the fake NVML (tests/fake_nvml) loaded through
// the real dlopen path, without NVML (sysfs fallback), and with NVML present but broken.
#include "hardware/plugins/nvidia/nvidia_detect.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "hardware/node_label_keys.h"
#include "hardware/plugins/nvidia/nvidia_plugin.h"
#include "hardware/testing/fake_tree.h"
#include "hardware/testing/plugin_test_support.h"
#include "labels/label.h"

namespace tessera {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using testing::FakeTree;
using testing::FixtureHost;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

const std::string kFixtures = std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/hardware";
const std::string kH100 = kFixtures + "/h100-sxm-8";
const std::string kWorkstation = kFixtures + "/workstation-rtx4090";
constexpr char kFakeNvml[] = TESSERA_FAKE_NVML;
constexpr char kFakeNvmlOld[] = TESSERA_FAKE_NVML_OLD;
constexpr char kTableVar[] = "TESSERA_FAKE_NVML_TABLE";

// The fake NVML reads its table from the process environment at nvmlInit_v2.
class ScopedTable {
 public:
  explicit ScopedTable(const std::string& path) { setenv(kTableVar, path.c_str(), 1); }
  ~ScopedTable() { unsetenv(kTableVar); }
};

// Runs the plugin on `host` with NVML from `library` ("": the usual search).
Detection Detect(FixtureHost& host, const std::string& library = "") {
  host.options.nvml_library = library;
  return MakeNvidiaPlugin()->Detect(host.context());
}

int CountContaining(const std::vector<std::string>& lines, std::string_view needle) {
  int n = 0;
  for (const std::string& l : lines) n += l.find(needle) != std::string::npos;
  return n;
}

std::vector<std::string> BusIds(const Detection& d) {
  std::vector<std::string> out;
  for (const Device& dev : d.devices) out.push_back(dev.pci_bus_id);
  return out;
}

void ExpectEightH100s(const Detection& d) {
  EXPECT_THAT(BusIds(d),
              ElementsAre("0000:1b:00.0", "0000:43:00.0", "0000:52:00.0", "0000:61:00.0",
                          "0000:9d:00.0", "0000:c3:00.0", "0000:d1:00.0", "0000:df:00.0"));
  for (size_t i = 0; i < d.devices.size(); ++i) {
    const Device& dev = d.devices[i];
    EXPECT_EQ(dev.family, "nvidia");
    EXPECT_EQ(dev.index, static_cast<int>(i));
    EXPECT_EQ(dev.type, "H100");
    EXPECT_EQ(dev.model, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(dev.numa_node, i < 4 ? 0 : 1) << dev.pci_bus_id;
    EXPECT_THAT(dev.uuid, HasSubstr("GPU-5a1e000" + std::to_string(i)));
    EXPECT_EQ(dev.attributes.at("driver_version"), "570.133.20");
  }
}

// All 28 pairs of the 8 GPUs through the NVSwitch fabric, 18 NVLink 4 lanes each.
void ExpectNvSwitchFabric(const Detection& d, int lanes, double gbps) {
  ASSERT_EQ(d.links.size(), 28u);
  std::set<std::pair<int, int>> pairs;
  for (const DeviceLink& l : d.links) {
    EXPECT_EQ(l.kind, LinkKind::kNvSwitch);
    EXPECT_LT(l.a, l.b);
    EXPECT_EQ(l.lanes, lanes);
    EXPECT_DOUBLE_EQ(l.gigabytes_per_second, gbps);
    EXPECT_EQ(l.bandwidth_class, ClassifyBandwidth(gbps));
    pairs.insert({l.a, l.b});
  }
  EXPECT_EQ(pairs.size(), 28u);
}

void ExpectNvSwitchWarnings(const Detection& d) {
  EXPECT_EQ(CountContaining(d.warnings, "(10de:22a3 class 0x068000 driver nvidia) is an NVSwitch"),
            4);
  for (const char* bus : {"0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"}) {
    EXPECT_EQ(CountContaining(d.warnings, bus), 1) << bus;
  }
}

// ---- NVML (fake) ------------------------------------------------------------------------------

TEST(NvidiaDetectTest, H100WithNvml) {
  ScopedTable table(kFixtures + "/h100-sxm-8.nvml");
  FixtureHost host(kH100);
  const Detection d = Detect(host, kFakeNvml);
  EXPECT_EQ(d.probe, "nvml");
  ASSERT_EQ(d.devices.size(), 8u);
  ExpectEightH100s(d);
  for (const Device& dev : d.devices) {
    EXPECT_EQ(dev.memory_bytes, 85520809984u);
    EXPECT_EQ(dev.attributes.at("pci_id"), "10de:2330");
  }
  ExpectNvSwitchFabric(d, 18, 18 * 25.0);
  EXPECT_EQ(d.links.front().bandwidth_class, BandwidthClass::kHigh);
  ExpectNvSwitchWarnings(d);
  EXPECT_EQ(d.warnings.size(), 4u) << "only the NVSwitch functions are refused";
  EXPECT_THAT(d.labels, IsEmpty()) << "one HGX board is no multi-host fabric domain";
  EXPECT_TRUE(d.errors.empty());
  EXPECT_THAT(d.evidence, Contains(HasSubstr("driver 570.133.20, 8 device(s)")));
}

TEST(NvidiaDetectTest, WorkstationWithNvml) {
  ScopedTable table(kFixtures + "/workstation-rtx4090.nvml");
  FixtureHost host(kWorkstation);
  const Detection d = Detect(host, kFakeNvml);
  EXPECT_EQ(d.probe, "nvml");
  ASSERT_EQ(d.devices.size(), 1u);
  const Device& dev = d.devices[0];
  EXPECT_EQ(dev.index, 0);
  EXPECT_EQ(dev.type, "RTX-4090");
  EXPECT_EQ(dev.model, "NVIDIA GeForce RTX 4090");
  EXPECT_EQ(dev.uuid, "GPU-3b0e61f2-96a4-5c8d-e1b7-40f2c9d8a611");
  EXPECT_EQ(dev.memory_bytes, 24564ull * 1024 * 1024);
  EXPECT_EQ(dev.pci_bus_id, "0000:01:00.0");
  EXPECT_EQ(dev.numa_node, -1);  // a desktop's sysfs says -1
  EXPECT_THAT(d.links, IsEmpty());
  // The HD-audio function is refused by name; the Intel iGPU is not ours to mention.
  EXPECT_THAT(d.warnings, ElementsAre("0000:01:00.1 (10de:22ba class 0x040300 driver "
                                      "snd_hda_intel) is an HD-audio function, not a GPU; not "
                                      "counted"));
}

TEST(NvidiaDetectTest, LibraryFromEnvironmentVariable) {
  ScopedTable table(kFixtures + "/workstation-rtx4090.nvml");
  FixtureHost host(kWorkstation);
  host.env.Set("TESSERA_NVML_LIBRARY", kFakeNvml);
  const Detection d = Detect(host);
  EXPECT_EQ(d.probe, "nvml");
  EXPECT_EQ(d.devices.size(), 1u);
}

// ---- no NVML: sysfs and /proc/driver/nvidia ----------------------------------------------------

TEST(NvidiaDetectTest, H100WithoutNvmlFallsBackToSysfs) {
  FixtureHost host(kH100);  // a fake tree without usr/lib/.../libnvidia-ml.so.1
  const Detection d = Detect(host);
  EXPECT_EQ(d.probe, "sysfs");
  ASSERT_EQ(d.devices.size(), 8u);
  ExpectEightH100s(d);  // model and UUID from /proc/driver/nvidia/gpus/<bdf>/information
  for (const Device& dev : d.devices) EXPECT_EQ(dev.memory_bytes, 0u);
  EXPECT_EQ(CountContaining(d.warnings, "NVML not available (the tree at " + kH100 +
                                            " has no /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1)"
                                            ": devices from sysfs and /proc/driver/nvidia; link "
                                            "topology inferred"),
            1);
  ExpectNvSwitchWarnings(d);
  ExpectNvSwitchFabric(d, 18, 450);  // lanes from the H100 SXM5 device id
  EXPECT_THAT(d.evidence, Contains(AllOf(HasSubstr("inferred"), HasSubstr("4 NVSwitch"))));
}

TEST(NvidiaDetectTest, WorkstationWithoutNvml) {
  FixtureHost host(kWorkstation);
  const Detection d = Detect(host);
  EXPECT_EQ(d.probe, "sysfs");
  ASSERT_EQ(d.devices.size(), 1u);
  EXPECT_EQ(d.devices[0].type, "RTX-4090");
  EXPECT_EQ(d.devices[0].uuid, "GPU-3b0e61f2-96a4-5c8d-e1b7-40f2c9d8a611");
  EXPECT_EQ(d.devices[0].attributes.at("driver_version"), "570.133.07");
  EXPECT_THAT(d.links, IsEmpty()) << "no NVSwitch, nothing to infer";
  EXPECT_EQ(CountContaining(d.warnings, "NVML not available"), 1);
  EXPECT_EQ(CountContaining(d.warnings, "0000:01:00.1 (10de:22ba"), 1);
}

TEST(NvidiaDetectTest, FallbackRefusesDisplayFunctionsWithoutTheNvidiaDriver) {
  PciInventory pci({
      PciFunction{.bus_id = "0000:3b:00.0",
                  .vendor_id = 0x10de,
                  .device_id = 0x2330,
                  .class_code = 0x030200,
                  .driver = "nvidia",
                  .numa_node = 0},
      PciFunction{.bus_id = "0000:5e:00.0",
                  .vendor_id = 0x10de,
                  .device_id = 0x2330,
                  .class_code = 0x030200,
                  .driver = "vfio-pci"},
  });
  FakeTree empty;
  FixtureHost host(empty.root(), std::move(pci));
  const Detection d = Detect(host);
  ASSERT_EQ(d.devices.size(), 1u);
  EXPECT_EQ(d.devices[0].pci_bus_id, "0000:3b:00.0");
  EXPECT_EQ(d.devices[0].type, "H100") << "type from the device id when /proc has no name";
  EXPECT_THAT(d.warnings, Contains("0000:5e:00.0 (10de:2330 class 0x030200 driver vfio-pci) is "
                                   "not bound to the nvidia driver; not counted"));
}

TEST(NvidiaDetectTest, NoNvidiaHardwareMeansNoWarning) {
  FakeTree empty;
  FixtureHost host(empty.root());
  const Detection d = Detect(host);
  EXPECT_THAT(d.devices, IsEmpty());
  EXPECT_THAT(d.warnings, IsEmpty());
  EXPECT_THAT(d.evidence, Contains(HasSubstr("no NVIDIA PCI function")));
}

// ---- NVML present but broken ---------------------------------------------------------------

TEST(NvidiaDetectTest, NvmlInitFailingFallsBack) {
  unsetenv(kTableVar);  // the fake's "driver not loaded"
  FixtureHost host(kH100);
  const Detection d = Detect(host, kFakeNvml);
  EXPECT_EQ(d.probe, "sysfs");
  EXPECT_EQ(d.devices.size(), 8u);
  EXPECT_EQ(
      CountContaining(d.warnings, "NVML not available (nvmlInit_v2 failed: Driver Not Loaded (9))"),
      1);
}

TEST(NvidiaDetectTest, MalformedTableMakesInitFail) {
  FakeTree t;
  ScopedTable table(t.Write("/bad.nvml", "driver 570\nmemory 5\n"));  // memory before any gpu
  FixtureHost host(kWorkstation);
  const Detection d = Detect(host, kFakeNvml);
  EXPECT_EQ(d.probe, "sysfs");
  EXPECT_EQ(d.devices.size(), 1u);
  EXPECT_EQ(CountContaining(d.warnings, "nvmlInit_v2 failed: NVML Shared Library Not Found (12)"),
            1);
}

TEST(NvidiaDetectTest, UnloadableLibraryFallsBack) {
  FixtureHost host(kWorkstation);
  const Detection d = Detect(host, "/nonexistent/libnvidia-ml.so.1");
  EXPECT_EQ(d.probe, "sysfs");
  EXPECT_EQ(CountContaining(d.warnings, "NVML not available (cannot load /nonexistent/"), 1);
}

// ---- PCI claim check --------------------------------------------------------------------------

TEST(NvidiaDetectTest, NvmlDevicesMustBeNvidiaDisplayFunctions) {
  FakeTree t;
  ScopedTable table(t.Write("/claim.nvml",
                            "driver 570.133.20\n"
                            "gpu 0000:18:00.0\nname NVIDIA H100 80GB HBM3\n"     // a ConnectX-7
                            "gpu 0000:1b:00.0\nname NVIDIA H100 80GB HBM3\n"     // a real GPU
                            "gpu 0000:05:00.0\nname NVIDIA H100 80GB HBM3\n"     // an NVSwitch
                            "gpu 0000:77:00.0\nname NVIDIA H100 80GB HBM3\n"));  // nothing
  FixtureHost host(kH100);
  const Detection d = Detect(host, kFakeNvml);
  ASSERT_EQ(d.devices.size(), 1u);
  EXPECT_EQ(d.devices[0].pci_bus_id, "0000:1b:00.0");
  EXPECT_EQ(d.devices[0].index, 1) << "the NVML index (the CUDA ordinal) is kept";
  EXPECT_THAT(d.warnings, Contains("NVML device 0 (NVIDIA H100 80GB HBM3) at 0000:18:00.0 "
                                   "dropped: the PCI function there is 15b3:1021 class 0x020000 "
                                   "driver mlx5_core, not an NVIDIA display controller"));
  EXPECT_THAT(d.warnings, Contains(HasSubstr("NVML device 2 (NVIDIA H100 80GB HBM3) at "
                                             "0000:05:00.0 dropped")));
  EXPECT_THAT(d.warnings, Contains("NVML device 3 (NVIDIA H100 80GB HBM3) at 0000:77:00.0 "
                                   "dropped: no PCI function at that bus id"));
  // The seven real GPUs NVML did not report are named too.
  EXPECT_EQ(CountContaining(d.warnings, "is a display function NVML does not report"), 7);
}

TEST(NvidiaDetectTest, WithoutAPciBusNvmlDevicesAreAcceptedWithANote) {
  ScopedTable table(kFixtures + "/h100-sxm-8.nvml");
  FakeTree empty;
  FixtureHost host(empty.root());
  const Detection d = Detect(host, kFakeNvml);
  ASSERT_EQ(d.devices.size(), 8u);
  EXPECT_EQ(d.devices[7].numa_node, -1);
  EXPECT_THAT(d.evidence, Contains(HasSubstr("without the PCI claim check")));
  ExpectNvSwitchFabric(d, 18, 450);
}

// ---- links and fabric -------------------------------------------------------------------------

TEST(NvidiaDetectTest, DirectNvLinksCountLanesPerPair) {
  // Four V100s in part of a DGX-1 hybrid cube mesh: 0-1 x2, 0-2 x1, 1-3 x1 (seen from both ends),
  // one inactive link, and a link to a GPU that is not counted (ignored).
  FakeTree t;  // an empty machine that also holds the NVML table
  ScopedTable table(t.Write("/mesh.nvml",
                            "driver 535.183.01\n"
                            "gpu 0000:06:00.0\nname Tesla V100-SXM2-16GB\nnvlink_version 2.0\n"
                            "link gpu 0000:07:00.0\nlink gpu 0000:07:00.0\nlink gpu 0000:0a:00.0\n"
                            "link inactive\nlink gpu 0000:99:00.0\n"
                            "gpu 0000:07:00.0\nname Tesla V100-SXM2-16GB\nnvlink_version 2.0\n"
                            "link gpu 0000:06:00.0\nlink gpu 0000:06:00.0\nlink gpu 0000:0b:00.0\n"
                            "gpu 0000:0a:00.0\nname Tesla V100-SXM2-16GB\nnvlink_version 2.0\n"
                            "link gpu 0000:06:00.0\n"
                            "gpu 0000:0b:00.0\nname Tesla V100-SXM2-16GB\nnvlink_version 2.0\n"
                            "link gpu 0000:07:00.0\n"));
  FixtureHost host(t.root());
  const Detection d = Detect(host, kFakeNvml);
  ASSERT_EQ(d.devices.size(), 4u);
  EXPECT_EQ(d.devices[0].type, "V100");
  ASSERT_EQ(d.links.size(), 3u);
  auto expect = [](const DeviceLink& l, int a, int b, int lanes) {
    EXPECT_EQ(l.kind, LinkKind::kNvLink);
    EXPECT_EQ(l.a, a);
    EXPECT_EQ(l.b, b);
    EXPECT_EQ(l.lanes, lanes);
    EXPECT_DOUBLE_EQ(l.gigabytes_per_second, lanes * 25.0);
    EXPECT_EQ(l.bandwidth_class, lanes == 2 ? BandwidthClass::kMedium : BandwidthClass::kLow);
  };
  expect(d.links[0], 0, 1, 2);
  expect(d.links[1], 0, 2, 1);
  expect(d.links[2], 1, 3, 1);
}

std::string FabricTable(const std::string& second_clique) {
  std::string t = "driver 570.133.20\n";
  for (int i = 0; i < 4; ++i) {
    t += "gpu 0000:0" + std::to_string(i + 1) + ":00.0\nname NVIDIA GB200\nnvlink_version 5.0\n";
    for (int l = 0; l < 18; ++l) t += "link switch 0000:f0:00.0\n";
    t += "fabric 0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0 " + (i == 1 ? second_clique : "7") + "\n";
  }
  return t;
}

TEST(NvidiaDetectTest, MultiHostNvlinkDomainLabels) {
  FakeTree t;  // an empty machine that also holds the NVML table
  ScopedTable table(t.Write("/nvl72.nvml", FabricTable("7")));
  FixtureHost host(t.root());
  const Detection d = Detect(host, kFakeNvml);
  ASSERT_EQ(d.devices.size(), 4u);
  EXPECT_EQ(d.devices[0].type, "GB200");
  const std::string domain = d.labels.at(std::string(labels::kFabricDomain));
  EXPECT_EQ(domain, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0.7");
  EXPECT_TRUE(ValidateLabelValue(domain).ok()) << ValidateLabelValue(domain);
  EXPECT_EQ(d.labels.at(std::string(labels::kFabricKind)), "nvlink");
  ASSERT_EQ(d.links.size(), 6u);
  EXPECT_DOUBLE_EQ(d.links[0].gigabytes_per_second, 18 * 50.0);  // NVLink 5
}

TEST(NvidiaDetectTest, DisagreeingFabricDomainsSetNoLabel) {
  FakeTree t;  // an empty machine that also holds the NVML table
  ScopedTable table(t.Write("/split.nvml", FabricTable("8")));
  FixtureHost host(t.root());
  const Detection d = Detect(host, kFakeNvml);
  EXPECT_THAT(d.labels, IsEmpty());
  EXPECT_EQ(CountContaining(d.warnings, "GPUs disagree on their NVLink fabric domain"), 1);
}

TEST(NvidiaDetectTest, OlderDriverWithoutOptionalEntryPoints) {
  ScopedTable table(kFixtures + "/h100-sxm-8.nvml");
  FixtureHost host(kH100);
  const Detection d = Detect(host, kFakeNvmlOld);
  EXPECT_EQ(d.probe, "nvml");
  ASSERT_EQ(d.devices.size(), 8u);
  // Remote types come from the remote bus ids: the NVSwitch functions in the PCI inventory.
  ExpectNvSwitchFabric(d, 18, 450);
  EXPECT_THAT(d.evidence, Contains(AllOf(HasSubstr("lacks nvmlDeviceGetNvLinkRemoteDeviceType"),
                                         HasSubstr("nvmlDeviceGetGpuFabricInfo"))));
  EXPECT_THAT(d.evidence, Contains(HasSubstr("classified by remote PCI bus id")));
  EXPECT_THAT(d.warnings, Not(Contains(HasSubstr("NVML not available"))));
}

// ---- which library ----------------------------------------------------------------------------

TEST(NvmlLibraryForTest, OptionThenVariableThenSonameOrTreeCopy) {
  Sysroot live("/");
  Sysroot fake(kH100);
  Environment env;
  PciInventory pci;
  DetectionOptions options;
  std::string why;
  EXPECT_EQ(NvmlLibraryFor({live, env, pci, options}, &why), "libnvidia-ml.so.1");
  EXPECT_EQ(NvmlLibraryFor({fake, env, pci, options}, &why), std::nullopt);
  EXPECT_THAT(why, HasSubstr("has no /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"));
  env.Set("TESSERA_NVML_LIBRARY", "/opt/nvml.so");
  EXPECT_EQ(NvmlLibraryFor({fake, env, pci, options}, &why), "/opt/nvml.so");
  options.nvml_library = "/from/options.so";
  EXPECT_EQ(NvmlLibraryFor({fake, env, pci, options}, &why), "/from/options.so");

  // A fake tree that carries its own NVML gets that one.
  FakeTree tree;
  const std::string copy = tree.Write("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1");
  Sysroot with(tree.root());
  DetectionOptions none;
  Environment no_env;
  EXPECT_EQ(NvmlLibraryFor({with, no_env, pci, none}, &why), copy);
}

}  // namespace
}  // namespace tessera

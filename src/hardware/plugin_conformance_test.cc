// The one suite every accelerator plugin passes: identity, quantity rules, mask round trips,
// isolation, detection on every fake machine under tests/fixtures/hardware (a plugin must
// never claim another family's device, and detection must be total and deterministic),
// telemetry on every fake machine (total, figures within their ranges, and nothing reported for
// a device the plugin does not own), and device messages on every fake machine (total, quiet
// while nothing changes, and nothing said of a device the plugin does not own).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "hardware/plugin_registry.h"
#include "hardware/testing/fake_tree.h"
#include "resources/resource_set.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

const std::string kFixtures = std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/hardware";

std::vector<std::string> FixtureMachines() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(kFixtures)) {
    if (entry.is_directory()) names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

Detection DetectOn(const AcceleratorPlugin& plugin, const std::string& root) {
  Sysroot sysroot(root);
  Environment env = Environment::ForSysroot(sysroot);
  PciInventory pci = PciInventory::Scan(sysroot, nullptr);
  DetectionOptions options;
  return plugin.Detect(DetectionContext{sysroot, env, pci, options});
}

std::string Describe(const Detection& d) {
  std::string out;
  for (const Device& dev : d.devices) out += std::to_string(dev.index) + ":" + dev.pci_bus_id + " ";
  return out;
}

bool SameDevices(const Detection& a, const Detection& b) {
  if (a.devices.size() != b.devices.size() || a.links.size() != b.links.size()) return false;
  for (size_t i = 0; i < a.devices.size(); ++i) {
    const Device& x = a.devices[i];
    const Device& y = b.devices[i];
    if (x.index != y.index || x.uuid != y.uuid || x.type != y.type ||
        x.pci_bus_id != y.pci_bus_id || x.numa_node != y.numa_node) {
      return false;
    }
  }
  return a.labels == b.labels && a.resources == b.resources;
}

class PluginConformanceTest : public ::testing::TestWithParam<const AcceleratorPlugin*> {};

TEST_P(PluginConformanceTest, NamesAreWellFormed) {
  const AcceleratorPlugin& p = *GetParam();
  EXPECT_FALSE(p.family().empty());
  EXPECT_TRUE(ValidateResourceName(p.resource_name()).ok()) << p.resource_name();
  EXPECT_FALSE(p.visible_devices_env().empty());
  for (char c : p.visible_devices_env()) {
    EXPECT_TRUE(std::isupper(static_cast<unsigned char>(c)) || c == '_') << p.visible_devices_env();
  }
  EXPECT_EQ(FindAcceleratorPlugin(p.family()), &p);
}

TEST_P(PluginConformanceTest, QuantityRulesRejectZeroAndNegativeAndAcceptOne) {
  const AcceleratorPlugin& p = *GetParam();
  EXPECT_TRUE(p.ValidateQuantity(Quantity::FromInt(1)).ok());
  EXPECT_FALSE(p.ValidateQuantity(Quantity::FromInt(0)).ok());
  EXPECT_FALSE(p.ValidateQuantity(Quantity::FromInt(-1)).ok());
  const absl::Status bad = p.ValidateQuantity(Quantity::FromRaw(15000));  // 1.5
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << p.family();
  EXPECT_FALSE(bad.message().empty());
}

TEST_P(PluginConformanceTest, MasksRoundTrip) {
  const AcceleratorPlugin& p = *GetParam();
  const std::vector<int> ids = {0, 2, 3};
  std::vector<Device> devices;
  for (int i = 0; i < 4; ++i)
    devices.push_back(Device{.family = std::string(p.family()), .index = i});
  auto parsed = p.ParseMask(p.FormatMask(ids), devices);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, ids) << p.FormatMask(ids);
  auto empty = p.ParseMask("", devices);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->empty());
  EXPECT_FALSE(p.ParseMask("zero", devices).ok());
}

TEST_P(PluginConformanceTest, DetectionOnAnEmptyTreeFindsNothing) {
  testing::FakeTree empty;
  Detection d = DetectOn(*GetParam(), empty.root());
  EXPECT_TRUE(d.devices.empty());
  EXPECT_TRUE(d.links.empty());
  EXPECT_TRUE(d.errors.empty());
  EXPECT_TRUE(d.warnings.empty()) << d.warnings.front();
}

TEST_P(PluginConformanceTest, DetectionOnEveryFixtureIsSoundAndDeterministic) {
  const AcceleratorPlugin& p = *GetParam();
  for (const std::string& machine : FixtureMachines()) {
    SCOPED_TRACE(machine);
    const std::string root = kFixtures + "/" + machine;
    const Detection d = DetectOn(p, root);
    EXPECT_TRUE(SameDevices(d, DetectOn(p, root))) << "detection is not deterministic";
    PciInventory pci = PciInventory::Scan(Sysroot(root), nullptr);
    std::set<int> indices;
    int previous = -1;
    for (const Device& dev : d.devices) {
      EXPECT_EQ(dev.family, p.family());
      EXPECT_FALSE(dev.type.empty());
      EXPECT_GT(dev.index, previous) << "devices must be sorted by index: " << Describe(d);
      previous = dev.index;
      indices.insert(dev.index);
      if (!dev.pci_bus_id.empty()) {
        const PciFunction* f = pci.Find(dev.pci_bus_id);
        ASSERT_NE(f, nullptr) << dev.pci_bus_id << " is not a PCI function of the tree";
        // Accelerators report display (0x03), processing-accelerator (0x12), or vendor classes
        // (TPUs 0xff0000, Trainium 0x0880); never a NIC, bridge (NVSwitch), audio or storage.
        const uint8_t base = f->base_class();
        EXPECT_TRUE(base != 0x01 && base != 0x02 && base != 0x04 && base != 0x06)
            << dev.pci_bus_id << " class " << HexId(f->class_code, 6);
      }
    }
    for (const DeviceLink& l : d.links) {
      EXPECT_NE(l.a, l.b);
      EXPECT_TRUE(indices.count(l.a) && indices.count(l.b)) << l.a << "-" << l.b;
      EXPECT_GE(l.lanes, 1);
      EXPECT_EQ(l.bandwidth_class, ClassifyBandwidth(l.gigabytes_per_second));
    }
    if (d.devices.size() >= 2) {
      const int first = d.devices.front().index;
      EnvChanges env = p.IsolationEnv(std::vector<int>{first}, d.devices);
      bool sets_mask = false;
      for (const EnvChange& c : env) {
        sets_mask = sets_mask ||
                    (c.name == p.visible_devices_env() && c.value.has_value() && !c.value->empty());
      }
      EXPECT_TRUE(sets_mask) << "one device of several must set " << p.visible_devices_env();
    }
  }
}

// Whether every present figure of `t` lies in its range.
void ExpectFiguresInRange(const DeviceTelemetry& t) {
  for (const std::optional<double>* ratio :
       {&t.utilization_ratio, &t.duty_cycle_ratio, &t.sm_activity_ratio, &t.tensor_activity_ratio,
        &t.memory_busy_ratio, &t.memory_bandwidth_ratio, &t.power_ratio}) {
    if (ratio->has_value()) {
      EXPECT_GE(**ratio, 0.0);
      EXPECT_LE(**ratio, 1.0);
    }
  }
  if (t.memory_used_bytes && t.memory_total_bytes) {
    EXPECT_LE(*t.memory_used_bytes, *t.memory_total_bytes);
  }
  EXPECT_GE(t.power_watts.value_or(0), 0.0);
  EXPECT_GE(t.energy_joules.value_or(0), 0.0);
  for (const std::optional<double>* celsius :
       {&t.temperature_celsius, &t.memory_temperature_celsius}) {
    if (celsius->has_value()) {
      EXPECT_GT(**celsius, -60.0);
      EXPECT_LT(**celsius, 150.0);
    }
  }
  EXPECT_TRUE(!t.HasAnyFigure() || !t.source.empty()) << "figures without a source";
}

TEST_P(PluginConformanceTest, TelemetryIsTotalOnEveryFixtureAndSilentForDevicesItDoesNotOwn) {
  const AcceleratorPlugin& p = *GetParam();
  const absl::Time start = absl::FromUnixSeconds(1'700'000'000);
  for (const std::string& machine : FixtureMachines()) {
    SCOPED_TRACE(machine);
    const std::string root = kFixtures + "/" + machine;
    Sysroot sysroot(root);
    auto reader = p.OpenTelemetry(TelemetryContext{sysroot, Environment::ForSysroot(sysroot), {}});
    ASSERT_NE(reader, nullptr);
    EXPECT_TRUE(reader->Read({}, start).devices.empty());

    // Its own devices, every other family's on this machine, and one of its family that this
    // machine does not have.
    std::vector<Device> asked = DetectOn(p, root).devices;
    const size_t own = asked.size();
    for (const AcceleratorPlugin* other : AcceleratorPlugins()) {
      if (other == &p) continue;
      for (Device& d : DetectOn(*other, root).devices) asked.push_back(std::move(d));
    }
    asked.push_back(Device{.family = std::string(p.family()),
                           .index = 99,
                           .uuid = "GPU-ffffffff-ffff-ffff-ffff-ffffffffffff",
                           .pci_bus_id = "0000:ff:1f.7",
                           .attributes = {{"chip", "99"}, {"core_in_chip", "0"}}});
    for (int round = 0; round < 2; ++round) {
      const FamilyTelemetry reading = reader->Read(asked, start + absl::Seconds(10 * round));
      ASSERT_EQ(reading.devices.size(), asked.size());
      for (size_t i = 0; i < asked.size(); ++i) {
        const DeviceTelemetry& t = reading.devices[i];
        SCOPED_TRACE(asked[i].family + "/" + std::to_string(asked[i].index));
        EXPECT_EQ(t.family, asked[i].family);
        EXPECT_EQ(t.index, asked[i].index);
        ExpectFiguresInRange(t);
        EXPECT_TRUE(i < own || !t.HasAnyFigure()) << "reported a device it does not own";
      }
    }
  }
}

TEST_P(PluginConformanceTest, DeviceMessagesAreQuietOnEveryFixtureAndNeverOfOthersDevices) {
  const AcceleratorPlugin& p = *GetParam();
  const absl::Time start = absl::FromUnixSeconds(1'700'000'000);
  for (const std::string& machine : FixtureMachines()) {
    SCOPED_TRACE(machine);
    const std::string root = kFixtures + "/" + machine;
    auto reader = p.OpenErrorWatch(DeviceErrorContext{Sysroot(root), {}});
    ASSERT_NE(reader, nullptr);
    std::vector<Device> asked = DetectOn(p, root).devices;
    const size_t own = asked.size();
    for (const AcceleratorPlugin* other : AcceleratorPlugins()) {
      if (other == &p) continue;
      for (Device& d : DetectOn(*other, root).devices) asked.push_back(std::move(d));
    }
    const DeviceErrorSnapshot snapshot = reader->Snapshot(asked, start);
    const DeviceErrorReport unchanged = reader->MessagesSince(snapshot, asked, start);
    EXPECT_THAT(unchanged.messages, ::testing::IsEmpty());
    EXPECT_THAT(unchanged.warnings, ::testing::IsEmpty());
    // As if every counter had been 0 when the worker started: still nothing of others' devices.
    DeviceErrorSnapshot zeroed = snapshot;
    for (auto& [key, value] : zeroed.marks) value = 0;
    const std::vector<Device> others(asked.begin() + static_cast<std::ptrdiff_t>(own), asked.end());
    EXPECT_THAT(reader->MessagesSince(zeroed, others, start).messages, ::testing::IsEmpty());
  }
}

INSTANTIATE_TEST_SUITE_P(AllFamilies, PluginConformanceTest,
                         ::testing::ValuesIn(AcceleratorPlugins()), [](const auto& info) {
                           std::string name(info.param->family());
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

TEST(PluginRegistryTest, FamiliesAreUniqueAndInClaimOrder) {
  std::vector<std::string> names;
  for (const AcceleratorPlugin* p : AcceleratorPlugins()) names.emplace_back(p->family());
  EXPECT_THAT(names,
              ::testing::ElementsAre("nvidia", "amd", "intel-gpu", "tpu", "neuron", "gaudi"));
  EXPECT_EQ(FindAcceleratorPlugin("no-such-family"), nullptr);
}

TEST(PluginRegistryTest, NoPciFunctionIsClaimedByTwoFamilies) {
  for (const std::string& machine : FixtureMachines()) {
    SCOPED_TRACE(machine);
    std::map<std::string, std::string> owner;
    for (const AcceleratorPlugin* p : AcceleratorPlugins()) {
      for (const Device& dev : DetectOn(*p, kFixtures + "/" + machine).devices) {
        if (dev.pci_bus_id.empty()) continue;
        auto [it, inserted] = owner.emplace(dev.pci_bus_id, std::string(p->family()));
        EXPECT_TRUE(inserted || it->second == p->family())
            << dev.pci_bus_id << " claimed by " << it->second << " and " << p->family();
      }
    }
  }
}

}  // namespace
}  // namespace tessera

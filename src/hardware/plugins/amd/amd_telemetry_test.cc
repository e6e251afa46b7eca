// AMD telemetry from amdgpu's sysfs: the MI300X fixture's figures exactly as its files hold them,
// and the fallbacks and omissions of other products on hand-made trees.
#include "hardware/plugins/amd/amd_telemetry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hardware/plugins/amd/amd_plugin.h"
#include "hardware/testing/fake_tree.h"
#include "hardware/testing/plugin_test_support.h"

namespace tessera::testing {
namespace {

constexpr uint64_t kGiB = 1024ull * 1024 * 1024;

TEST(AmdTelemetryTest, Mi300xFiguresAreTheSysfsValues) {
  const std::vector<Device> devices = DetectOnFixture(*MakeAmdPlugin(), "mi300x-8");
  ASSERT_EQ(devices.size(), 8u);
  const FamilyTelemetry reading = ReadOnce(*MakeAmdPlugin(), FixturePath("mi300x-8"), devices);
  EXPECT_THAT(reading.warnings, IsEmpty());
  ASSERT_EQ(reading.devices.size(), 8u);
  const DeviceTelemetry& gpu0 = reading.devices[0];
  EXPECT_EQ(gpu0.source, "sysfs");
  EXPECT_THAT(gpu0.utilization_ratio, Optional(1.0));
  EXPECT_THAT(gpu0.memory_busy_ratio, Optional(0.35));
  EXPECT_THAT(gpu0.memory_used_bytes, Optional(150 * kGiB));
  EXPECT_THAT(gpu0.memory_total_bytes, Optional(205822885888u));
  EXPECT_THAT(gpu0.power_watts, Optional(652.0));         // power1_input: no average
  EXPECT_THAT(gpu0.temperature_celsius, Optional(71.0));  // junction: no edge sensor
  EXPECT_THAT(gpu0.memory_temperature_celsius, Optional(58.0));
  EXPECT_THAT(gpu0.warnings, IsEmpty());
  // amdgpu's sysfs has none of these.
  EXPECT_EQ(gpu0.energy_joules, std::nullopt);
  EXPECT_EQ(gpu0.duty_cycle_ratio, std::nullopt);
  EXPECT_EQ(gpu0.sm_activity_ratio, std::nullopt);
  EXPECT_EQ(gpu0.tensor_activity_ratio, std::nullopt);
  EXPECT_EQ(gpu0.memory_bandwidth_ratio, std::nullopt);
  EXPECT_EQ(gpu0.power_ratio, std::nullopt);

  const DeviceTelemetry& idle = reading.devices[4];
  EXPECT_THAT(idle.utilization_ratio, Optional(0.0));
  EXPECT_THAT(idle.memory_used_bytes, Optional(312u * 1024 * 1024));
  EXPECT_THAT(idle.power_watts, Optional(140.0));
  EXPECT_THAT(reading.devices[7].power_watts, Optional(395.25));
  EXPECT_THAT(reading.devices[7].utilization_ratio, Optional(0.5));
}

// A card with an edge sensor and both power files, its hwmon without labels (older kernels).
TEST(AmdTelemetryTest, AverageBeatsInstantPowerAndUnlabelledSensorsGoByNumber) {
  FakeTree tree;
  const std::string fn = tree.PciFunction({.bdf = "0000:03:00.0",
                                           .vendor = 0x1002,
                                           .device = 0x740f,
                                           .pci_class = 0x038000,
                                           .driver = "amdgpu"});
  tree.Write(fn + "/gpu_busy_percent", "7\n");
  tree.Write(fn + "/hwmon/hwmon0/name", "amdgpu\n");
  tree.Write(fn + "/hwmon/hwmon0/power1_average", "300500000\n");
  tree.Write(fn + "/hwmon/hwmon0/power1_input", "310000000\n");
  tree.Write(fn + "/hwmon/hwmon0/temp1_input", "45000\n");
  tree.Write(fn + "/hwmon/hwmon0/temp2_input", "52000\n");
  const Device gpu{.family = "amd", .index = 0, .pci_bus_id = "0000:03:00.0"};
  const DeviceTelemetry t = ReadOnce(*MakeAmdPlugin(), tree.root(), {gpu}).devices[0];
  EXPECT_THAT(t.utilization_ratio, Optional(0.07));
  EXPECT_THAT(t.power_watts, Optional(300.5));
  EXPECT_THAT(t.temperature_celsius, Optional(45.0));
  EXPECT_EQ(t.memory_temperature_celsius, std::nullopt);  // no temp3
  // Files this product lacks are omissions, not errors.
  EXPECT_EQ(t.memory_busy_ratio, std::nullopt);
  EXPECT_EQ(t.memory_used_bytes, std::nullopt);
  EXPECT_THAT(t.warnings, IsEmpty());
}

TEST(AmdTelemetryTest, MalformedValuesAreDroppedWithAWarning) {
  FakeTree tree;
  const std::string fn = tree.PciFunction({.bdf = "0000:03:00.0",
                                           .vendor = 0x1002,
                                           .device = 0x740f,
                                           .pci_class = 0x038000,
                                           .driver = "amdgpu"});
  tree.Write(fn + "/gpu_busy_percent", "140\n");
  tree.Write(fn + "/mem_info_vram_used", "lots\n");
  const Device gpu{.family = "amd", .index = 0, .pci_bus_id = "0000:03:00.0"};
  const DeviceTelemetry t = ReadOnce(*MakeAmdPlugin(), tree.root(), {gpu}).devices[0];
  EXPECT_FALSE(t.HasAnyFigure());
  EXPECT_THAT(t.warnings, ElementsAre(HasSubstr("gpu_busy_percent 140 is not a percentage"),
                                      HasSubstr("mem_info_vram_used")));
}

TEST(AmdTelemetryTest, AGpuWithoutSysfsOrOfAnotherFamilyHasNoFigures) {
  const Device gone{.family = "amd", .index = 3, .pci_bus_id = "0000:99:00.0"};
  const Device nvidia{.family = "nvidia", .index = 0, .pci_bus_id = "0000:03:00.0"};
  const FamilyTelemetry reading =
      ReadOnce(*MakeAmdPlugin(), FixturePath("mi300x-8"), {gone, nvidia});
  EXPECT_FALSE(reading.devices[0].HasAnyFigure());
  EXPECT_THAT(reading.devices[0].warnings, ElementsAre(HasSubstr("GPU 3: no sysfs directory")));
  EXPECT_FALSE(reading.devices[1].HasAnyFigure());
  EXPECT_THAT(reading.devices[1].warnings, ElementsAre(HasSubstr("is not a amd device")));
}

}  // namespace
}  // namespace tessera::testing

// Intel GPU telemetry from i915 / xe hwmon: the Max 1550 fixture's energy counters (the card's
// hwmon, not its tiles'), power from two readings, xe's temperatures, and what stays absent.
#include "hardware/plugins/intel_gpu/intel_gpu_telemetry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hardware/plugins/intel_gpu/intel_gpu_plugin.h"
#include "hardware/testing/fake_tree.h"
#include "hardware/testing/plugin_test_support.h"

namespace tessera::testing {
namespace {

using ::testing::DoubleNear;

TEST(IntelGpuTelemetryTest, Max1550EnergyComesFromTheCardsHwmonAndPowerNeedsTwoReadings) {
  const std::vector<Device> devices = DetectOnFixture(*MakeIntelGpuPlugin(), "intel-max-1550-4");
  ASSERT_EQ(devices.size(), 4u);
  auto reader = OpenTelemetryOn(*MakeIntelGpuPlugin(), FixturePath("intel-max-1550-4"));
  const FamilyTelemetry first = reader->Read(devices, kFirstReading);
  EXPECT_THAT(first.warnings, IsEmpty());
  ASSERT_EQ(first.devices.size(), 4u);
  const DeviceTelemetry& gpu0 = first.devices[0];
  EXPECT_EQ(gpu0.source, "sysfs");
  EXPECT_THAT(gpu0.energy_joules, Optional(123456.789012));  // hwmon "i915", not "i915_gt0"
  EXPECT_THAT(first.devices[3].energy_joules, Optional(100000.0));
  EXPECT_EQ(gpu0.power_watts, std::nullopt);  // one sample; power1_max is a limit
  // i915 offers none of these in sysfs.
  EXPECT_EQ(gpu0.temperature_celsius, std::nullopt);
  EXPECT_EQ(gpu0.utilization_ratio, std::nullopt);
  EXPECT_EQ(gpu0.memory_used_bytes, std::nullopt);
  EXPECT_EQ(gpu0.memory_total_bytes, std::nullopt);
  EXPECT_THAT(gpu0.warnings, IsEmpty());
  // The fixture's counters stand still: zero watts is what they measure.
  const FamilyTelemetry second = reader->Read(devices, kFirstReading + absl::Seconds(5));
  EXPECT_THAT(second.devices[0].power_watts, Optional(0.0));
}

class XeCardTest : public ::testing::Test {
 protected:
  XeCardTest() {
    fn_ = tree_.PciFunction({.bdf = "0000:03:00.0",
                             .vendor = 0x8086,
                             .device = 0xe20b,
                             .pci_class = 0x030000,
                             .driver = "xe"});
    tree_.Write(fn_ + "/hwmon/hwmon3/name", "xe\n");
    tree_.Write(fn_ + "/hwmon/hwmon3/temp2_label", "pkg\n");
    tree_.Write(fn_ + "/hwmon/hwmon3/temp2_input", "61000\n");
    tree_.Write(fn_ + "/hwmon/hwmon3/temp3_label", "vram\n");
    tree_.Write(fn_ + "/hwmon/hwmon3/temp3_input", "54500\n");
    SetEnergy(1'000'000);
  }
  void SetEnergy(uint64_t microjoules) {
    tree_.Write(fn_ + "/hwmon/hwmon3/energy1_input", std::to_string(microjoules) + "\n");
  }

  FakeTree tree_;
  std::string fn_;
  const Device card_{.family = "intel-gpu",
                     .index = 0,
                     .pci_bus_id = "0000:03:00.0",
                     .attributes = {{"driver", "xe"}}};
};

TEST_F(XeCardTest, PowerIsTheEnergyDeltaOverTheTimeBetweenReadings) {
  auto reader = OpenTelemetryOn(*MakeIntelGpuPlugin(), tree_.root());
  const std::vector<Device> devices = {card_};
  EXPECT_EQ(reader->Read(devices, kFirstReading).devices[0].power_watts, std::nullopt);
  SetEnergy(1'000'000 + 2'500'000'000);  // 2500 J in 10 s
  const DeviceTelemetry t = reader->Read(devices, kFirstReading + absl::Seconds(10)).devices[0];
  EXPECT_THAT(t.power_watts, Optional(DoubleNear(250.0, 1e-9)));
  EXPECT_THAT(t.energy_joules, Optional(2501.0));
  EXPECT_THAT(t.temperature_celsius, Optional(61.0));
  EXPECT_THAT(t.memory_temperature_celsius, Optional(54.5));
  EXPECT_THAT(t.warnings, IsEmpty());
}

TEST_F(XeCardTest, ACounterThatGoesBackRestartsThePairInsteadOfReportingNegativePower) {
  auto reader = OpenTelemetryOn(*MakeIntelGpuPlugin(), tree_.root());
  const std::vector<Device> devices = {card_};
  reader->Read(devices, kFirstReading);
  SetEnergy(10);  // the driver reloaded
  EXPECT_EQ(reader->Read(devices, kFirstReading + absl::Seconds(1)).devices[0].power_watts,
            std::nullopt);
  SetEnergy(10 + 4'000'000);
  EXPECT_THAT(reader->Read(devices, kFirstReading + absl::Seconds(3)).devices[0].power_watts,
              Optional(DoubleNear(2.0, 1e-9)));
}

}  // namespace
}  // namespace tessera::testing

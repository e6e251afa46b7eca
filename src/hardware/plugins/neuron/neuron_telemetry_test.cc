// AWS Neuron telemetry from the driver's sysfs: the trn1.32xlarge fixture's per-core device
// memory and per-chip power share exactly as its counters hold them, and what stays absent.
#include "hardware/plugins/neuron/neuron_telemetry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hardware/plugins/neuron/neuron_plugin.h"
#include "hardware/testing/fake_tree.h"
#include "hardware/testing/plugin_test_support.h"

namespace tessera::testing {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;

class Trn1TelemetryTest : public ::testing::Test {
 protected:
  const std::vector<Device> devices_ = DetectOnFixture(*MakeNeuronPlugin(), "trn1-32xlarge");
};

TEST_F(Trn1TelemetryTest, DeviceMemoryIsTheSumOfTheCoresCategoriesAndPowerTheChipsAverage) {
  ASSERT_EQ(devices_.size(), 32u);
  const FamilyTelemetry reading =
      ReadOnce(*MakeNeuronPlugin(), FixturePath("trn1-32xlarge"), devices_);
  EXPECT_THAT(reading.warnings, IsEmpty());
  ASSERT_EQ(reading.devices.size(), 32u);
  // Core 0 of chip 0 (training): collectives 512 + constants 2048 + dma_rings 16 + driver 32 +
  // model_code 256 + runtime 64 + tensors 4096 + nonshared scratchpad 1024 MiB.
  const DeviceTelemetry& nc0 = reading.devices[0];
  EXPECT_EQ(nc0.source, "sysfs");
  EXPECT_THAT(nc0.memory_used_bytes, Optional(8048 * kMiB));
  EXPECT_THAT(nc0.power_ratio, Optional(0.60));
  EXPECT_THAT(nc0.warnings, IsEmpty());
  // Core 1 of chip 3: constants 2176, tensors 5632.
  const DeviceTelemetry& nc7 = reading.devices[7];
  EXPECT_THAT(nc7.memory_used_bytes, Optional(9712 * kMiB));
  EXPECT_THAT(nc7.power_ratio, Optional(0.675));
  EXPECT_EQ(reading.devices[6].power_ratio, nc7.power_ratio);  // one chip, one figure
  // An idle chip holds only the driver's memory.
  EXPECT_THAT(reading.devices[18].memory_used_bytes, Optional(32 * kMiB));
  EXPECT_THAT(reading.devices[18].power_ratio, Optional(0.1975));
  // The driver gives none of these.
  EXPECT_EQ(nc0.utilization_ratio, std::nullopt);
  EXPECT_EQ(nc0.memory_total_bytes, std::nullopt);
  EXPECT_EQ(nc0.power_watts, std::nullopt);
  EXPECT_EQ(nc0.temperature_celsius, std::nullopt);
  EXPECT_EQ(nc0.duty_cycle_ratio, std::nullopt);
}

TEST_F(Trn1TelemetryTest, AChipWithoutPowerSamplesYetHasNoPowerFigureAndNoWarning) {
  const FamilyTelemetry reading =
      ReadOnce(*MakeNeuronPlugin(), FixturePath("trn1-32xlarge"), devices_);
  for (int core : {30, 31}) {  // chip 15
    EXPECT_EQ(reading.devices[core].power_ratio, std::nullopt);
    EXPECT_THAT(reading.devices[core].memory_used_bytes, Optional(32 * kMiB));
    EXPECT_THAT(reading.devices[core].warnings, IsEmpty());
  }
}

TEST(NeuronTelemetryTest, BadPowerLinesAndUnreadableCountersAreWarnings) {
  FakeTree tree;
  const std::string chip = "/sys/devices/virtual/neuron_device/neuron0";
  tree.Write(chip + "/stats/power/utilization", "POWER_STATUS_INVALID,1,0,0,0\n");
  tree.Write(chip + "/neuron_core0/stats/memory_usage/device_mem/tensors/total", "4096\n");
  tree.Write(chip + "/neuron_core0/stats/memory_usage/device_mem/constants/total", "many\n");
  tree.Write("/sys/devices/virtual/neuron_device/neuron1/stats/power/utilization", "garbage\n");
  const Device core0{
      .family = "neuron", .index = 0, .attributes = {{"chip", "0"}, {"core_in_chip", "0"}}};
  const Device other{
      .family = "neuron", .index = 2, .attributes = {{"chip", "1"}, {"core_in_chip", "0"}}};
  const Device bare{.family = "neuron", .index = 3};
  const FamilyTelemetry reading = ReadOnce(*MakeNeuronPlugin(), tree.root(), {core0, other, bare});
  EXPECT_FALSE(reading.devices[0].HasAnyFigure());  // no partial memory sum
  EXPECT_THAT(
      reading.devices[0].warnings,
      ElementsAre(HasSubstr("constants/total"), HasSubstr("sampling status POWER_STATUS_INVALID")));
  EXPECT_THAT(reading.devices[1].warnings,
              ElementsAre(HasSubstr("is not <status>,<time>,<min>,<max>,<avg>")));
  EXPECT_THAT(reading.devices[2].warnings, ElementsAre(HasSubstr("no chip / core_in_chip")));
}

}  // namespace
}  // namespace tessera::testing

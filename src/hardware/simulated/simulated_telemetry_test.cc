// The simulated telemetry model: deterministic for a seed, devices held by workers busy and free
// ones idle, values within the documented ranges, and energy integrating power.
#include "hardware/simulated/simulated_telemetry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera {
namespace {

using ::testing::DoubleNear;
using ::testing::Optional;

constexpr uint64_t kGiB = 1024ull * 1024 * 1024;
const absl::Time kStart = absl::FromUnixSeconds(1'700'000'000);  // a 10 s step, 20 s into a minute

std::vector<Device> FourGpus() {
  std::vector<Device> out;
  for (int i = 0; i < 4; ++i) {
    out.push_back(Device{.family = "nvidia", .index = i, .memory_bytes = 80 * kGiB});
  }
  return out;
}

bool Same(const DeviceTelemetry& a, const DeviceTelemetry& b) {
  return a.family == b.family && a.index == b.index && a.utilization_ratio == b.utilization_ratio &&
         a.memory_used_bytes == b.memory_used_bytes && a.power_watts == b.power_watts &&
         a.energy_joules == b.energy_joules && a.temperature_celsius == b.temperature_celsius &&
         a.duty_cycle_ratio == b.duty_cycle_ratio;
}

TEST(SimulatedTelemetryTest, TheSameSeedAndInputsGiveTheSameFigures) {
  SimulatedTelemetryModel a(7);
  SimulatedTelemetryModel b(7);
  const std::vector<Device> gpus = FourGpus();
  const std::set<int> busy = {1, 2};
  for (int s : {0, 5, 17, 300}) {
    const absl::Time t = kStart + absl::Seconds(s);
    const FamilyTelemetry x = a.Read(gpus, busy, t);
    const FamilyTelemetry y = b.Read(gpus, busy, t);
    ASSERT_EQ(x.devices.size(), 4u);
    for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(Same(x.devices[i], y.devices[i])) << s << " " << i;
  }
}

TEST(SimulatedTelemetryTest, AnotherSeedGivesOtherFigures) {
  const std::vector<Device> gpus = FourGpus();
  const DeviceTelemetry a = SimulatedTelemetryModel(1).Read(gpus, {0}, kStart).devices[0];
  const DeviceTelemetry b = SimulatedTelemetryModel(2).Read(gpus, {0}, kStart).devices[0];
  EXPECT_NE(a.utilization_ratio, b.utilization_ratio);
}

TEST(SimulatedTelemetryTest, HeldDevicesWorkAndFreeOnesIdle) {
  SimulatedTelemetryModel model(42);
  const FamilyTelemetry r = model.Read(FourGpus(), {1, 3}, kStart);
  for (const DeviceTelemetry& t : r.devices) {
    SCOPED_TRACE(t.index);
    EXPECT_EQ(t.source, "simulated");
    EXPECT_THAT(t.memory_total_bytes, Optional(80 * kGiB));
    ASSERT_TRUE(t.utilization_ratio && t.memory_used_bytes && t.power_watts && t.power_ratio &&
                t.temperature_celsius && t.memory_temperature_celsius && t.duty_cycle_ratio &&
                t.sm_activity_ratio && t.tensor_activity_ratio && t.memory_busy_ratio &&
                t.memory_bandwidth_ratio && t.energy_joules);
    if (t.index == 1 || t.index == 3) {
      EXPECT_GE(*t.utilization_ratio, 0.60);
      EXPECT_LT(*t.utilization_ratio, 0.95);
      EXPECT_GE(*t.memory_used_bytes, 32 * kGiB);  // 40% of 80 GiB
      EXPECT_LT(*t.memory_used_bytes, 72 * kGiB);  // 90%
      EXPECT_GT(*t.power_watts, 0.12 * 700);
    } else {
      EXPECT_EQ(*t.utilization_ratio, 0.0);
      EXPECT_EQ(*t.memory_used_bytes, 0u);
      EXPECT_DOUBLE_EQ(*t.power_watts, 0.12 * 700);  // idle power
      EXPECT_DOUBLE_EQ(*t.temperature_celsius, 30.0);
    }
    EXPECT_DOUBLE_EQ(*t.power_ratio, *t.power_watts / 700);
    EXPECT_DOUBLE_EQ(*t.tensor_activity_ratio, 0.7 * *t.utilization_ratio);
  }
}

TEST(SimulatedTelemetryTest, FiguresHoldWithinAStepAndMemoryWithinAMinute) {
  SimulatedTelemetryModel model(3);
  const std::vector<Device> gpus = FourGpus();
  const DeviceTelemetry a = model.Read(gpus, {0}, kStart).devices[0];
  const DeviceTelemetry b = model.Read(gpus, {0}, kStart + absl::Seconds(9)).devices[0];
  const DeviceTelemetry c = model.Read(gpus, {0}, kStart + absl::Seconds(30)).devices[0];
  EXPECT_EQ(a.utilization_ratio, b.utilization_ratio);
  EXPECT_NE(a.utilization_ratio, c.utilization_ratio);
  EXPECT_EQ(a.memory_used_bytes, c.memory_used_bytes);
}

TEST(SimulatedTelemetryTest, EnergyAddsEachReadingsPowerOverTheTimeToTheNext) {
  SimulatedTelemetryModel model(5);
  const std::vector<Device> gpus = FourGpus();
  const DeviceTelemetry first = model.Read(gpus, {}, kStart).devices[2];
  EXPECT_THAT(first.energy_joules, Optional(0.0));
  const DeviceTelemetry held = model.Read(gpus, {2}, kStart + absl::Seconds(10)).devices[2];
  EXPECT_THAT(held.energy_joules, Optional(DoubleNear(84.0 * 10, 1e-9)));  // idle 84 W for 10 s
  const DeviceTelemetry later = model.Read(gpus, {2}, kStart + absl::Seconds(12)).devices[2];
  EXPECT_THAT(later.energy_joules, Optional(DoubleNear(840 + *held.power_watts * 2, 1e-9)));
}

TEST(SimulatedTelemetryTest, ADeviceWithoutAMemorySizeHasNoMemoryFigures) {
  SimulatedTelemetryModel model(0);
  const Device core{.family = "neuron", .index = 0};
  const DeviceTelemetry t = model.Read(std::vector<Device>{core}, {0}, kStart).devices[0];
  EXPECT_EQ(t.memory_total_bytes, std::nullopt);
  EXPECT_EQ(t.memory_used_bytes, std::nullopt);
  EXPECT_THAT(t.power_watts, Optional(::testing::Gt(0.12 * 200)));
}

}  // namespace
}  // namespace tessera

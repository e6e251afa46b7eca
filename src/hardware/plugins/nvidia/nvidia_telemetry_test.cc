// NVIDIA telemetry through the fake NVML (tests/fake_nvml) on the fixture machines: every figure
// as the .nvml table holds it, NOT_SUPPORTED and failing queries, GPM across readings, an older
// driver, and no NVML at all.
#include "hardware/plugins/nvidia/nvidia_telemetry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "hardware/plugins/nvidia/nvidia_plugin.h"
#include "hardware/testing/fake_tree.h"
#include "hardware/testing/plugin_test_support.h"

namespace tessera::testing {
namespace {

constexpr char kFakeNvml[] = TESSERA_FAKE_NVML;
constexpr char kFakeNvmlOld[] = TESSERA_FAKE_NVML_OLD;
constexpr uint64_t kMiB = 1024 * 1024;
constexpr uint64_t kH100Memory = 81559 * kMiB;

class ScopedTable {
 public:
  explicit ScopedTable(const std::string& path) {
    setenv("TESSERA_FAKE_NVML_TABLE", path.c_str(), 1);
  }
  ~ScopedTable() { unsetenv("TESSERA_FAKE_NVML_TABLE"); }
};

std::vector<Device> DetectWith(std::string_view machine, const std::string& library) {
  return DetectOnFixture(*MakeNvidiaPlugin(), machine, DetectionOptions{.nvml_library = library});
}

std::unique_ptr<TelemetryReader> OpenOn(const std::string& root, const std::string& library) {
  return OpenTelemetryOn(*MakeNvidiaPlugin(), root, TelemetryOptions{.nvml_library = library});
}

class H100TelemetryTest : public ::testing::Test {
 protected:
  H100TelemetryTest() : table_(FixturePath("h100-sxm-8.nvml")) {
    devices_ = DetectWith("h100-sxm-8", kFakeNvml);
  }

  ScopedTable table_;
  std::vector<Device> devices_;
};

TEST_F(H100TelemetryTest, EveryFigureIsReadAsTheTableHoldsIt) {
  ASSERT_EQ(devices_.size(), 8u);
  auto reader = OpenOn(FixturePath("h100-sxm-8"), kFakeNvml);
  const FamilyTelemetry reading = reader->Read(devices_, kFirstReading);
  EXPECT_THAT(reading.warnings, IsEmpty());
  ASSERT_EQ(reading.devices.size(), 8u);
  const DeviceTelemetry& gpu0 = reading.devices[0];
  EXPECT_EQ(gpu0.family, "nvidia");
  EXPECT_EQ(gpu0.index, 0);
  EXPECT_EQ(gpu0.source, "nvml");
  EXPECT_THAT(gpu0.utilization_ratio, Optional(0.97));
  EXPECT_THAT(gpu0.memory_busy_ratio, Optional(0.61));
  EXPECT_THAT(gpu0.memory_used_bytes, Optional(70001 * kMiB));
  EXPECT_THAT(gpu0.memory_total_bytes, Optional(kH100Memory));
  EXPECT_THAT(gpu0.power_watts, Optional(612.345));
  EXPECT_THAT(gpu0.energy_joules, Optional(412345678.901));
  EXPECT_THAT(gpu0.temperature_celsius, Optional(64.0));
  EXPECT_THAT(gpu0.warnings, IsEmpty());
  // NVML has no such figures for NVIDIA GPUs.
  EXPECT_EQ(gpu0.duty_cycle_ratio, std::nullopt);
  EXPECT_EQ(gpu0.power_ratio, std::nullopt);
  EXPECT_EQ(gpu0.memory_temperature_celsius, std::nullopt);
  // GPM needs two samples: nothing on the first reading.
  EXPECT_EQ(gpu0.sm_activity_ratio, std::nullopt);
  EXPECT_EQ(gpu0.tensor_activity_ratio, std::nullopt);
  EXPECT_EQ(gpu0.memory_bandwidth_ratio, std::nullopt);
}

TEST_F(H100TelemetryTest, NotSupportedIsOmittedSilentlyAndAFailureWithAWarning) {
  auto reader = OpenOn(FixturePath("h100-sxm-8"), kFakeNvml);
  const FamilyTelemetry reading = reader->Read(devices_, kFirstReading);
  const DeviceTelemetry& gpu7 = reading.devices[7];  // power management off
  EXPECT_EQ(gpu7.power_watts, std::nullopt);
  EXPECT_EQ(gpu7.energy_joules, std::nullopt);
  EXPECT_THAT(gpu7.utilization_ratio, Optional(0.75));
  EXPECT_THAT(gpu7.warnings, IsEmpty());
  const DeviceTelemetry& gpu6 = reading.devices[6];  // idle; its temperature query fails
  EXPECT_EQ(gpu6.temperature_celsius, std::nullopt);
  EXPECT_THAT(
      gpu6.warnings,
      ElementsAre(HasSubstr("GPU 6: nvmlDeviceGetTemperatureV failed: Unknown Error (999)")));
  // Idle is measured, not missing: zero is reported as zero.
  EXPECT_THAT(gpu6.utilization_ratio, Optional(0.0));
  EXPECT_THAT(gpu6.power_watts, Optional(72.0));
}

TEST_F(H100TelemetryTest, GpmActivityComesFromTheSecondReadingAtLeast100MsLater) {
  auto reader = OpenOn(FixturePath("h100-sxm-8"), kFakeNvml);
  reader->Read(devices_, kFirstReading);
  const FamilyTelemetry too_soon = reader->Read(devices_, kFirstReading + absl::Milliseconds(50));
  EXPECT_EQ(too_soon.devices[0].sm_activity_ratio, std::nullopt);
  const FamilyTelemetry later = reader->Read(devices_, kFirstReading + absl::Milliseconds(150));
  const DeviceTelemetry& gpu0 = later.devices[0];
  EXPECT_THAT(gpu0.sm_activity_ratio, Optional(0.715));
  EXPECT_THAT(gpu0.tensor_activity_ratio, Optional(0.4825));
  EXPECT_THAT(gpu0.memory_bandwidth_ratio, Optional(0.62));
  EXPECT_THAT(gpu0.warnings, IsEmpty());
  // And on every reading after that.
  const FamilyTelemetry next = reader->Read(devices_, kFirstReading + absl::Seconds(5));
  EXPECT_THAT(next.devices[4].sm_activity_ratio, Optional(0.305));
  EXPECT_THAT(next.devices[6].tensor_activity_ratio, Optional(0.0));
}

TEST_F(H100TelemetryTest, AReaderSurvivesADetectionSessionOpenedAndClosedMeanwhile) {
  auto reader = OpenOn(FixturePath("h100-sxm-8"), kFakeNvml);
  reader->Read(devices_, kFirstReading);
  ASSERT_EQ(DetectWith("h100-sxm-8", kFakeNvml).size(), 8u);  // init + shutdown
  const FamilyTelemetry reading = reader->Read(devices_, kFirstReading + absl::Seconds(1));
  EXPECT_THAT(reading.warnings, IsEmpty());
  EXPECT_THAT(reading.devices[3].utilization_ratio, Optional(0.91));
  EXPECT_THAT(reading.devices[3].sm_activity_ratio, Optional(0.66));
}

TEST_F(H100TelemetryTest, AnOlderDriverUsesTheDeprecatedTemperatureCallAndHasNoGpm) {
  auto reader = OpenOn(FixturePath("h100-sxm-8"), kFakeNvmlOld);
  reader->Read(devices_, kFirstReading);
  const FamilyTelemetry reading = reader->Read(devices_, kFirstReading + absl::Seconds(1));
  EXPECT_THAT(reading.devices[0].temperature_celsius, Optional(64.0));
  EXPECT_EQ(reading.devices[0].sm_activity_ratio, std::nullopt);
  EXPECT_THAT(reading.devices[0].warnings, IsEmpty());
  EXPECT_THAT(reading.devices[6].warnings,
              ElementsAre(HasSubstr("nvmlDeviceGetTemperature failed: Unknown Error (999)")));
}

TEST_F(H100TelemetryTest, DevicesNvmlDoesNotKnowOrOfAnotherFamilyGetNothing) {
  Device stranger = devices_[0];
  stranger.pci_bus_id = "0000:99:00.0";
  stranger.uuid = "GPU-00000000-0000-0000-0000-000000000000";
  Device amd{.family = "amd", .index = 0, .pci_bus_id = devices_[0].pci_bus_id};
  auto reader = OpenOn(FixturePath("h100-sxm-8"), kFakeNvml);
  const std::vector<Device> asked = {stranger, amd};
  const FamilyTelemetry reading = reader->Read(asked, kFirstReading);
  ASSERT_EQ(reading.devices.size(), 2u);
  EXPECT_FALSE(reading.devices[0].HasAnyFigure());
  EXPECT_THAT(reading.devices[0].warnings,
              ElementsAre(HasSubstr("0000:99:00.0): NVML does not report this device")));
  EXPECT_FALSE(reading.devices[1].HasAnyFigure());
  EXPECT_EQ(reading.devices[1].family, "amd");
  EXPECT_THAT(reading.devices[1].warnings, ElementsAre(HasSubstr("is not a nvidia device")));
}

TEST(NvidiaTelemetryTest, AnAdaCardHasNoGpm) {
  ScopedTable table(FixturePath("workstation-rtx4090.nvml"));
  const std::vector<Device> devices = DetectWith("workstation-rtx4090", kFakeNvml);
  ASSERT_EQ(devices.size(), 1u);
  auto reader = OpenOn(FixturePath("workstation-rtx4090"), kFakeNvml);
  reader->Read(devices, kFirstReading);
  const DeviceTelemetry t = reader->Read(devices, kFirstReading + absl::Seconds(2)).devices[0];
  EXPECT_THAT(t.utilization_ratio, Optional(0.35));
  EXPECT_THAT(t.memory_busy_ratio, Optional(0.12));
  EXPECT_THAT(t.memory_used_bytes, Optional(8211 * kMiB));
  EXPECT_THAT(t.memory_total_bytes, Optional(24564 * kMiB));
  EXPECT_THAT(t.power_watts, Optional(182.45));
  EXPECT_THAT(t.energy_joules, Optional(987654.321));
  EXPECT_THAT(t.temperature_celsius, Optional(52.0));
  EXPECT_EQ(t.sm_activity_ratio, std::nullopt);
  EXPECT_EQ(t.tensor_activity_ratio, std::nullopt);
  EXPECT_EQ(t.memory_bandwidth_ratio, std::nullopt);
  EXPECT_THAT(t.warnings, IsEmpty());
}

TEST(NvidiaTelemetryTest, ValuesOutOfRangeAndFailingQueriesAreWarnedAbout) {
  FakeTree tree;
  ScopedTable table(tree.Write("/odd.nvml",
                               "gpu 0000:1b:00.0\nuuid GPU-1\nmemory 1000\nmemory_used 10\n"
                               "utilization 150 40\npower error 15\ngpm 101 50 20\n"));
  const Device gpu{.family = "nvidia", .index = 0, .uuid = "GPU-1", .pci_bus_id = "0000:1b:00.0"};
  auto reader = OpenOn(tree.root(), kFakeNvml);
  reader->Read(std::vector<Device>{gpu}, kFirstReading);
  const DeviceTelemetry t =
      reader->Read(std::vector<Device>{gpu}, kFirstReading + absl::Seconds(1)).devices[0];
  EXPECT_EQ(t.utilization_ratio, std::nullopt);
  EXPECT_THAT(t.memory_busy_ratio, Optional(0.4));
  EXPECT_THAT(t.memory_used_bytes, Optional(10u));
  EXPECT_EQ(t.power_watts, std::nullopt);
  EXPECT_EQ(t.sm_activity_ratio, std::nullopt);
  EXPECT_THAT(t.tensor_activity_ratio, Optional(0.5));
  EXPECT_THAT(t.warnings, Contains(HasSubstr("utilization.gpu 150 is not a percentage")));
  EXPECT_THAT(t.warnings, Contains(HasSubstr("nvmlDeviceGetPowerUsage failed: GPU is lost (15)")));
  EXPECT_THAT(t.warnings, Contains(HasSubstr("GPM SM_UTIL 101 is not a percentage")));
}

TEST(NvidiaTelemetryTest, WithoutNvmlNoDeviceHasFiguresAndTheReadingSaysWhy) {
  // The fixture carries no NVML of its own, and none is configured.
  const std::vector<Device> devices = DetectWith("h100-sxm-8", "");
  ASSERT_EQ(devices.size(), 8u);  // from sysfs
  auto reader = OpenOn(FixturePath("h100-sxm-8"), "");
  const FamilyTelemetry reading = reader->Read(devices, kFirstReading);
  ASSERT_EQ(reading.devices.size(), 8u);
  for (const DeviceTelemetry& t : reading.devices) EXPECT_FALSE(t.HasAnyFigure()) << t.index;
  EXPECT_THAT(reading.warnings,
              ElementsAre(AllOf(HasSubstr("NVML not available"),
                                HasSubstr("has no /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"))));
}

}  // namespace
}  // namespace tessera::testing

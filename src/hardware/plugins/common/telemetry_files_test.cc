// The sysfs telemetry helpers: missing files are silent omissions and bad ones warnings, hwmon
// directories are found by name, sensors by label or number, and power comes from energy deltas.
#include "hardware/plugins/common/telemetry_files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hardware/testing/fake_tree.h"

namespace tessera {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using testing::FakeTree;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Optional;

const absl::Time kStart = absl::FromUnixSeconds(1'700'000'000);

TEST(TelemetryFilesTest, AMissingFileIsAnOmissionAndAMalformedOneAWarning) {
  FakeTree tree;
  tree.Write("/sys/a/power", "2500000\n");
  tree.Write("/sys/a/hex", "0x10\n");
  tree.Write("/sys/a/bad", "n/a\n");
  tree.Write("/sys/a/negative", "-5\n");
  tree.Write("/sys/a/busy", "250\n");
  Sysroot sysroot(tree.root());
  DeviceTelemetry t;
  EXPECT_THAT(ReadScaledAttribute(sysroot, "/sys/a/power", 1e-6, t), Optional(2.5));
  EXPECT_THAT(ReadUnsignedAttribute(sysroot, "/sys/a/hex", t), Optional(16u));
  EXPECT_EQ(ReadScaledAttribute(sysroot, "/sys/a/missing", 1, t), std::nullopt);
  EXPECT_THAT(t.warnings, IsEmpty());
  EXPECT_EQ(ReadScaledAttribute(sysroot, "/sys/a/bad", 1, t), std::nullopt);
  EXPECT_EQ(ReadUnsignedAttribute(sysroot, "/sys/a/negative", t), std::nullopt);
  EXPECT_EQ(ReadPercentAttribute(sysroot, "/sys/a/busy", t), std::nullopt);
  EXPECT_THAT(t.warnings, ElementsAre(HasSubstr("/sys/a/bad"), HasSubstr("-5 is negative"),
                                      HasSubstr("/sys/a/busy 250 is not a percentage")));
}

TEST(TelemetryFilesTest, TheHwmonDirectoryIsTheOneNamedAfterTheDriverElseTheFirst) {
  FakeTree tree;
  const std::string fn = tree.PciFunction({.bdf = "0000:03:00.0", .vendor = 0x8086});
  tree.Write(fn + "/hwmon/hwmon4/name", "i915_gt0\n");
  tree.Write(fn + "/hwmon/hwmon7/name", "i915\n");
  tree.Mkdir(fn + "/hwmon/other");
  Sysroot sysroot(tree.root());
  EXPECT_THAT(FindHwmonDir(sysroot, "0000:03:00.0", "i915"),
              Optional(std::string("/sys/bus/pci/devices/0000:03:00.0/hwmon/hwmon7")));
  EXPECT_THAT(FindHwmonDir(sysroot, "0000:03:00.0", "xe"),
              Optional(std::string("/sys/bus/pci/devices/0000:03:00.0/hwmon/hwmon4")));
  EXPECT_EQ(FindHwmonDir(sysroot, "0000:04:00.0", "i915"), std::nullopt);
}

TEST(TelemetryFilesTest, SensorsGoByLabelAndByNumberOnlyWhenNothingIsLabelled) {
  FakeTree tree;
  tree.Write("/h/labelled/temp1_input", "40000\n");
  tree.Write("/h/labelled/temp2_label", "junction\n");
  tree.Write("/h/labelled/temp2_input", "55500\n");
  tree.Write("/h/plain/temp1_input", "41000\n");
  Sysroot sysroot(tree.root());
  DeviceTelemetry t;
  EXPECT_THAT(ReadHwmonTemperature(sysroot, "/h/labelled", "junction", 2, t), Optional(55.5));
  // temp1 is unlabelled where others carry labels: it is not taken as "edge".
  EXPECT_EQ(ReadHwmonTemperature(sysroot, "/h/labelled", "edge", 1, t), std::nullopt);
  EXPECT_THAT(ReadHwmonTemperature(sysroot, "/h/plain", "edge", 1, t), Optional(41.0));
  EXPECT_EQ(ReadHwmonTemperature(sysroot, "/h/plain", "mem", 3, t), std::nullopt);
  EXPECT_EQ(ReadHwmonTemperature(sysroot, "/h/missing", "edge", 1, t), std::nullopt);
  EXPECT_THAT(t.warnings, IsEmpty());
}

TEST(EnergyRateTest, PowerIsTheDeltaOverTimeAndNeedsAnEarlierSample) {
  EnergyRate rate;
  EXPECT_EQ(rate.Update("a", 100, kStart), std::nullopt);
  EXPECT_EQ(rate.Update("b", 5, kStart), std::nullopt);  // keys are independent
  EXPECT_THAT(rate.Update("a", 400, kStart + absl::Seconds(2)), Optional(DoubleNear(150, 1e-9)));
  // No time passed: no figure, and the earlier sample is kept for a longer window.
  EXPECT_EQ(rate.Update("a", 450, kStart + absl::Seconds(2)), std::nullopt);
  EXPECT_THAT(rate.Update("a", 700, kStart + absl::Seconds(4)), Optional(DoubleNear(150, 1e-9)));
  // A counter that went back (driver reload) restarts the pair.
  EXPECT_EQ(rate.Update("a", 10, kStart + absl::Seconds(5)), std::nullopt);
  EXPECT_THAT(rate.Update("a", 20, kStart + absl::Seconds(6)), Optional(DoubleNear(10, 1e-9)));
}

}  // namespace
}  // namespace tessera

// Node telemetry over what discovery advertises: probed fixture machines (all visible devices, a
// masked subset, one-shot readings), a simulated node driven by the busy devices, and family
// warnings named by family.
#include "hardware/node_telemetry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "hardware/testing/plugin_test_support.h"

namespace tessera::testing {
namespace {

const std::string kExamples = std::string(TESSERA_SOURCE_DIR) + "/examples/hardware/";

NodeHardware Discover(const std::string& machine, Environment env = Environment()) {
  DiscoveryOptions options;
  options.sysroot = FixturePath(machine);
  options.environment = std::move(env);
  auto node = DiscoverNode(options);
  EXPECT_TRUE(node.ok()) << node.status();
  return node.ok() ? *std::move(node) : NodeHardware();
}

std::vector<int> Indices(const NodeTelemetry& t) {
  std::vector<int> out;
  for (const DeviceTelemetry& d : t.devices) out.push_back(d.index);
  return out;
}

TEST(NodeTelemetryTest, EveryAdvertisedDeviceOfAProbedNodeIsRead) {
  const NodeHardware node = Discover("mi300x-8");
  NodeTelemetryReader reader(node, Sysroot(FixturePath("mi300x-8")), Environment(), {});
  const NodeTelemetry t = reader.Read(kFirstReading);
  EXPECT_THAT(Indices(t), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  EXPECT_THAT(t.warnings, IsEmpty());
  for (const DeviceTelemetry& d : t.devices) {
    EXPECT_EQ(d.family, "amd");
    EXPECT_EQ(d.source, "sysfs");
  }
  EXPECT_THAT(t.devices[6].utilization_ratio, Optional(0.45));
}

TEST(NodeTelemetryTest, OnlyTheDevicesTheAgentsMaskLeavesVisibleAreRead) {
  Environment env;
  env.Set("HIP_VISIBLE_DEVICES", "5,2");
  const NodeHardware node = Discover("mi300x-8", env);
  const NodeTelemetry t =
      ReadNodeTelemetry(node, Sysroot(FixturePath("mi300x-8")), env, {}, kFirstReading);
  EXPECT_THAT(Indices(t), ElementsAre(5, 2));
  EXPECT_THAT(t.devices[0].utilization_ratio, Optional(0.0));
  EXPECT_THAT(t.devices[1].utilization_ratio, Optional(0.97));
}

TEST(NodeTelemetryTest, AOneShotReadingHasNoFiguresThatNeedTwoSamples) {
  const NodeHardware node = Discover("intel-max-1550-4");
  const NodeTelemetry t = ReadNodeTelemetry(node, Sysroot(FixturePath("intel-max-1550-4")),
                                            Environment(), {}, kFirstReading);
  ASSERT_EQ(t.devices.size(), 4u);
  EXPECT_THAT(t.devices[0].energy_joules, Optional(123456.789012));
  EXPECT_EQ(t.devices[0].power_watts, std::nullopt);
}

TEST(NodeTelemetryTest, FamilyWarningsAreNamedByFamily) {
  const NodeHardware node = Discover("gaudi2-8");
  const NodeTelemetry t =
      ReadNodeTelemetry(node, Sysroot(FixturePath("gaudi2-8")), Environment(), {}, kFirstReading);
  EXPECT_EQ(t.devices.size(), 8u);
  EXPECT_THAT(t.warnings, ElementsAre(HasSubstr("gaudi: device figures come from HLML")));
}

TEST(NodeTelemetryTest, ASimulatedNodeReadsTheModelDrivenByTheBusyDevices) {
  DiscoveryOptions options;
  options.simulate_file = kExamples + "h100-sxm-8.yaml";
  auto node = DiscoverNode(options);
  ASSERT_TRUE(node.ok()) << node.status();
  // Nothing is read from disk: the sysroot does not even exist.
  NodeTelemetryReader reader(*node, Sysroot("/no/such/tree"), Environment(),
                             NodeTelemetryOptions{.simulation_seed = 9});
  const NodeTelemetry t = reader.Read(kFirstReading, BusyDevices{{"nvidia", {0, 5}}});
  ASSERT_EQ(t.devices.size(), 8u);
  EXPECT_THAT(t.warnings, IsEmpty());
  for (const DeviceTelemetry& d : t.devices) {
    SCOPED_TRACE(d.index);
    EXPECT_EQ(d.source, "simulated");
    ASSERT_TRUE(d.utilization_ratio.has_value());
    if (d.index == 0 || d.index == 5) {
      EXPECT_GE(*d.utilization_ratio, 0.6);
    } else {
      EXPECT_EQ(*d.utilization_ratio, 0.0);
    }
    EXPECT_THAT(d.memory_total_bytes, Optional(80ull * 1024 * 1024 * 1024));
  }
  // The same seed, devices and busy set give the same figures from a fresh reader.
  NodeTelemetryReader again(*node, Sysroot("/no/such/tree"), Environment(),
                            NodeTelemetryOptions{.simulation_seed = 9});
  EXPECT_EQ(again.Read(kFirstReading, BusyDevices{{"nvidia", {0, 5}}}).devices[5].utilization_ratio,
            t.devices[5].utilization_ratio);
}

TEST(NodeTelemetryTest, ANodeWithoutAcceleratorsReadsNothing) {
  const NodeHardware node = Discover("cpu-only-vm");
  const NodeTelemetry t = ReadNodeTelemetry(node, Sysroot(FixturePath("cpu-only-vm")),
                                            Environment(), {}, kFirstReading);
  EXPECT_THAT(t.devices, IsEmpty());
  EXPECT_THAT(t.warnings, IsEmpty());
}

}  // namespace
}  // namespace tessera::testing

// NodeDeviceErrorWatch over whole nodes: a probed fixture node opens its family's reader and
// reports the messages of the snapshot's devices with warnings prefixed by family; a simulated
// node opens none.
#include "hardware/node_device_errors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "hardware/testing/fake_tree.h"
#include "hardware/testing/plugin_test_support.h"

namespace tessera::testing {
namespace {

NodeHardware Probe(const std::string& machine) {
  DiscoveryOptions options;
  options.sysroot = FixturePath(machine);
  options.environment = Environment();
  auto node = DiscoverNode(options);
  EXPECT_TRUE(node.ok()) << node.status();
  return *std::move(node);
}

TEST(NodeDeviceErrorWatchTest, AProbedNodeReportsTheSnapshotsDevicesOnly) {
  const NodeHardware node = Probe("h100-sxm-8");
  FakeTree scratch;
  const std::string kmsg = scratch.Write("/kmsg");
  NodeDeviceErrorWatch watch(node, Sysroot(FixturePath("h100-sxm-8")), {.kernel_log = kmsg});
  EXPECT_TRUE(watch.watches_anything());
  const std::vector<Device> gpus = node.VisibleFamilies()[0].visible;
  const NodeErrorSnapshot start = watch.Snapshot({{"nvidia", {gpus[3]}}}, kFirstReading);
  const std::string slot = gpus[3].pci_bus_id.substr(0, gpus[3].pci_bus_id.rfind('.'));
  const std::string other = gpus[4].pci_bus_id.substr(0, gpus[4].pci_bus_id.rfind('.'));
  std::ofstream(kmsg, std::ios::app)
      << "3,1,1,-;NVRM: Xid (PCI:" << other << "): 48, pid=1, name=x, DBE\n"
      << "3,2,1,-;NVRM: Xid (PCI:" << slot << "): 74, pid=1, name=x, NVLink error\n";
  watch.Poll();
  const DeviceErrorReport report = watch.MessagesSince(start, kFirstReading);
  EXPECT_THAT(report.messages,
              ElementsAre("GPU 3 (" + gpus[3].pci_bus_id + "): Xid 74, NVLink error"));
  EXPECT_THAT(report.warnings, IsEmpty());
}

TEST(NodeDeviceErrorWatchTest, WarningsNameTheirFamily) {
  const NodeHardware node = Probe("h100-sxm-8");
  NodeDeviceErrorWatch watch(node, Sysroot(FixturePath("h100-sxm-8")),
                             {.kernel_log = "/nonexistent/kmsg"});
  const std::vector<Device> gpus = node.VisibleFamilies()[0].visible;
  const DeviceErrorReport report =
      watch.MessagesSince(watch.Snapshot({{"nvidia", {gpus[0]}}}, kFirstReading), kFirstReading);
  EXPECT_THAT(report.warnings, ElementsAre(HasSubstr("nvidia: cannot read the kernel log")));
}

TEST(NodeDeviceErrorWatchTest, ASimulatedNodeWatchesNothing) {
  auto simulated = DiscoverNode(DiscoveryOptions{
      .simulate_file = std::string(TESSERA_SOURCE_DIR) + "/examples/hardware/h100-sxm-8.yaml"});
  ASSERT_TRUE(simulated.ok()) << simulated.status();
  NodeDeviceErrorWatch watch(*simulated, Sysroot("/"), {.kernel_log = "/nonexistent/kmsg"});
  EXPECT_FALSE(watch.watches_anything());
  const std::vector<Device> gpus = simulated->VisibleFamilies()[0].visible;
  const DeviceErrorReport report =
      watch.MessagesSince(watch.Snapshot({{"nvidia", {gpus[0]}}}, kFirstReading), kFirstReading);
  EXPECT_THAT(report.messages, IsEmpty());
  EXPECT_THAT(report.warnings, IsEmpty());
}

}  // namespace
}  // namespace tessera::testing

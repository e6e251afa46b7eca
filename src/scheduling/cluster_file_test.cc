#include "scheduling/cluster_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "hardware/node_label_keys.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string ReadExample(const std::string& name) {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/examples/clusters/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string ErrorOf(std::string_view yaml) {
  auto nodes = ParseClusterFile(yaml, "cluster.yaml");
  if (nodes.ok()) return "parsed";
  return std::string(nodes.status().message());
}

std::string Label(const ClusterNode& node, std::string_view key) {
  auto it = node.hardware.labels.find(key);
  return it == node.hardware.labels.end() ? "<none>" : it->second;
}

constexpr std::string_view kCpuHost = "{host: {sockets: 1, cores_per_socket: 4, memory: 8GiB}}";

TEST(ClusterFileTest, MixedExampleExpandsEveryGroup) {
  auto nodes = ParseClusterFile(ReadExample("mixed.yaml"), "mixed.yaml");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  // 4 H100 + 3 CPU + 2 slices x 4 hosts + 2 single-host slices.
  ASSERT_EQ(nodes->size(), 17u);
  std::vector<std::string> ids;
  for (const ClusterNode& n : *nodes) ids.push_back(n.id);
  EXPECT_THAT(ids, ElementsAre("h100-0", "h100-1", "h100-2", "h100-3", "cpu-0", "cpu-1", "cpu-2",
                               "v6e-0-w0", "v6e-0-w1", "v6e-0-w2", "v6e-0-w3", "v6e-1-w0",
                               "v6e-1-w1", "v6e-1-w2", "v6e-1-w3", "v5e-0-w0", "v5e-1-w0"));
  const ClusterNode& h100 = (*nodes)[2];
  EXPECT_EQ(h100.group, "h100");
  EXPECT_EQ(h100.hardware.resources.Get("GPU"), Quantity::FromInt(8));
  EXPECT_EQ(h100.hardware.resources.Get("CPU"), Quantity::FromInt(224));
  EXPECT_EQ(Label(h100, labels::kAcceleratorType), "H100");
  EXPECT_EQ(Label(h100, labels::kNodeGroup), "h100");
  EXPECT_EQ(Label(h100, labels::kAvailabilityZone), "us-east5-a");
  EXPECT_EQ(Label(h100, "pool"), "gpu");
  EXPECT_EQ(h100.hardware.source, "simulated mixed.yaml h100-2");
  const ClusterNode& cpu = (*nodes)[4];
  EXPECT_EQ(cpu.hardware.resources.Get("GPU"), Quantity());
  EXPECT_EQ(Label(cpu, labels::kAcceleratorType), "<none>");
  EXPECT_EQ(Label(cpu, "pool"), "cpu");
}

TEST(ClusterFileTest, SliceHostsCarryTheirSliceIdentityAndMarkers) {
  auto nodes = ParseClusterFile(ReadExample("mixed.yaml"), "mixed.yaml");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  for (int i = 0; i < 8; ++i) {
    const ClusterNode& host = (*nodes)[7 + i];
    const std::string slice = i < 4 ? "v6e-0" : "v6e-1";
    const int worker = i % 4;
    SCOPED_TRACE(host.id);
    EXPECT_EQ(host.group, "v6e");
    EXPECT_EQ(Label(host, labels::kTpuSliceName), slice);
    EXPECT_EQ(Label(host, labels::kTpuWorkerId), std::to_string(worker));
    EXPECT_EQ(Label(host, labels::kTpuTopology), "4x4");
    EXPECT_EQ(Label(host, labels::kTpuPodType), "v6e-16");
    EXPECT_EQ(Label(host, labels::kAcceleratorType), "TPU-V6E");
    EXPECT_EQ(Label(host, labels::kFabricDomain), slice);
    EXPECT_EQ(Label(host, labels::kAvailabilityZone), "us-east5-b");
    EXPECT_EQ(host.hardware.resources.Get("TPU"), Quantity::FromInt(4));
    EXPECT_EQ(host.hardware.resources.Get(slice), Quantity::FromInt(1));
    EXPECT_EQ(host.hardware.resources.Get("TPU-v6e-16-head"),
              worker == 0 ? Quantity::FromInt(1) : Quantity());
  }
  // Single-host v5e slices: one 8-chip host each, its own slice and head marker.
  const ClusterNode& v5e = (*nodes)[16];
  EXPECT_EQ(v5e.id, "v5e-1-w0");
  EXPECT_EQ(v5e.hardware.resources.Get("TPU"), Quantity::FromInt(8));
  EXPECT_EQ(Label(v5e, labels::kTpuSliceName), "v5e-1");
  EXPECT_EQ(Label(v5e, labels::kTpuPodType), "v5litepod-8");
  EXPECT_EQ(Label(v5e, labels::kAcceleratorType), "TPU-V5LITEPOD");
}

TEST(ClusterFileTest, SmallExample) {
  auto nodes = ParseClusterFile(ReadExample("small.yaml"), "small.yaml");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 3u);
  EXPECT_EQ((*nodes)[1].hardware.resources.Get("GPU"), Quantity::FromInt(4));
}

TEST(ClusterFileTest, ExpandNodeGroupRefusesTakenIds) {
  std::set<std::string> taken = {"cpu-1"};
  const YAML::Node group = YAML::Load(
      "{name: cpu, count: 2, hardware: {host: {sockets: 1, cores_per_socket: 4, memory: 8GiB}}}");
  const simulated::DescriptionReader reader("r.yaml");
  auto nodes = ExpandNodeGroup(reader, simulated::Field{"add_nodes", group, group}, taken);
  ASSERT_FALSE(nodes.ok());
  EXPECT_EQ(nodes.status().message(),
            "r.yaml:1:1: add_nodes: node id \"cpu-1\" is already in the cluster");
  taken = {"other"};
  nodes = ExpandNodeGroup(reader, simulated::Field{"add_nodes", group, group}, taken);
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  EXPECT_EQ(taken, (std::set<std::string>{"cpu-0", "cpu-1", "other"}));
}

TEST(ClusterFileTest, Errors) {
  const std::string cpu(kCpuHost);
  EXPECT_EQ(ErrorOf(""), "cluster.yaml: empty cluster file: expected a map with key node_groups");
  EXPECT_EQ(ErrorOf("node_groups: [\n  {name: a"),
            "cluster.yaml:2:1: invalid YAML: end of map flow not found");
  EXPECT_EQ(ErrorOf("nodegroups: []"),
            "cluster.yaml:1:1: unknown key \"nodegroups\" (did you mean node_groups?); expected "
            "one of: node_groups");
  EXPECT_EQ(ErrorOf("node_groups: []"),
            "cluster.yaml:1:14: node_groups: a cluster needs at least one node group");
  EXPECT_EQ(ErrorOf("node_groups:\n  - {name: a, cuont: 2, hardware: " + cpu + "}"),
            "cluster.yaml:2:15: node_groups[0]: unknown key \"cuont\" (did you mean count?); "
            "expected one of: name, count, slices, hardware, labels, zone, region, market_type");
  EXPECT_EQ(ErrorOf("node_groups:\n  - {name: a, hardware: " + cpu + "}"),
            "cluster.yaml:2:5: node_groups[0]: missing required key \"count\"");
  EXPECT_EQ(ErrorOf("node_groups:\n  - {name: a, count: 0, hardware: " + cpu + "}"),
            "cluster.yaml:2:22: node_groups[0].count: must be an integer from 1 to 100000, got 0");
  EXPECT_EQ(ErrorOf("node_groups:\n  - {name: 9a, count: 1, hardware: " + cpu + "}"),
            "cluster.yaml:2:12: node_groups[0].name: invalid group name \"9a\": use 1-40 "
            "letters, digits and '-', starting with a letter and not ending with '-'");
  EXPECT_EQ(ErrorOf("node_groups:\n  - {name: a, count: 1, hardware: " + cpu +
                    "}\n  - {name: a, count: 1, hardware: " + cpu + "}"),
            "cluster.yaml:3:12: node_groups[1].name: group name \"a\" is given twice");
  // Errors inside the embedded hardware description point into the cluster file.
  EXPECT_EQ(ErrorOf("node_groups:\n  - name: a\n    count: 1\n    hardware:\n      host: "
                    "{sokets: 1}"),
            "cluster.yaml:5:14: host: unknown key \"sokets\" (did you mean sockets?); expected "
            "one of: sockets, cores_per_socket, threads_per_core, numa_nodes, memory, cpu_model");
  EXPECT_EQ(ErrorOf("node_groups:\n  - {name: a, count: 1, labels: {tessera.io/x: y}, hardware: " +
                    cpu + "}"),
            "cluster.yaml:2:34: node_groups[0].labels: label key \"tessera.io/x\" uses the "
            "reserved prefix \"tessera.io/\", which only Tessera itself may set");
}

TEST(ClusterFileTest, SliceErrors) {
  const std::string cpu(kCpuHost);
  EXPECT_EQ(ErrorOf("node_groups:\n  - {name: t, slices: {count: 1, accelerator: TPU-V6E, "
                    "topology: 3x3}, hardware: " +
                    cpu + "}"),
            "cluster.yaml:2:23: node_groups[0].slices: topology \"3x3\" is not a valid v6e slice; "
            "valid: 1x1, 2x2, 2x4, 2x8, 4x4, 4x8, 8x8, 8x16, 16x16");
  EXPECT_EQ(
      ErrorOf("node_groups:\n  - {name: t, count: 2, slices: {count: 1, accelerator: "
              "TPU-V6E, topology: 4x4}, hardware: " +
              cpu + "}"),
      "cluster.yaml:2:22: node_groups[0].count: a group has either count or slices, not both");
  EXPECT_EQ(ErrorOf("node_groups:\n  - {name: t, slices: {count: 1, acelerator: TPU-V6E, "
                    "topology: 4x4}, hardware: " +
                    cpu + "}"),
            "cluster.yaml:2:34: node_groups[0].slices: unknown key \"acelerator\" (did you mean "
            "accelerator?); expected one of: count, accelerator, topology, chips_per_host");
  EXPECT_EQ(ErrorOf("node_groups:\n  - name: t\n    slices: {count: 1, accelerator: TPU-V6E, "
                    "topology: 4x4}\n    hardware:\n      host: {sockets: 1, cores_per_socket: 4, "
                    "memory: 8GiB}\n      accelerators: [{family: tpu, type: TPU-V6E, count: 4}]"),
            "cluster.yaml:5:7: node_groups[0].hardware: a slice group's hardware lists no tpu "
            "accelerators: the slices generate each host's chips and identity");
}

}  // namespace
}  // namespace tessera

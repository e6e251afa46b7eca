#include "hardware/node_discovery.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "hardware/node_label_keys.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

const std::string kFixtures = std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/hardware/";
const std::string kExamples = std::string(TESSERA_SOURCE_DIR) + "/examples/hardware/";

NodeHardware Discover(const std::string& machine, Environment env) {
  DiscoveryOptions options;
  options.sysroot = kFixtures + machine;
  options.environment = std::move(env);
  auto node = DiscoverNode(options);
  EXPECT_TRUE(node.ok()) << node.status();
  return node.ok() ? *std::move(node) : NodeHardware();
}

// A simulated description in a file of its own (unique per process: ctest runs in parallel).
std::string DescriptionFile(const std::string& name, const std::string& yaml) {
  const std::string path =
      (std::filesystem::temp_directory_path() / (name + "." + std::to_string(::getpid()) + ".yaml"))
          .string();
  std::ofstream(path) << yaml;
  return path;
}

absl::StatusOr<NodeHardware> Simulate(const std::string& path) {
  DiscoveryOptions options;
  options.simulate_file = path;
  return DiscoverNode(options);
}

bool AnyContains(const std::vector<std::string>& lines, std::string_view needle) {
  for (const std::string& line : lines) {
    if (line.find(needle) != std::string::npos) return true;
  }
  return false;
}

constexpr char kHost[] =
    "host: {sockets: 2, cores_per_socket: 8, threads_per_core: 2, numa_nodes: 2, memory: 64GiB}\n";

TEST(NodeDiscoveryTest, AgentMaskLimitsAndOrdersTheAdvertisedDevices) {
  Environment env;
  env.Set("CUDA_VISIBLE_DEVICES", "5,2");
  NodeHardware node = Discover("h100-sxm-8", env);
  ASSERT_EQ(node.families.size(), 1u);
  const FamilyReport& f = node.families[0];
  ASSERT_EQ(f.visible.size(), 2u);
  EXPECT_EQ(f.visible[0].index, 5);
  EXPECT_EQ(f.visible[1].index, 2);
  EXPECT_EQ(f.detection.devices.size(), 8u);
  EXPECT_EQ(node.resources.Get("GPU"), Quantity::FromInt(2));
  EXPECT_THAT(f.note, HasSubstr("to 2 of 8 devices"));

  // Instance 0 is physical GPU 5: the worker's mask says 5.
  auto env_changes = WorkerIsolationEnv(node.VisibleFamilies(), {{"nvidia", {0}}}, node.isolation);
  ASSERT_TRUE(env_changes.ok()) << env_changes.status();
  EXPECT_THAT(*env_changes, ::testing::Contains(EnvChange{"CUDA_VISIBLE_DEVICES", "5"}));
}

TEST(NodeDiscoveryTest, AMaskNamingAMissingDeviceIsAStartUpError) {
  Environment env;
  env.Set("CUDA_VISIBLE_DEVICES", "0,9");
  NodeHardware node = Discover("h100-sxm-8", env);
  ASSERT_EQ(node.errors.size(), 1u);
  EXPECT_THAT(node.errors[0], HasSubstr("CUDA_VISIBLE_DEVICES=\"0,9\" names device 9"));
  EXPECT_EQ(node.resources.Get("GPU"), Quantity());
}

TEST(NodeDiscoveryTest, AnEmptyMaskAdvertisesNoDevices) {
  Environment env;
  env.Set("CUDA_VISIBLE_DEVICES", "");
  NodeHardware node = Discover("h100-sxm-8", env);
  EXPECT_TRUE(node.errors.empty());
  EXPECT_EQ(node.resources.Get("GPU"), Quantity());
  EXPECT_FALSE(node.labels.contains(std::string(labels::kAcceleratorType)));
}

TEST(NodeDiscoveryTest, DeploymentLabelsComeFromTheAgentsEnvironment) {
  Environment env;
  env.Set("TESSERA_NODE_ZONE", "us-east5-a");
  NodeHardware node = Discover("tpu-v6e-4x4-worker2", env);
  EXPECT_EQ(node.labels.at(std::string(labels::kAvailabilityZone)), "us-east5-a");
  // The override replaces the tree's own environment, TPU identity included.
  EXPECT_FALSE(node.labels.contains(std::string(labels::kTpuSliceName)));
}

TEST(NodeDiscoveryTest, TwoFamiliesClaimingGpuLeaveItToTheFirstInClaimOrder) {
  auto node = Simulate(DescriptionFile(
      "claim", std::string(kHost) + "accelerators:\n"
                                    "  - {family: amd, type: AMD-Instinct-MI300X-OAM, count: 2}\n"
                                    "  - {family: nvidia, type: H100, count: 4}\n"));
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->resources.Get("GPU"), Quantity::FromInt(4));
  ASSERT_EQ(node->families.size(), 2u);
  EXPECT_EQ(node->families[0].plugin->family(), "nvidia");
  EXPECT_TRUE(node->families[0].advertised);
  EXPECT_FALSE(node->families[1].advertised);
  EXPECT_THAT(node->families[1].note, HasSubstr("already claimed by nvidia"));
  EXPECT_TRUE(AnyContains(node->warnings, "amd: 2 devices not advertised"));
  EXPECT_EQ(node->labels.at(std::string(labels::kAcceleratorType)), "H100");
}

TEST(NodeDiscoveryTest, SeveralFamiliesAreAllAdvertised) {
  auto node = Simulate(DescriptionFile(
      "several", std::string(kHost) + "accelerators:\n"
                                      "  - {family: nvidia, type: L4, count: 2}\n"
                                      "  - {family: neuron, type: aws-neuron-core, count: 4}\n"));
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->resources.Get("GPU"), Quantity::FromInt(2));
  EXPECT_EQ(node->resources.Get("neuron_cores"), Quantity::FromInt(4));
  EXPECT_EQ(node->resources.Get("accelerator_type:L4"), Quantity::FromInt(1));
  EXPECT_EQ(node->resources.Get("accelerator_type:aws-neuron-core"), Quantity::FromInt(1));
  // Two types on one node: no single accelerator-type label, and a warning that says why.
  EXPECT_FALSE(node->labels.contains(std::string(labels::kAcceleratorType)));
  EXPECT_TRUE(AnyContains(node->warnings, "mixed accelerator types (L4 x2, aws-neuron-core x4)"));
}

TEST(NodeDiscoveryTest, SimulatedHostsIgnoreTheShellsMasks) {
  ::setenv("TPU_VISIBLE_CHIPS", "0", 1);
  auto node = Simulate(kExamples + "tpu-v6e-4x4-worker0.yaml");
  ::unsetenv("TPU_VISIBLE_CHIPS");
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->resources.Get("TPU"), Quantity::FromInt(4));
  EXPECT_EQ(node->labels.at(std::string(labels::kTpuWorkerId)), "0");
}

TEST(NodeDiscoveryTest, UserLabelsInADescriptionMayNotUseTheReservedPrefix) {
  auto node = Simulate(
      DescriptionFile("reserved", std::string(kHost) + "labels: {tessera.io/node-id: x}\n"));
  ASSERT_FALSE(node.ok());
  EXPECT_EQ(node.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(node.status().message()), HasSubstr("tessera.io/"));
}

TEST(NodeDiscoveryTest, ResourceOverridesBeatDetection) {
  DiscoveryOptions options;
  options.sysroot = kFixtures + "h100-sxm-8";
  options.environment = Environment();
  options.resource_overrides.Set("GPU", Quantity::FromInt(2));
  options.resource_overrides.Set("CPU", Quantity::FromInt(100));
  options.resource_overrides.Set("my_res", Quantity::FromRaw(25000));
  auto node = DiscoverNode(options);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->resources.Get("GPU"), Quantity::FromInt(2));
  EXPECT_EQ(node->resources.Get("CPU"), Quantity::FromInt(100));
  EXPECT_EQ(node->resources.Get("my_res"), Quantity::FromRaw(25000));
  ASSERT_EQ(node->families[0].visible.size(), 2u);  // the first two visible devices
  EXPECT_EQ(node->families[0].visible[1].index, 1);
  EXPECT_TRUE(AnyContains(node->warnings, "resource CPU: detected 224, advertising 100"));
}

TEST(NodeDiscoveryTest, DeviceCountsBeyondTheVisibleDevicesAreRefused) {
  DiscoveryOptions options;
  options.sysroot = kFixtures + "h100-sxm-8";
  Environment env;
  env.Set("CUDA_VISIBLE_DEVICES", "0,1");
  options.environment = env;
  options.resource_overrides.Set("GPU", Quantity::FromInt(4));
  EXPECT_EQ(DiscoverNode(options).status().message(),
            "resource GPU=4 is more than the 2 nvidia devices this node can see "
            "(CUDA_VISIBLE_DEVICES=\"0,1\")");
  options.resource_overrides = ResourceSet();
  options.resource_overrides.Set("GPU", Quantity::FromRaw(5000));
  EXPECT_THAT(std::string(DiscoverNode(options).status().message()),
              HasSubstr("or not a whole number"));
}

TEST(NodeDiscoveryTest, DeviceResourcesWithoutDevicesAreRefused) {
  DiscoveryOptions options;
  options.sysroot = kFixtures + "cpu-only-vm";
  options.resource_overrides.Set("TPU", Quantity::FromInt(4));
  auto node = DiscoverNode(options);
  EXPECT_EQ(node.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(node.status().message()), HasSubstr("this node has no TPU devices"));
}

TEST(NodeDiscoveryTest, OperatorLabelsAreAddedAndValidated) {
  DiscoveryOptions options;
  options.sysroot = kFixtures + "cpu-only-vm";
  options.user_labels = {{"team", "ml"}};
  auto node = DiscoverNode(options);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->labels.at("team"), "ml");
  options.user_labels = {{std::string(labels::kNodeGroup), "x"}};
  EXPECT_EQ(DiscoverNode(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(NodeDiscoveryTest, ASysrootThatIsNotADirectoryIsAnError) {
  DiscoveryOptions options;
  options.sysroot = "/no/such/root";
  auto node = DiscoverNode(options);
  EXPECT_EQ(node.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(node.status().message(), "sysroot \"/no/such/root\" is not a directory");
}

}  // namespace
}  // namespace tessera

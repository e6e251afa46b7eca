#include "node/node_hardware_loader.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hardware/node_label_keys.h"
#include "node/agent_test_util.h"
#include "node/object_store_sizing.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

std::string ExampleCluster(std::string_view name) {
  return std::string(TESSERA_SOURCE_DIR) + "/examples/clusters/" + std::string(name);
}

TEST(NodeHardwareLoaderTest, SimulatedDescriptionWithOverrides) {
  AgentOptions options;
  options.node_id = "n1";
  options.hardware_file = node_testing::ExampleHardware("h100-sxm-8.yaml");
  options.environment = Environment();
  options.labels = {{"pool", "gpu"}};
  options.resources = node_testing::Res("GPU=4,my_res=2");
  auto loaded = LoadNodeHardware(options);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->id, NodeId("n1"));
  EXPECT_EQ(loaded->hardware.labels.at("pool"), "gpu");
  EXPECT_EQ(loaded->hardware.resources.Get("GPU"), Quantity::FromInt(4));
  EXPECT_EQ(loaded->hardware.resources.Get("my_res"), Quantity::FromInt(2));
}

// `--object-store-memory 0` turns the store off, and the node says so to every listing.
TEST(NodeHardwareLoaderTest, TheNodeLabelSaysWhatObjectStoreItsAgentHosts) {
  AgentOptions options;
  options.node_id = "n1";
  options.hardware_file = node_testing::ExampleHardware("h100-sxm-8.yaml");
  options.environment = Environment();
  options.object_store_bytes = 0;
  auto loaded = LoadNodeHardware(options);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->hardware.labels.at(std::string(kObjectStoreLabel)), "none");
  options.object_store_bytes = uint64_t{682} << 20;
  loaded = LoadNodeHardware(options);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->hardware.labels.at(std::string(kObjectStoreLabel)), "682MiB");
}

TEST(NodeHardwareLoaderTest, MissingDescriptionIsAnError) {
  AgentOptions options;
  options.node_id = "n1";
  options.hardware_file = "/nonexistent/x.yaml";
  options.environment = Environment();
  EXPECT_FALSE(LoadNodeHardware(options).ok());
}

TEST(NodeHardwareLoaderTest, ClusterFileNodeAndItsSliceHosts) {
  AgentOptions options;
  options.node_id = "v6e-1-w2";
  options.cluster_file = ExampleCluster("mixed.yaml");
  options.environment = Environment();
  auto loaded = LoadNodeHardware(options);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->hardware.resources.Get("TPU"), Quantity::FromInt(4));
  EXPECT_EQ(loaded->hardware.labels.at(std::string(labels::kTpuSliceName)), "v6e-1");
  EXPECT_EQ(loaded->slice_env.at("TPU_NAME"), "v6e-1");
  EXPECT_EQ(loaded->slice_env.at("TPU_WORKER_ID"), "2");
  EXPECT_EQ(loaded->slice_env.at("TPU_ACCELERATOR_TYPE"), "v6e-16");
  EXPECT_EQ(loaded->slice_env.at("TPU_TOPOLOGY"), "4x4");
  EXPECT_EQ(loaded->slice_env.at("TPU_WORKER_HOSTNAMES"), "v6e-1-w0,v6e-1-w1,v6e-1-w2,v6e-1-w3");
}

TEST(NodeHardwareLoaderTest, ClusterFileOverrides) {
  AgentOptions options;
  options.node_id = "h100-2";
  options.cluster_file = ExampleCluster("mixed.yaml");
  options.environment = Environment();
  options.labels = {{"extra", "yes"}};
  options.resources = node_testing::Res("CPU=3");
  auto loaded = LoadNodeHardware(options);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->hardware.labels.at("extra"), "yes");
  EXPECT_EQ(loaded->hardware.resources.Get("CPU"), Quantity::FromInt(3));
  EXPECT_TRUE(loaded->slice_env.empty());

  options.resources = node_testing::Res("GPU=3");
  auto refused = LoadNodeHardware(options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("GPU"));
}

TEST(NodeHardwareLoaderTest, ClusterFileWithoutTheNode) {
  AgentOptions options;
  options.node_id = "nope";
  options.cluster_file = ExampleCluster("small.yaml");
  options.environment = Environment();
  auto loaded = LoadNodeHardware(options);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(loaded.status().message(), HasSubstr("\"nope\""));
}

TEST(NodeHardwareLoaderTest, SliceEnvNeedsSliceLabels) {
  EXPECT_TRUE(TpuSliceEnv({}, {"a", "b"}).empty());
  auto env = TpuSliceEnv({{std::string(labels::kTpuSliceName), "s"}}, {});
  EXPECT_EQ(env.size(), 1u);
  EXPECT_EQ(env.at("TPU_NAME"), "s");
}

}  // namespace
}  // namespace tessera

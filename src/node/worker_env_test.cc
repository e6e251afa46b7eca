#include "node/worker_env.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "node/agent_test_util.h"

namespace tessera {
namespace {

using node_testing::LoadExample;
using node_testing::Res;
using ::testing::HasSubstr;

TEST(WorkerEnvTest, LayersAgentSliceSpecIsolationAndIds) {
  WorkerEnvParts parts;
  parts.agent = Environment({{"PATH", "/bin"}, {"CUDA_VISIBLE_DEVICES", "0,1,2"}, {"X", "agent"}});
  parts.slice_env = {{"TPU_NAME", "s"}, {"X", "slice"}};
  parts.spec_env = {{"X", "spec"}, {"CUDA_VISIBLE_DEVICES", "7"}, {"TESSERA_NODE_ID", "fake"}};
  parts.isolation = {{"CUDA_VISIBLE_DEVICES", "1"}, {"HIP_VISIBLE_DEVICES", std::nullopt}};
  parts.node = NodeId("n1");
  parts.worker = WorkerId("w-1");
  parts.lease = LeaseId("l-1");
  Environment env = BuildWorkerEnvironment(parts);
  EXPECT_EQ(env.Get("PATH"), "/bin");
  EXPECT_EQ(env.Get("X"), "spec");  // the worker's own variables beat the host's
  EXPECT_EQ(env.Get("TPU_NAME"), "s");
  EXPECT_EQ(env.Get("CUDA_VISIBLE_DEVICES"), "1");  // isolation beats the worker's variables
  EXPECT_FALSE(env.Has("HIP_VISIBLE_DEVICES"));
  EXPECT_EQ(env.Get("TESSERA_NODE_ID"), "n1");
  EXPECT_EQ(env.Get("TESSERA_WORKER_ID"), "w-1");
  EXPECT_EQ(env.Get("TESSERA_LEASE_ID"), "l-1");
}

TEST(WorkerEnvTest, ObjectStoreSocketIsTheNodesOrEmpty) {
  WorkerEnvParts parts;
  // An agent started from a worker's environment must not hand its socket on to its own workers.
  parts.agent = Environment({{"PATH", "/bin"},
                             {"X", "agent"},
                             {"TESSERA_OBJECT_STORE_SOCKET", "/elsewhere/objects.sock"}});
  parts.node = NodeId("n1");
  parts.worker = WorkerId("w-1");
  parts.lease = LeaseId("l-1");
  EXPECT_EQ(BuildWorkerEnvironment(parts).Get(kObjectStoreSocketEnv), "");
  parts.object_store_socket = "/state/nodes/n1/objects.sock";
  EXPECT_EQ(BuildWorkerEnvironment(parts).Get(kObjectStoreSocketEnv),
            "/state/nodes/n1/objects.sock");
}

TEST(WorkerEnvTest, WorkersServeWhereTheirAgentIsReachedWhateverTheLeaseAsked) {
  WorkerEnvParts parts;
  parts.agent = Environment({{"PATH", "/bin"}, {"X", "agent"}});
  parts.spec_env = {{"TESSERA_WORKER_BIND", "127.0.0.1"}};
  parts.node = NodeId("n1");
  parts.worker = WorkerId("w-1");
  parts.lease = LeaseId("l-1");
  EXPECT_EQ(BuildWorkerEnvironment(parts).Get(kWorkerBindEnv), "127.0.0.1");  // nothing to say
  parts.worker_bind = "10.0.0.7";
  EXPECT_EQ(BuildWorkerEnvironment(parts).Get(kWorkerBindEnv), "10.0.0.7");
}

TEST(WorkerEnvTest, TheTokenNeverEntersAWorkersEnvironmentOnlyWhereToReadIt) {
  WorkerEnvParts parts;
  // An agent started with TESSERA_TOKEN set, and a lease that carries one.
  parts.agent = Environment({{"PATH", "/bin"},
                             {"TESSERA_TOKEN", "agent-secret"},
                             {"TESSERA_TOKEN_FILE", "/elsewhere/token"}});
  parts.spec_env = {{"TESSERA_TOKEN", "lease-secret"}};
  parts.node = NodeId("n1");
  parts.worker = WorkerId("w-1");
  parts.lease = LeaseId("l-1");
  Environment env = BuildWorkerEnvironment(parts);
  EXPECT_FALSE(env.Has(kTokenEnv));
  EXPECT_FALSE(env.Has(kTokenFileEnv));  // no file of this node: none from elsewhere either
  parts.token_file = "/state/nodes/n1/token";
  env = BuildWorkerEnvironment(parts);
  EXPECT_FALSE(env.Has(kTokenEnv));
  EXPECT_EQ(env.Get(kTokenFileEnv), "/state/nodes/n1/token");
  for (const auto& [name, value] : env.vars()) {
    EXPECT_EQ(value.find("secret"), std::string::npos) << name;
  }
}

TEST(WorkerEnvTest, TpuHostGetsVisibleChipsAndSliceIdentity) {
  LoadedNode node = LoadExample("tpu-v6e-4x4-worker0.yaml", "tpu-w0");
  EXPECT_EQ(node.slice_env.at("TPU_NAME"), "my-v6e-slice");
  EXPECT_EQ(node.slice_env.at("TPU_WORKER_ID"), "0");
  EXPECT_EQ(node.slice_env.at("TPU_ACCELERATOR_TYPE"), "v6e-16");
  EXPECT_EQ(node.slice_env.at("TPU_TOPOLOGY"), "4x4");
  EXPECT_EQ(node.slice_env.at("TPU_WORKER_HOSTNAMES"), "t1v-n-0,t1v-n-1,t1v-n-2,t1v-n-3");

  auto state = AgentState::Create(node.id, node.hardware);
  ASSERT_TRUE(state.ok()) << state.status();
  LeaseAsk two;
  two.resources = Res("TPU=2");
  auto decision = (*state)->TryLease(two);
  ASSERT_TRUE(decision.ok()) << decision.status();
  ASSERT_EQ(decision->status, ScheduleStatus::kPlaced) << decision->explanation;
  auto env = LeaseIsolationEnv(node.hardware, decision->lease->allocation);
  ASSERT_TRUE(env.ok()) << env.status();
  auto map = IsolationEnvMap(*env);
  const std::vector<int>& chips = decision->lease->allocation.devices[0].instances;
  ASSERT_EQ(chips.size(), 2u);
  EXPECT_EQ(map["TPU_VISIBLE_CHIPS"], absl::StrCat(chips[0], ",", chips[1]));
  EXPECT_EQ(map["TPU_HOST_BOUNDS"], "1,1,1");
  EXPECT_TRUE(map.contains("TPU_CHIPS_PER_HOST_BOUNDS"));

  // The whole host: the chip mask and bounds are removed (libtpu then sees the whole slice),
  // even when the agent itself was started with them.
  LeaseAsk all;
  all.resources = Res("TPU=2");
  auto rest = (*state)->TryLease(all);
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->status, ScheduleStatus::kPlaced);
  Allocation whole = decision->lease->allocation;
  whole.devices[0].instances = {0, 1, 2, 3};
  whole.devices[0].amounts.assign(4, Quantity::FromInt(1));
  auto whole_env = LeaseIsolationEnv(node.hardware, whole);
  ASSERT_TRUE(whole_env.ok());
  WorkerEnvParts parts;
  parts.agent = Environment({{"TPU_VISIBLE_CHIPS", "0"}, {"TPU_HOST_BOUNDS", "1,1,1"}});
  parts.isolation = *whole_env;
  Environment worker = BuildWorkerEnvironment(parts);
  EXPECT_FALSE(worker.Has("TPU_VISIBLE_CHIPS"));
  EXPECT_FALSE(worker.Has("TPU_HOST_BOUNDS"));
}

TEST(WorkerEnvTest, NoDevicesNoIsolationVariables) {
  LoadedNode node = LoadExample("h100-sxm-8.yaml");
  Allocation none;
  auto env = LeaseIsolationEnv(node.hardware, none);
  ASSERT_TRUE(env.ok());
  // Default zero-assigned policy: inherit, so nothing is written.
  EXPECT_TRUE(IsolationEnvMap(*env).empty());
  EXPECT_TRUE(node.slice_env.empty());
}

TEST(WorkerEnvTest, GrantOfAResourceTheNodeLacksIsRefused) {
  LoadedNode node = LoadExample("cpu-only.yaml");
  Allocation allocation;
  allocation.devices.push_back(DeviceGrant{"GPU", {0}, {Quantity::FromInt(1)}});
  auto env = LeaseIsolationEnv(node.hardware, allocation);
  EXPECT_EQ(env.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(env.status().message(), HasSubstr("GPU"));
}

}  // namespace
}  // namespace tessera

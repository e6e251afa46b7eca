#include "train/gang_layout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace tessera::train {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Key;
using ::testing::Not;

GangSlot Slot(int bundle_index, std::string node_id, std::string host, std::string resource,
              std::vector<int> device_ids) {
  GangSlot slot;
  slot.bundle_index = bundle_index;
  slot.node_id = std::move(node_id);
  slot.host = std::move(host);
  slot.device_resource = std::move(resource);
  slot.device_ids = std::move(device_ids);
  return slot;
}

GangSlot TpuSlot(int bundle_index, std::string node_id, std::string host, std::vector<int> chips,
                 std::string slice, int worker_id) {
  GangSlot slot = Slot(bundle_index, std::move(node_id), std::move(host), "TPU", std::move(chips));
  slot.accelerator_type = "TPU-V6E";
  slot.slice = std::move(slice);
  slot.tpu_worker_id = worker_id;
  return slot;
}

GangLayout Layout(std::vector<GangSlot> slots) {
  absl::StatusOr<GangLayout> layout = AssignRanks(std::move(slots));
  EXPECT_TRUE(layout.ok()) << layout.status();
  return layout.ok() ? *std::move(layout) : GangLayout{};
}

// The slot index of each rank, in rank order.
std::vector<int> SlotsByRank(const GangLayout& layout) {
  std::vector<int> slots;
  for (const RankPlace& place : layout.ranks) slots.push_back(place.slot);
  return slots;
}

// Two nodes of two GPUs each, handed over in an order that matches neither nodes nor devices.
std::vector<GangSlot> ScrambledTwoByTwoGpus() {
  return {
      Slot(0, "node-b", "10.0.0.2", "GPU", {1}),
      Slot(1, "node-a", "10.0.0.1", "GPU", {1}),
      Slot(2, "node-b", "10.0.0.2", "GPU", {0}),
      Slot(3, "node-a", "10.0.0.1", "GPU", {0}),
  };
}

TEST(AssignRanksTest, RanksAreContiguousWithinANodeAndOrderedByDeviceId) {
  GangLayout layout = Layout(ScrambledTwoByTwoGpus());
  EXPECT_EQ(layout.world_size, 4);
  EXPECT_EQ(layout.num_nodes, 2);
  EXPECT_EQ(layout.num_slices, 0);
  ASSERT_EQ(layout.slots.size(), 4u);
  ASSERT_EQ(layout.ranks.size(), 4u);
  // node-b is seen first: its GPU 0 (slot 2) then GPU 1 (slot 0); then node-a's.
  EXPECT_EQ(SlotsByRank(layout), (std::vector<int>{2, 0, 3, 1}));
  const int expected_local_rank[] = {0, 1, 0, 1};
  const int expected_node_rank[] = {0, 0, 1, 1};
  for (int rank = 0; rank < 4; ++rank) {
    const RankPlace& place = layout.ranks[rank];
    EXPECT_EQ(place.rank, rank);
    EXPECT_EQ(place.local_rank, expected_local_rank[rank]) << "rank " << rank;
    EXPECT_EQ(place.local_world_size, 2) << "rank " << rank;
    EXPECT_EQ(place.node_rank, expected_node_rank[rank]) << "rank " << rank;
    EXPECT_EQ(place.slice_index, 0) << "rank " << rank;
  }
  // The slots are kept as given, so RankPlace::slot indexes them.
  EXPECT_EQ(layout.slots[2].node_id, "node-b");
  EXPECT_EQ(layout.slots[2].device_ids, std::vector<int>{0});
}

TEST(AssignRanksTest, NodesSharingAHostAreStillSeparateNodes) {
  GangLayout layout = Layout({
      Slot(0, "sim-1", "127.0.0.1", "GPU", {0}),
      Slot(1, "sim-2", "127.0.0.1", "GPU", {0}),
      Slot(2, "sim-1", "127.0.0.1", "GPU", {1}),
  });
  EXPECT_EQ(layout.num_nodes, 2);
  EXPECT_EQ(SlotsByRank(layout), (std::vector<int>{0, 2, 1}));
  ASSERT_EQ(layout.ranks.size(), 3u);
  EXPECT_EQ(layout.ranks[1].local_world_size, 2);
  EXPECT_EQ(layout.ranks[2].node_rank, 1);
  EXPECT_EQ(layout.ranks[2].local_rank, 0);
  EXPECT_EQ(layout.ranks[2].local_world_size, 1);
}

TEST(AssignRanksTest, ASlotIsPlacedByItsLowestDeviceId) {
  // Slot 0's lowest id is 1 even though its list starts with 5; slot 1's is 2.
  GangLayout layout = Layout({
      Slot(0, "n", "h", "GPU", {5, 1}),
      Slot(1, "n", "h", "GPU", {2, 3}),
      Slot(2, "n", "h", "GPU", {0, 4}),
  });
  EXPECT_EQ(SlotsByRank(layout), (std::vector<int>{2, 0, 1}));
}

TEST(AssignRanksTest, EqualLowestDeviceIdsAreOrderedByBundleIndex) {
  // Fractional GPUs: two bundles share GPU 0.
  GangLayout layout = Layout({
      Slot(3, "n", "h", "GPU", {0}),
      Slot(1, "n", "h", "GPU", {0}),
      Slot(2, "n", "h", "GPU", {1}),
  });
  EXPECT_EQ(SlotsByRank(layout), (std::vector<int>{1, 0, 2}));
}

TEST(AssignRanksTest, SlotsWithoutDevicesAreInBundleOrder) {
  GangLayout layout = Layout({
      Slot(2, "n", "h", "", {}),
      Slot(0, "n", "h", "", {}),
      Slot(1, "n", "h", "", {}),
  });
  EXPECT_EQ(SlotsByRank(layout), (std::vector<int>{1, 2, 0}));
}

TEST(AssignRanksTest, SlotsWithDevicesComeBeforeSlotsWithoutOnTheSameNode) {
  GangLayout layout = Layout({
      Slot(0, "n", "h", "", {}),
      Slot(1, "n", "h", "GPU", {7}),
  });
  EXPECT_EQ(SlotsByRank(layout), (std::vector<int>{1, 0}));
}

TEST(AssignRanksTest, TheSameSlotsGiveTheSameRanks) {
  GangLayout first = Layout(ScrambledTwoByTwoGpus());
  GangLayout second = Layout(ScrambledTwoByTwoGpus());
  EXPECT_EQ(SlotsByRank(first), SlotsByRank(second));
}

TEST(AssignRanksTest, SlicesAreNumberedInFirstSeenOrderAndAnEmptySliceIsNone) {
  GangLayout layout = Layout({
      TpuSlot(0, "z0", "10.1.0.1", {0, 1, 2, 3}, "slice-z", 0),
      TpuSlot(1, "a0", "10.2.0.1", {0, 1, 2, 3}, "slice-a", 0),
      Slot(2, "cpu", "10.3.0.1", "", {}),
      TpuSlot(3, "z1", "10.1.0.2", {0, 1, 2, 3}, "slice-z", 1),
  });
  EXPECT_EQ(layout.num_slices, 2);
  EXPECT_EQ(layout.num_nodes, 4);
  ASSERT_EQ(layout.ranks.size(), 4u);
  // One slot per node, so ranks follow the input.
  EXPECT_EQ(SlotsByRank(layout), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(layout.ranks[0].slice_index, 0);
  EXPECT_EQ(layout.ranks[1].slice_index, 1);
  EXPECT_EQ(layout.ranks[2].slice_index, 0);
  EXPECT_EQ(layout.ranks[3].slice_index, 0);
}

TEST(AssignRanksTest, NoSlotsIsInvalidArgument) {
  absl::StatusOr<GangLayout> layout = AssignRanks({});
  ASSERT_FALSE(layout.ok());
  EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(layout.status().message(), HasSubstr("slot"));
  EXPECT_THAT(std::string(layout.status().message()), Not(HasSubstr("\n")));
}

TEST(AssignRanksTest, ASlotWithoutANodeIdIsInvalidArgumentNamingIt) {
  absl::StatusOr<GangLayout> layout = AssignRanks({
      Slot(0, "n", "h", "GPU", {0}),
      Slot(7, "", "h", "GPU", {1}),
  });
  ASSERT_FALSE(layout.ok());
  EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(layout.status().message(), HasSubstr("node id"));
  EXPECT_THAT(layout.status().message(), HasSubstr("bundle 7"));
  EXPECT_THAT(std::string(layout.status().message()), Not(HasSubstr("\n")));
}

TEST(BackendHintTest, EachDeviceFamilyGetsItsTorchBackend) {
  const auto hint = [](std::string resource) {
    return BackendHint(Slot(0, "n", "h", std::move(resource), {0}));
  };
  EXPECT_EQ(hint("GPU"), "nccl");  // NVIDIA and AMD alike
  EXPECT_EQ(hint("neuron_cores"), "xla");
  EXPECT_EQ(hint("TPU"), "tpu_dist");
  EXPECT_EQ(hint("NPU"), "hccl");
  EXPECT_EQ(hint(""), "gloo");
  EXPECT_EQ(hint("HPU"), "gloo");
}

TEST(RankEnvironmentTest, SetsExactlyTheTorchrunRayJaxAndBackendVariables) {
  GangLayout layout = Layout(ScrambledTwoByTwoGpus());
  GangEnvOptions options;
  options.run_id = "job-42";
  options.restart_count = 2;
  options.max_restarts = 5;
  options.master_port = 29500;
  options.jax_coordinator_port = 1234;
  // Rank 3 is node-a's GPU 1; rank 0 is on node-b, so the master is node-b's host.
  std::map<std::string, std::string> expected = {
      {"RANK", "3"},
      {"LOCAL_RANK", "1"},
      {"WORLD_SIZE", "4"},
      {"LOCAL_WORLD_SIZE", "2"},
      {"GROUP_RANK", "1"},
      {"GROUP_WORLD_SIZE", "2"},
      {"NODE_RANK", "1"},
      {"ROLE_NAME", "default"},
      {"ROLE_RANK", "3"},
      {"ROLE_WORLD_SIZE", "4"},
      {"MASTER_ADDR", "10.0.0.2"},
      {"MASTER_PORT", "29500"},
      {"TORCHELASTIC_RESTART_COUNT", "2"},
      {"TORCHELASTIC_MAX_RESTARTS", "5"},
      {"TORCHELASTIC_RUN_ID", "job-42"},
      {"TORCHELASTIC_USE_AGENT_STORE", "False"},
      {"OMP_NUM_THREADS", "1"},
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
      {"PYTHONUNBUFFERED", "1"},
      {"JAX_COORDINATOR_ADDRESS", "10.0.0.2:1234"},
      {"JAX_NUM_PROCESSES", "4"},
      {"JAX_PROCESS_ID", "3"},
      {"TESSERA_TORCH_BACKEND", "nccl"},
  };
  EXPECT_EQ(RankEnvironment(layout, 3, options), expected);
}

TEST(RankEnvironmentTest, RankZeroIsTheFirstNodesLowestDevice) {
  GangLayout layout = Layout(ScrambledTwoByTwoGpus());
  std::map<std::string, std::string> env = RankEnvironment(layout, 0, GangEnvOptions{});
  EXPECT_EQ(env["RANK"], "0");
  EXPECT_EQ(env["LOCAL_RANK"], "0");
  EXPECT_EQ(env["GROUP_RANK"], "0");
  EXPECT_EQ(env["NODE_RANK"], "0");
  EXPECT_EQ(env["MASTER_ADDR"], "10.0.0.2");
  EXPECT_EQ(env["MASTER_PORT"], "0");
}

TEST(RankEnvironmentTest, JaxVariablesAreLeftOutWithoutACoordinatorPort) {
  GangLayout layout = Layout(ScrambledTwoByTwoGpus());
  std::map<std::string, std::string> env = RankEnvironment(layout, 1, GangEnvOptions{});
  EXPECT_THAT(env, Not(Contains(Key("JAX_COORDINATOR_ADDRESS"))));
  EXPECT_THAT(env, Not(Contains(Key("JAX_NUM_PROCESSES"))));
  EXPECT_THAT(env, Not(Contains(Key("JAX_PROCESS_ID"))));
}

TEST(RankEnvironmentTest, AnIpv6CoordinatorHostIsBracketed) {
  GangLayout layout = Layout({Slot(0, "n", "fd00::1", "GPU", {0})});
  GangEnvOptions options;
  options.jax_coordinator_port = 8476;
  std::map<std::string, std::string> env = RankEnvironment(layout, 0, options);
  EXPECT_EQ(env["JAX_COORDINATOR_ADDRESS"], "[fd00::1]:8476");
  EXPECT_EQ(env["MASTER_ADDR"], "fd00::1");
}

TEST(RankEnvironmentTest, ASingleRankGetsNoOmpNumThreads) {
  GangLayout layout = Layout({Slot(0, "n", "h", "GPU", {0})});
  EXPECT_THAT(RankEnvironment(layout, 0, GangEnvOptions{}), Not(Contains(Key("OMP_NUM_THREADS"))));
}

TEST(RankEnvironmentTest, OmpNumThreadsFollowsTheRanksOwnNodeNotTheGang) {
  GangLayout layout = Layout({
      Slot(0, "big", "10.0.0.1", "GPU", {0}),
      Slot(1, "big", "10.0.0.1", "GPU", {1}),
      Slot(2, "small", "10.0.0.2", "GPU", {0}),
  });
  EXPECT_EQ(RankEnvironment(layout, 0, GangEnvOptions{})["OMP_NUM_THREADS"], "1");
  EXPECT_THAT(RankEnvironment(layout, 2, GangEnvOptions{}), Not(Contains(Key("OMP_NUM_THREADS"))));
}

TEST(RankEnvironmentTest, TheUsersOmpNumThreadsIsKept) {
  GangLayout layout = Layout(ScrambledTwoByTwoGpus());
  GangEnvOptions options;
  options.user_env["OMP_NUM_THREADS"] = "8";
  EXPECT_THAT(RankEnvironment(layout, 0, options), Not(Contains(Key("OMP_NUM_THREADS"))));
}

TEST(RankEnvironmentTest, CollectiveSocketsUseTheRanksNodeInterfaceUnlessTheUserChose) {
  std::vector<GangSlot> slots = ScrambledTwoByTwoGpus();
  for (GangSlot& slot : slots) slot.network_interface = "if-" + slot.node_id;
  GangLayout layout = Layout(slots);
  for (int rank = 0; rank < layout.world_size; ++rank) {
    const GangSlot& slot = layout.slots[layout.ranks[rank].slot];
    auto env = RankEnvironment(layout, rank, GangEnvOptions{});
    EXPECT_EQ(env["GLOO_SOCKET_IFNAME"], "if-" + slot.node_id);
    EXPECT_EQ(env["NCCL_SOCKET_IFNAME"], "if-" + slot.node_id);
  }
  GangEnvOptions chosen;
  chosen.user_env["GLOO_SOCKET_IFNAME"] = "ib0";
  auto env = RankEnvironment(layout, 0, chosen);
  EXPECT_THAT(env, Not(Contains(Key("GLOO_SOCKET_IFNAME"))));
  EXPECT_THAT(env, Contains(Key("NCCL_SOCKET_IFNAME")));
  // Unknown interface: nothing is set.
  EXPECT_THAT(RankEnvironment(Layout(ScrambledTwoByTwoGpus()), 0, GangEnvOptions{}),
              Not(Contains(Key("GLOO_SOCKET_IFNAME"))));
}

TEST(RankEnvironmentTest, AsyncErrorHandlingYieldsToTheUsersSettingOrABlockingWait) {
  GangLayout layout = Layout(ScrambledTwoByTwoGpus());
  for (const char* name :
       {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT"}) {
    GangEnvOptions options;
    options.user_env[name] = "0";
    EXPECT_THAT(RankEnvironment(layout, 0, options),
                Not(Contains(Key("TORCH_NCCL_ASYNC_ERROR_HANDLING"))))
        << "user set " << name;
  }
  GangEnvOptions unrelated;
  unrelated.user_env["NCCL_DEBUG"] = "INFO";
  EXPECT_EQ(RankEnvironment(layout, 0, unrelated)["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "1");
}

TEST(RankEnvironmentTest, PerChipTpuSlotsListEachHostOnceInWorkerIdOrder) {
  // One v6e-16 slice of two 4-chip hosts (worker 1 seen first), one slot per chip.
  std::vector<GangSlot> slots;
  for (int chip = 0; chip < 4; ++chip) {
    slots.push_back(TpuSlot(chip, "w1", "10.0.1.1", {3 - chip}, "v6e-slice", 1));
  }
  for (int chip = 0; chip < 4; ++chip) {
    slots.push_back(TpuSlot(4 + chip, "w0", "10.0.0.1", {chip}, "v6e-slice", 0));
  }
  GangLayout layout = Layout(std::move(slots));
  EXPECT_EQ(layout.num_slices, 1);
  for (int rank = 0; rank < 8; ++rank) {
    std::map<std::string, std::string> env = RankEnvironment(layout, rank, GangEnvOptions{});
    EXPECT_EQ(env["TPU_WORKER_HOSTNAMES"], "10.0.0.1,10.0.1.1") << "rank " << rank;
    EXPECT_EQ(env["TESSERA_TORCH_BACKEND"], "tpu_dist");
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "4");
    EXPECT_THAT(env, Not(Contains(Key("TPU_WORKER_ID"))));
    EXPECT_THAT(env, Not(Contains(Key("MEGASCALE_SLICE_ID"))));
    EXPECT_THAT(env, Not(Contains(Key("MEGASCALE_NUM_SLICES"))));
    EXPECT_THAT(env, Not(Contains(Key("MEGASCALE_COORDINATOR_ADDRESS"))));
    EXPECT_THAT(env, Not(Contains(Key("MEGASCALE_PORT"))));
  }
  // w1 is seen first, so it is node 0 and holds rank 0, ordered by chip.
  EXPECT_EQ(SlotsByRank(layout), (std::vector<int>{3, 2, 1, 0, 4, 5, 6, 7}));
  EXPECT_EQ(RankEnvironment(layout, 0, GangEnvOptions{})["MASTER_ADDR"], "10.0.1.1");
}

TEST(RankEnvironmentTest, SimulatedTpuHostsOnOneAddressAreListedOncePerWorker) {
  GangLayout layout = Layout({
      TpuSlot(0, "sim-w1", "127.0.0.1", {0}, "sim-slice", 1),
      TpuSlot(1, "sim-w0", "127.0.0.1", {0}, "sim-slice", 0),
      TpuSlot(2, "sim-w0", "127.0.0.1", {1}, "sim-slice", 0),
  });
  EXPECT_EQ(RankEnvironment(layout, 0, GangEnvOptions{})["TPU_WORKER_HOSTNAMES"],
            "127.0.0.1,127.0.0.1");
}

TEST(RankEnvironmentTest, HostsWithoutAWorkerIdAreListedLast) {
  GangLayout layout = Layout({
      TpuSlot(0, "unknown", "10.0.0.9", {0}, "slice", -1),
      TpuSlot(1, "w1", "10.0.0.2", {0}, "slice", 1),
      TpuSlot(2, "w0", "10.0.0.1", {0}, "slice", 0),
  });
  EXPECT_EQ(RankEnvironment(layout, 0, GangEnvOptions{})["TPU_WORKER_HOSTNAMES"],
            "10.0.0.1,10.0.0.2,10.0.0.9");
}

TEST(RankEnvironmentTest, TwoSlicesGetMegascaleVariablesAndEachItsOwnHostnames) {
  GangLayout layout = Layout({
      TpuSlot(0, "a1", "10.0.0.2", {0, 1, 2, 3}, "slice-a", 1),
      TpuSlot(1, "a0", "10.0.0.1", {0, 1, 2, 3}, "slice-a", 0),
      TpuSlot(2, "b0", "10.0.1.1", {0, 1, 2, 3}, "slice-b", 0),
      TpuSlot(3, "b1", "10.0.1.2", {0, 1, 2, 3}, "slice-b", 1),
  });
  ASSERT_EQ(layout.num_slices, 2);
  GangEnvOptions options;
  options.megascale_port = 9090;

  std::map<std::string, std::string> first = RankEnvironment(layout, 1, options);
  EXPECT_EQ(first["TPU_WORKER_HOSTNAMES"], "10.0.0.1,10.0.0.2");
  EXPECT_EQ(first["MEGASCALE_SLICE_ID"], "0");
  EXPECT_EQ(first["MEGASCALE_NUM_SLICES"], "2");
  EXPECT_EQ(first["MEGASCALE_COORDINATOR_ADDRESS"], "10.0.0.2");  // rank 0's host
  EXPECT_EQ(first["MEGASCALE_PORT"], "9090");

  std::map<std::string, std::string> second = RankEnvironment(layout, 3, options);
  EXPECT_EQ(second["TPU_WORKER_HOSTNAMES"], "10.0.1.1,10.0.1.2");
  EXPECT_EQ(second["MEGASCALE_SLICE_ID"], "1");
  EXPECT_EQ(second["MEGASCALE_NUM_SLICES"], "2");
  EXPECT_EQ(second["MEGASCALE_COORDINATOR_ADDRESS"], "10.0.0.2");
  EXPECT_EQ(second["MEGASCALE_PORT"], "9090");
  EXPECT_THAT(second, Not(Contains(Key("TPU_WORKER_ID"))));
}

TEST(RankEnvironmentTest, MegascalePortDefaultsTo8081) {
  GangLayout layout = Layout({
      TpuSlot(0, "a0", "10.0.0.1", {0}, "slice-a", 0),
      TpuSlot(1, "b0", "10.0.1.1", {0}, "slice-b", 0),
  });
  EXPECT_EQ(RankEnvironment(layout, 1, GangEnvOptions{})["MEGASCALE_PORT"], "8081");
}

TEST(RankEnvironmentTest, ARankOffTheSliceGetsNoWorkerHostnames) {
  GangLayout layout = Layout({
      TpuSlot(0, "w0", "10.0.0.1", {0, 1, 2, 3}, "slice-a", 0),
      Slot(1, "cpu", "10.0.9.9", "", {}),
  });
  EXPECT_EQ(RankEnvironment(layout, 0, GangEnvOptions{})["TPU_WORKER_HOSTNAMES"], "10.0.0.1");
  std::map<std::string, std::string> off = RankEnvironment(layout, 1, GangEnvOptions{});
  EXPECT_THAT(off, Not(Contains(Key("TPU_WORKER_HOSTNAMES"))));
  EXPECT_EQ(off["TESSERA_TORCH_BACKEND"], "gloo");
}

TEST(RankEnvironmentDeathTest, ARankOutsideTheLayoutAborts) {
  GangLayout layout = Layout(ScrambledTwoByTwoGpus());
  EXPECT_DEATH(RankEnvironment(layout, 4, GangEnvOptions{}), "");
  EXPECT_DEATH(RankEnvironment(layout, -1, GangEnvOptions{}), "");
}

}  // namespace
}  // namespace tessera::train

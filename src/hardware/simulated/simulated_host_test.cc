#include "hardware/simulated/simulated_host.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::simulated {
namespace {

using ::testing::ElementsAre;

TEST(SimulatedHostTest, FourNumaNodesOnTwoSockets) {
  HostShape shape{.sockets = 2,
                  .cores_per_socket = 8,
                  .threads_per_core = 2,
                  .numa_nodes = 4,
                  .memory_bytes = 1000,
                  .cpu_model = "x"};
  const HostTopology h = MakeSimulatedHost(shape, {{.name = "b"}, {.name = "a"}});
  EXPECT_EQ(h.cores, 16);
  EXPECT_EQ(h.pus, 32);
  ASSERT_EQ(h.numa_nodes.size(), 4u);
  EXPECT_EQ(h.numa_nodes[0].cpulist, "0-3,16-19");
  EXPECT_EQ(h.numa_nodes[3].cpulist, "12-15,28-31");
  EXPECT_EQ(h.numa_nodes[0].memory_bytes, 250u);
  EXPECT_THAT(h.numa_nodes[1].distances, ElementsAre(12, 10, 21, 21));
  EXPECT_EQ(h.nics[0].name, "a");
  EXPECT_EQ(h.source, "simulated");
}

TEST(SimulatedHostTest, MemoryRemainderGoesToNodeZero) {
  HostShape shape{.sockets = 2, .cores_per_socket = 2, .numa_nodes = 2, .memory_bytes = 7};
  const HostTopology h = MakeSimulatedHost(shape, {});
  EXPECT_EQ(h.numa_nodes[0].memory_bytes, 4u);
  EXPECT_EQ(h.numa_nodes[1].memory_bytes, 3u);
  EXPECT_EQ(h.memory_bytes, 7u);
}

}  // namespace
}  // namespace tessera::simulated

#include "scheduling/simulation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "scheduling/cluster_file.h"
#include "scheduling/requests_file.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

constexpr char kCluster[] = R"(node_groups:
  - name: cpu
    count: 2
    labels: {pool: cpu}
    hardware: {host: {sockets: 1, cores_per_socket: 4, threads_per_core: 2, memory: 16GiB}}
  - name: v6e
    slices: {count: 1, accelerator: TPU-V6E, topology: 4x4}
    hardware: {host: {sockets: 1, cores_per_socket: 8, memory: 64GiB}}
)";

// Runs every event of `requests` on kCluster; the outcomes in order.
std::vector<EventOutcome> Simulate(const std::string& requests) {
  auto nodes = ParseClusterFile(kCluster, "cluster.yaml");
  EXPECT_TRUE(nodes.ok()) << nodes.status();
  std::set<std::string> ids;
  for (const ClusterNode& n : *nodes) ids.insert(n.id);
  auto events = ParseRequestsFile(requests, "requests.yaml", ids);
  EXPECT_TRUE(events.ok()) << events.status();
  Simulation simulation(SchedulerOptions{});
  EXPECT_TRUE(simulation.AddNodes(*nodes).ok());
  std::vector<EventOutcome> outcomes;
  for (const SimulatedEvent& e : *events) {
    auto outcome = simulation.Apply(e);
    EXPECT_TRUE(outcome.ok()) << outcome.status();
    outcomes.push_back(outcome.value_or(EventOutcome{}));
  }
  return outcomes;
}

TEST(SimulationTest, ASliceGroupThatLosesAHostIsBrokenAndItsWorkIsLost) {
  const std::vector<EventOutcome> o = Simulate(R"(events:
  - reserve_slices: {name: train, alternatives: [{accelerator: v6e, topology: 4x4}]}
  - submit_task: {name: probe, resources: {CPU: 1}, node_affinity: {node: v6e-0-w1}}
  - fail_node: v6e-0-w1
  - fail_node: v6e-0-w2
)");
  ASSERT_EQ(o.size(), 4u);
  ASSERT_TRUE(o[0].reservation.has_value());
  EXPECT_EQ(o[0].reservation->status, ScheduleStatus::kPlaced);
  EXPECT_THAT(o[2].touched, ElementsAre("slice group train"));
  EXPECT_THAT(o[2].broken, ElementsAre(Pair("train", "host v6e-0-w1 died (fail_node)")));
  EXPECT_THAT(o[2].lost, ElementsAre("probe"));
  // Already broken: touched again, not broken twice.
  EXPECT_THAT(o[3].touched, ElementsAre("slice group train"));
  EXPECT_TRUE(o[3].broken.empty());
}

TEST(SimulationTest, WaitingReservationsAndTheRequestsInsideThemArePlacedInTheHeadsOrder) {
  const std::vector<EventOutcome> o = Simulate(R"(events:
  - create_placement_group:
      name: first
      strategy: PACK
      bundles: [{resources: {CPU: 8}, label_selector: pool=cpu},
                {resources: {CPU: 8}, label_selector: pool=cpu}]
  - create_placement_group:
      {name: b, strategy: PACK, bundles: [{resources: {CPU: 8}, label_selector: pool=cpu}]}
  - create_placement_group:
      {name: a, strategy: PACK, bundles: [{resources: {CPU: 8}, label_selector: pool=cpu}]}
  - submit_task: {name: inside, resources: {CPU: 1}, placement_group: a}
  - remove_placement_group: first
)");
  ASSERT_EQ(o.size(), 5u);
  EXPECT_EQ(o[1].reservation->status, ScheduleStatus::kPending);
  EXPECT_EQ(o[2].reservation->status, ScheduleStatus::kPending);
  ASSERT_TRUE(o[3].submitted.has_value());
  EXPECT_EQ(o[3].submitted->status, ScheduleStatus::kPending);
  EXPECT_THAT(o[3].submitted->explanation, HasSubstr("placement group a is not placed yet ("));
  // The removal frees both cpu nodes: `a` and `b` (name order) take them, then the request
  // waiting for `a` is served from its bundle in the same event.
  ASSERT_EQ(o[4].placed_later.size(), 2u);
  EXPECT_EQ(o[4].placed_later[0].name, "a");
  EXPECT_EQ(o[4].placed_later[1].name, "b");
  ASSERT_EQ(o[4].retried_in_bundles.size(), 1u);
  EXPECT_EQ(o[4].retried_in_bundles[0].status, ScheduleStatus::kPlaced);
  EXPECT_EQ(o[4].retried_in_bundles[0].placement->bundle, 0);
}

}  // namespace
}  // namespace tessera

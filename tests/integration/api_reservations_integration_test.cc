// Placement groups and slice reservations from the C++ API (include/tessera/placement_group.h) on
// a real cluster: a head and three node agents as processes (two TPU v6e hosts forming one 2x4
// slice, and a CPU node). The test binary is the driver and, in worker mode, the workers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "integration/api_test_cluster.h"
#include "integration/cluster_harness.h"
#include "tessera/placement_group.h"
#include "tessera/tessera.h"

namespace tessera::testing {
namespace {

using ::testing::HasSubstr;

std::string NodeOfTask() { return GetRuntimeContext().node_id; }
TESSERA_REMOTE(NodeOfTask);

// A bundle of `cpus` CPUs, and the selector of one node: the options' types, written once.
ResourceSet Cpus(double cpus) { return ResourceSet::FromAmounts({{"CPU", cpus}}).value(); }
LabelSelector OnNode(const std::string& node) {
  return LabelSelector::Of({{"tessera.io/node-id", SelectorOperator::kIn, {node}}}).value();
}

class HostProbe {
 public:
  std::string TpuWorker() const {
    const char* id = std::getenv("TPU_WORKER_ID");
    return absl::StrCat(GetRuntimeContext().node_id, "/", id == nullptr ? "<unset>" : id);
  }
};
std::unique_ptr<HostProbe> MakeHostProbe() { return std::make_unique<HostProbe>(); }
TESSERA_ACTOR(MakeHostProbe);
TESSERA_ACTOR_METHOD(&HostProbe::TpuWorker);

class ReservationsTest : public ApiClusterFixture {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions options;
    options.nodes.push_back(NodeSpec{.id = "cpu1", .hardware_yaml = CpuHost(4)});
    options.nodes.push_back(NodeSpec{.id = "tpu0", .hardware_yaml = TpuV6eHost("s1", 0, "2x4")});
    options.nodes.push_back(NodeSpec{.id = "tpu1", .hardware_yaml = TpuV6eHost("s1", 1, "2x4")});
    StartCluster(options);
  }
};

TEST_F(ReservationsTest, StrictSpreadGroupPlacesEachBundleOnItsOwnNodeAndTasksRunThere) {
  auto group = CreatePlacementGroup({.name = PlacementGroupName("spread"),
                                     .strategy = PlacementStrategy::kStrictSpread,
                                     .bundles = {Cpus(1), Cpus(1), Cpus(1)}});
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_EQ(group->bundle_nodes.size(), 3u);
  EXPECT_EQ(std::set<std::string>(group->bundle_nodes.begin(), group->bundle_nodes.end()).size(),
            3u);
  for (int i = 0; i < 3; ++i) {
    auto node = Get(Task(NodeOfTask).PlacementGroup(group->name, i).Remote(), kPatience);
    ASSERT_TRUE(node.ok()) << node.status();
    EXPECT_EQ(*node, group->bundle_nodes[i]) << "bundle " << i;
  }
  ASSERT_OK(RemovePlacementGroup(group->name));
}

TEST_F(ReservationsTest, InfeasibleGroupFailsWithTheHeadsExplanationAndLeavesNothing) {
  auto group = CreatePlacementGroup({.name = PlacementGroupName("huge"), .bundles = {Cpus(1000)}});
  ASSERT_FALSE(group.ok());
  EXPECT_EQ(group.status().code(), absl::StatusCode::kResourceExhausted) << group.status();
  EXPECT_THAT(group.status().message(), HasSubstr("placement group huge can never be placed"));
  // Withdrawn: the name is free again.
  auto again = CreatePlacementGroup({.name = PlacementGroupName("huge"), .bundles = {Cpus(1)}});
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_OK(RemovePlacementGroup(again->name));
}

TEST_F(ReservationsTest, GroupWithoutRoomTimesOutAndIsWithdrawn) {
  auto all = CreatePlacementGroup({.name = PlacementGroupName("all-cpu1"),
                                   .strategy = PlacementStrategy::kStrictPack,
                                   .bundles = {Cpus(4)},
                                   .bundle_selectors = {OnNode("cpu1")}});
  ASSERT_TRUE(all.ok()) << all.status();
  auto late = CreatePlacementGroup({.name = PlacementGroupName("late"),
                                    .bundles = {Cpus(4)},
                                    .bundle_selectors = {OnNode("cpu1")},
                                    .timeout = absl::Milliseconds(300)});
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
  EXPECT_THAT(late.status().message(), HasSubstr("placement group late is still PENDING"));
  ASSERT_OK(RemovePlacementGroup(all->name));
  // The pending request was withdrawn: it did not take the room freed above.
  auto now = CreatePlacementGroup({.name = PlacementGroupName("late"),
                                   .bundles = {Cpus(4)},
                                   .bundle_selectors = {OnNode("cpu1")}});
  ASSERT_TRUE(now.ok()) << now.status();
  ASSERT_OK(RemovePlacementGroup(now->name));
}

TEST_F(ReservationsTest, BadOptionsAreOneLineErrorsAndReserveNothing) {
  auto selectors = CreatePlacementGroup({.name = PlacementGroupName("bad"),
                                         .bundles = {Cpus(1), Cpus(1)},
                                         .bundle_selectors = {OnNode("cpu1")}});
  EXPECT_EQ(selectors.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(selectors.status().message(),
            "placement group bad: 1 bundle selectors for 2 bundles (give one per bundle, or "
            "none)");
  auto empty = CreatePlacementGroup({.name = PlacementGroupName("bad")});
  EXPECT_EQ(empty.status().message(),
            "placement group bad: no bundles (a placement group reserves at least one bundle)");
  auto resources = CreatePlacementGroup(
      {.name = PlacementGroupName("bad"),
       .bundles = {Cpus(1)},
       .fallbacks = {{.bundles = {Cpus(1), ResourceSet::FromAmounts({{"GPU", 1.5}}).value()}}}});
  EXPECT_EQ(resources.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(resources.status().message(), HasSubstr("placement group bad: fallback 1: bundle 1"));
  auto unnamed = CreatePlacementGroup({.bundles = {Cpus(1)}});
  EXPECT_THAT(unnamed.status().message(), HasSubstr("a name is needed"));
  // A shape filled in by hand is checked: a 3x5 is no v6e slice; no shape at all, no topology.
  auto topology =
      ReserveSlices({.name = SliceGroupName("bad"),
                     .shape = {.generation = TpuGeneration::kV6e, .topology = {{3, 5}}}});
  EXPECT_EQ(topology.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(topology.status().message(),
              HasSubstr("slice reservation bad: shape: topology \"3x5\" is not a valid v6e"));
  auto no_shape = ReserveSlices({.name = SliceGroupName("bad")});
  EXPECT_EQ(no_shape.status().message(), "slice reservation bad: shape: a topology is needed");
  for (const auto& s : {selectors.status(), empty.status(), resources.status(), topology.status(),
                        no_shape.status()}) {
    EXPECT_EQ(std::string(s.message()).find('\n'), std::string::npos) << s;
  }
  // Nothing was sent: the name is free.
  auto fine = CreatePlacementGroup({.name = PlacementGroupName("bad"), .bundles = {Cpus(1)}});
  ASSERT_TRUE(fine.ok()) << fine.status();
  ASSERT_OK(RemovePlacementGroup(fine->name));
}

TEST_F(ReservationsTest, SliceReservationGivesOneActorPerHostItsTpuWorkerId) {
  const SliceShape v6e_2x4 = *MakeSliceShape(TpuGeneration::kV6e, {{2, 4}});
  // The per-host demand and the selector are types too: CPU beside each host's chips, and only
  // slices whose every host is labelled with the slice's name.
  auto slice = ReserveSlices({.name = SliceGroupName("s"),
                              .shape = v6e_2x4,
                              .per_host = *ResourceSet::FromAmounts({{"CPU", 1}}),
                              .label_selector = *LabelSelector::Of(
                                  {{"tessera.io/tpu-slice-name", SelectorOperator::kIn, {"s1"}}})});
  ASSERT_TRUE(slice.ok()) << slice.status();
  ASSERT_EQ(slice->hosts.size(), 2u);
  EXPECT_EQ(slice->slices, std::vector<std::string>{"s1"});
  std::vector<ActorHandle<HostProbe>> actors;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(slice->hosts[i].tpu_worker, i);
    actors.push_back(
        Actor(MakeHostProbe).Resources({{"TPU", 4}}).PlacementGroup(slice->name, i).Remote());
  }
  for (int i = 0; i < 2; ++i) {
    auto seen = Get(actors[i].Task(&HostProbe::TpuWorker).Remote(), kPatience);
    ASSERT_TRUE(seen.ok()) << seen.status();
    EXPECT_EQ(*seen, absl::StrCat(slice->hosts[i].node_id, "/", i));
  }
  for (auto& actor : actors) ASSERT_OK(Kill(actor));
  // A second whole slice does not exist: never half of one.
  auto second = ReserveSlices(
      {.name = SliceGroupName("s2"), .shape = v6e_2x4, .timeout = absl::Milliseconds(300)});
  EXPECT_FALSE(second.ok());
  ASSERT_OK(ReleaseSlices(slice->name));
}

}  // namespace
}  // namespace tessera::testing

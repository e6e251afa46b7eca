#include "scheduling/placement_group_scheduler.h"

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduling/scheduling_test_util.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing_util::FullyLinked;
using testing_util::MustAdd;
using testing_util::Res;
using testing_util::Spec;

PlacementGroupSpec Group(PlacementStrategy strategy, std::vector<std::string> bundles,
                         std::string name = "") {
  PlacementGroupSpec spec;
  spec.name = std::move(name);
  spec.strategy = strategy;
  for (const std::string& b : bundles) spec.primary.bundles.push_back(Res(b));
  return spec;
}

// n nodes "n0".. with 8 GPUs each; zone label alternates a/b.
void AddGpuNodes(ClusterView& cluster, int n, std::string_view resources = "CPU=16,GPU=8") {
  for (int i = 0; i < n; ++i) {
    MustAdd(cluster, Spec("n" + std::to_string(i), resources,
                          {{"zone", i % 2 == 0 ? "a" : "b"}}, FullyLinked(8)));
  }
}

std::vector<std::string> Nodes(const std::vector<BundlePlacement>& bundles) {
  std::vector<std::string> nodes;
  for (const BundlePlacement& b : bundles) nodes.push_back(b.node.value());
  return nodes;
}

ResourceSet Available(const ClusterView& cluster, std::string_view id) {
  return cluster.node(*cluster.Find(NodeId(std::string(id)))).available;
}

TEST(PlacementGroupSchedulerTest, PackPutsBundlesOnFewestNodes) {
  ClusterView cluster;
  AddGpuNodes(cluster, 3);
  PlacementGroupScheduler pgs(&cluster);
  auto r = pgs.Create(Group(PlacementStrategy::kPack, {"GPU=4", "GPU=2", "GPU=2", "GPU=4"}));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, ScheduleStatus::kPlaced);
  // Scarcest first: bundle 0 (GPU=4) opens n0, bundle 3 (GPU=4) joins it; then n1 for the rest.
  EXPECT_THAT(Nodes(r->bundles), ElementsAre("n0", "n1", "n1", "n0"));
  EXPECT_EQ(r->bundles[0].allocation.devices[0].instances.size(), 4u);
}

TEST(PlacementGroupSchedulerTest, SpreadUsesDistinctNodesThenSharesWhenItMust) {
  ClusterView cluster;
  AddGpuNodes(cluster, 2);
  PlacementGroupScheduler pgs(&cluster);
  auto r = pgs.Create(Group(PlacementStrategy::kSpread, {"GPU=1", "GPU=1", "GPU=1"}));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, ScheduleStatus::kPlaced);
  const std::vector<std::string> nodes = Nodes(r->bundles);
  EXPECT_NE(nodes[0], nodes[1]);
  EXPECT_EQ(std::set<std::string>(nodes.begin(), nodes.end()).size(), 2u);
}

TEST(PlacementGroupSchedulerTest, StrictPackPutsEverythingOnOneNodeOrExplains) {
  ClusterView cluster;
  AddGpuNodes(cluster, 2);
  PlacementGroupScheduler pgs(&cluster);
  auto r = pgs.Create(Group(PlacementStrategy::kStrictPack, {"GPU=2", "GPU=2", "CPU=4,GPU=4"}));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, ScheduleStatus::kPlaced);
  EXPECT_THAT(Nodes(r->bundles), ElementsAre("n0", "n0", "n0"));
  std::set<int> devices;
  for (const BundlePlacement& b : r->bundles) {
    for (int i : b.allocation.devices[0].instances) EXPECT_TRUE(devices.insert(i).second);
  }
  EXPECT_EQ(devices.size(), 8u);

  auto big = pgs.Create(Group(PlacementStrategy::kStrictPack, {"GPU=4", "GPU=4", "GPU=4", "GPU=4"}));
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(big->explanation,
            "no node can hold the 4 bundles together (STRICT_PACK needs GPU=16; largest node has 8)");

  // Feasible on n0's totals, but n0 is full and n1 is partly taken: PENDING.
  ASSERT_EQ(pgs.Create(Group(PlacementStrategy::kPack, {"GPU=2"}))->bundles[0].node.value(), "n1");
  auto busy = pgs.Create(Group(PlacementStrategy::kStrictPack, {"GPU=4", "GPU=4"}));
  EXPECT_EQ(busy->status, ScheduleStatus::kPending);
  EXPECT_EQ(busy->explanation,
            "2 nodes could hold the 2 bundles together (STRICT_PACK needs GPU=8); none has room now");
}

TEST(PlacementGroupSchedulerTest, StrictSpreadNeedsDistinctNodesAndSaysHowMany) {
  ClusterView cluster;
  AddGpuNodes(cluster, 6);
  PlacementGroupScheduler pgs(&cluster);
  PlacementGroupSpec spec = Group(PlacementStrategy::kStrictSpread, {"GPU=1", "GPU=1", "GPU=1"});
  auto r = pgs.Create(spec);
  ASSERT_EQ(r->status, ScheduleStatus::kPlaced);
  const std::vector<std::string> nodes = Nodes(r->bundles);
  EXPECT_EQ(std::set<std::string>(nodes.begin(), nodes.end()).size(), 3u);

  PlacementGroupSpec zoned = Group(PlacementStrategy::kStrictSpread,
                                   {"GPU=1", "GPU=1", "GPU=1", "GPU=1", "GPU=1"});
  zoned.primary.selectors.assign(5, *ParseLabelSelector("zone=a"));
  auto no = pgs.Create(zoned);
  ASSERT_TRUE(no.ok());
  EXPECT_EQ(no->status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(no->explanation, "STRICT_SPREAD needs 5 nodes; only 3 match bundle 0's selector");
  auto plain = pgs.Create(Group(PlacementStrategy::kStrictSpread,
                                {"GPU=1", "GPU=1", "GPU=1", "GPU=1", "GPU=1", "GPU=1", "GPU=1"}));
  EXPECT_EQ(plain->explanation, "STRICT_SPREAD needs 7 nodes; only 6 can hold a bundle");
}

TEST(PlacementGroupSchedulerTest, FallbacksAreTriedInOrderAndTheChosenOneIsReported) {
  ClusterView cluster;
  AddGpuNodes(cluster, 2);
  PlacementGroupScheduler pgs(&cluster);
  PlacementGroupSpec spec = Group(PlacementStrategy::kStrictPack, {"GPU=8", "GPU=8"});
  spec.fallbacks.push_back(BundleOption{{Res("GPU=4"), Res("GPU=8")}, {}});     // still too big
  spec.fallbacks.push_back(BundleOption{{Res("GPU=4"), Res("GPU=4")},           // fits zone b
                                        {*ParseLabelSelector("zone=b"), *ParseLabelSelector("zone=b")}});
  spec.fallbacks.push_back(BundleOption{{Res("GPU=1")}, {}});  // would fit, but comes later
  auto r = pgs.Create(spec);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, ScheduleStatus::kPlaced);
  EXPECT_EQ(r->option, 2u);
  EXPECT_THAT(Nodes(r->bundles), ElementsAre("n1", "n1"));
  EXPECT_EQ(pgs.Find(*r->id)->option, 2u);

  PlacementGroupSpec none = Group(PlacementStrategy::kStrictPack, {"GPU=16"});
  none.fallbacks.push_back(BundleOption{{Res("TPU=1")}, {}});
  auto n = pgs.Create(none);
  EXPECT_EQ(n->status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(n->explanation,
            "option 0: no node can hold the 1 bundle together (STRICT_PACK needs GPU=16; largest "
            "node has 8); option 1: no node can hold the 1 bundle together (STRICT_PACK needs "
            "TPU=1; largest node has 0)");
}

TEST(PlacementGroupSchedulerTest, AGroupThatCannotFullyFitHoldsNothing) {
  ClusterView cluster;
  AddGpuNodes(cluster, 3);
  PlacementGroupScheduler pgs(&cluster);
  // Two bundles fit (n0, n1 take GPU=8 each), the third finds n2 already half taken.
  ASSERT_EQ(pgs.Create(Group(PlacementStrategy::kPack, {"GPU=4"}))->status, ScheduleStatus::kPlaced);
  std::vector<ResourceSet> before;
  for (int i = 0; i < 3; ++i) before.push_back(Available(cluster, "n" + std::to_string(i)));
  auto r = pgs.Create(Group(PlacementStrategy::kStrictSpread, {"GPU=8", "GPU=8", "GPU=8"}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, ScheduleStatus::kPending);
  EXPECT_THAT(r->bundles, IsEmpty());
  EXPECT_FALSE(r->id.has_value());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Available(cluster, "n" + std::to_string(i)), before[i]);
  EXPECT_EQ(pgs.groups().size(), 1u);
}

TEST(PlacementGroupSchedulerTest, RemoveReturnsExactlyWhatWasTaken) {
  ClusterView cluster;
  AddGpuNodes(cluster, 2);
  PlacementGroupScheduler pgs(&cluster);
  const ResourceSet n0 = Available(cluster, "n0");
  auto r = pgs.Create(Group(PlacementStrategy::kSpread, {"CPU=2,GPU=3", "GPU=0.5"}, "train"));
  ASSERT_EQ(r->status, ScheduleStatus::kPlaced);
  EXPECT_EQ(pgs.FindByName("train"), r->id);
  EXPECT_EQ(pgs.Create(Group(PlacementStrategy::kPack, {"CPU=1"}, "train")).status().code(),
            absl::StatusCode::kAlreadyExists);
  auto released = pgs.Remove(*r->id);
  ASSERT_TRUE(released.ok());
  ASSERT_EQ(released->size(), 2u);
  EXPECT_EQ((*released)[0], r->bundles[0].allocation);
  EXPECT_EQ((*released)[1], r->bundles[1].allocation);
  EXPECT_EQ(Available(cluster, "n0"), n0);
  EXPECT_FALSE(pgs.FindByName("train").has_value());
  EXPECT_EQ(pgs.Remove(*r->id).status().code(), absl::StatusCode::kNotFound);
}

TEST(PlacementGroupSchedulerTest, LostNodeReplacesOnlyTheLostBundles) {
  ClusterView cluster;
  AddGpuNodes(cluster, 5);
  PlacementGroupScheduler pgs(&cluster);
  auto a = pgs.Create(Group(PlacementStrategy::kStrictSpread, {"GPU=2", "GPU=2", "GPU=2"}));
  auto other = pgs.Create(Group(PlacementStrategy::kStrictPack, {"GPU=1", "GPU=1"}));
  ASSERT_EQ(a->status, ScheduleStatus::kPlaced);
  ASSERT_EQ(other->status, ScheduleStatus::kPlaced);
  const std::string victim = a->bundles[1].node.value();
  ASSERT_NE(victim, other->bundles[0].node.value());
  auto lost = cluster.FailNode(NodeId(victim));
  ASSERT_TRUE(lost.ok());
  const std::vector<RescheduleReport> reports = pgs.OnNodeFailed(NodeId(victim), *lost);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_TRUE(reports[0].placed);
  EXPECT_THAT(reports[0].bundles, ElementsAre(1));
  const PlacementGroup* g = pgs.Find(*a->id);
  EXPECT_EQ(g->state, PlacementGroupState::kCreated);
  // Surviving bundles keep their node and devices; the lost one moves to a fourth node.
  EXPECT_EQ(*g->bundles[0], a->bundles[0]);
  EXPECT_EQ(*g->bundles[2], a->bundles[2]);
  const std::string moved = g->bundles[1]->node.value();
  EXPECT_NE(moved, victim);
  EXPECT_NE(moved, a->bundles[0].node.value());
  EXPECT_NE(moved, a->bundles[2].node.value());
  const PlacementGroup* untouched = pgs.Find(*other->id);
  EXPECT_EQ(*untouched->bundles[0], other->bundles[0]);
  EXPECT_EQ(*untouched->bundles[1], other->bundles[1]);
}

TEST(PlacementGroupSchedulerTest, StrictPackMovesTheWholeGroupAndWaitsWhenItCannot) {
  ClusterView cluster;
  AddGpuNodes(cluster, 2);
  PlacementGroupScheduler pgs(&cluster);
  auto filler = pgs.Create(Group(PlacementStrategy::kPack, {"GPU=6"}));
  ASSERT_EQ(filler->bundles[0].node.value(), "n0");
  auto g = pgs.Create(Group(PlacementStrategy::kStrictPack, {"GPU=2", "GPU=2"}));
  ASSERT_THAT(Nodes(g->bundles), ElementsAre("n1", "n1"));
  auto lost = cluster.FailNode(NodeId("n1"));
  std::vector<RescheduleReport> reports = pgs.OnNodeFailed(NodeId("n1"), *lost);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_FALSE(reports[0].placed);
  EXPECT_EQ(reports[0].explanation,
            "1 node could hold the 2 bundles together (STRICT_PACK needs GPU=4); none has room now");
  EXPECT_EQ(pgs.Find(*g->id)->state, PlacementGroupState::kRescheduling);
  EXPECT_THAT(pgs.OnClusterChanged(), ::testing::SizeIs(1));  // still no room
  ASSERT_TRUE(pgs.Remove(*filler->id).ok());
  reports = pgs.OnClusterChanged();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_TRUE(reports[0].placed);
  EXPECT_THAT(reports[0].bundles, ElementsAre(0, 1));
  const PlacementGroup* moved = pgs.Find(*g->id);
  EXPECT_EQ(moved->state, PlacementGroupState::kCreated);
  EXPECT_EQ(moved->bundles[0]->node.value(), "n0");
  EXPECT_EQ(moved->bundles[1]->node.value(), "n0");
  EXPECT_THAT(pgs.OnClusterChanged(), IsEmpty());
}

TEST(PlacementGroupSchedulerTest, StrictSpreadReplacementAvoidsSurvivorsNodes) {
  ClusterView cluster;
  AddGpuNodes(cluster, 3);
  PlacementGroupScheduler pgs(&cluster);
  auto g = pgs.Create(Group(PlacementStrategy::kStrictSpread, {"GPU=1", "GPU=1", "GPU=1"}));
  ASSERT_EQ(g->status, ScheduleStatus::kPlaced);
  auto lost = cluster.FailNode(NodeId("n2"));
  auto reports = pgs.OnNodeFailed(NodeId("n2"), *lost);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_FALSE(reports[0].placed);  // n0 and n1 hold survivors and have room, but are excluded
  EXPECT_EQ(reports[0].explanation,
            "STRICT_SPREAD needs 1 node; only 0 can hold a bundle besides the 2 nodes holding "
            "the group's other bundles");
  MustAdd(cluster, Spec("n9", "GPU=8", {}, FullyLinked(8)));
  reports = pgs.OnClusterChanged();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_TRUE(reports[0].placed);
  EXPECT_EQ(pgs.Find(*g->id)->bundles[2]->node.value(), "n9");
}

TEST(PlacementGroupSchedulerTest, SelectorsPerBundleAreHonored) {
  ClusterView cluster;
  AddGpuNodes(cluster, 4);
  PlacementGroupScheduler pgs(&cluster);
  PlacementGroupSpec spec = Group(PlacementStrategy::kSpread, {"GPU=1", "GPU=1"});
  spec.primary.selectors = {*ParseLabelSelector("zone=b"), *ParseLabelSelector("zone=b")};
  auto r = pgs.Create(spec);
  EXPECT_THAT(Nodes(r->bundles), ElementsAre("n1", "n3"));
}

}  // namespace
}  // namespace tessera

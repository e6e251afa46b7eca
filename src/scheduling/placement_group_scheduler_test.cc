#include "scheduling/placement_group_scheduler.h"

#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

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
using testing_util::ViewDigest;

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
    MustAdd(cluster, Spec("n" + std::to_string(i), resources, {{"zone", i % 2 == 0 ? "a" : "b"}},
                          FullyLinked(8)));
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

  auto big =
      pgs.Create(Group(PlacementStrategy::kStrictPack, {"GPU=4", "GPU=4", "GPU=4", "GPU=4"}));
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(
      big->explanation,
      "no node can hold the 4 bundles together (STRICT_PACK needs GPU=16; largest node has 8)");

  // Feasible on n0's totals, but n0 is full and n1 is partly taken: PENDING.
  ASSERT_EQ(pgs.Create(Group(PlacementStrategy::kPack, {"GPU=2"}))->bundles[0].node.value(), "n1");
  auto busy = pgs.Create(Group(PlacementStrategy::kStrictPack, {"GPU=4", "GPU=4"}));
  EXPECT_EQ(busy->status, ScheduleStatus::kPending);
  EXPECT_EQ(
      busy->explanation,
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

  PlacementGroupSpec zoned =
      Group(PlacementStrategy::kStrictSpread, {"GPU=1", "GPU=1", "GPU=1", "GPU=1", "GPU=1"});
  zoned.primary.selectors.assign(5, *ParseLabelSelector("zone=a"));
  auto no = pgs.Create(zoned);
  ASSERT_TRUE(no.ok());
  EXPECT_EQ(no->status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(no->explanation,
            "STRICT_SPREAD: bundles 0, 1, ..., 4 (GPU=1 with selector zone=a) need 5 nodes; only "
            "3 can hold any of them (n0, n2, n4)");
  auto plain = pgs.Create(Group(PlacementStrategy::kStrictSpread,
                                {"GPU=1", "GPU=1", "GPU=1", "GPU=1", "GPU=1", "GPU=1", "GPU=1"}));
  EXPECT_EQ(plain->explanation,
            "STRICT_SPREAD: bundles 0, 1, ..., 6 (GPU=1) need 7 nodes; only 6 can hold any of "
            "them (n0, n1, n2, n3, n4, ...)");
}

TEST(PlacementGroupSchedulerTest, FallbacksAreTriedInOrderAndTheChosenOneIsReported) {
  ClusterView cluster;
  AddGpuNodes(cluster, 2);
  PlacementGroupScheduler pgs(&cluster);
  PlacementGroupSpec spec = Group(PlacementStrategy::kStrictPack, {"GPU=8", "GPU=8"});
  spec.fallbacks.push_back(BundleOption{{Res("GPU=4"), Res("GPU=8")}, {}});  // still too big
  spec.fallbacks.push_back(
      BundleOption{{Res("GPU=4"), Res("GPU=4")},  // fits zone b
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
  ASSERT_EQ(pgs.Create(Group(PlacementStrategy::kPack, {"GPU=4"}))->status,
            ScheduleStatus::kPlaced);
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
  EXPECT_EQ(
      reports[0].explanation,
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
            "STRICT_SPREAD: bundle 2 (GPU=1) needs 1 node; only 0 can hold it besides the 2 "
            "nodes holding the group's other bundles");
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

// --- Bundles are assigned by a search: an assignment is found whenever one exists ---

// Two idle nodes with one GPU each; only n0 has zone=a. Bundle 0 fits both nodes and comes
// first, bundle 1 fits only n0: taking n0 for bundle 0 (the first node in utilization order)
// strands bundle 1.
void AddGreedyTrap(ClusterView& cluster) {
  MustAdd(cluster, Spec("n0", "CPU=4,GPU=1", {{"zone", "a"}}, FullyLinked(1)));
  MustAdd(cluster, Spec("n1", "CPU=4,GPU=1", {}, FullyLinked(1)));
}

PlacementGroupSpec TrapGroup(PlacementStrategy strategy) {
  PlacementGroupSpec spec = Group(strategy, {"GPU=1", "GPU=1"});
  spec.primary.selectors = {LabelSelector(), *ParseLabelSelector("zone=a")};
  return spec;
}

// The greedy pass puts the unconstrained bundle on n0, leaving the zone=a bundle nowhere; the
// search finds the other way round, for every strategy that allows two nodes.
TEST(PlacementGroupSearchTest, FindsTheAssignmentAGreedyOrderMisses) {
  for (PlacementStrategy strategy :
       {PlacementStrategy::kStrictSpread, PlacementStrategy::kSpread, PlacementStrategy::kPack}) {
    SCOPED_TRACE(PlacementStrategyName(strategy));
    ClusterView cluster;
    AddGreedyTrap(cluster);
    PlacementGroupScheduler pgs(&cluster);
    auto r = pgs.Create(TrapGroup(strategy));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->status, ScheduleStatus::kPlaced) << r->explanation;
    EXPECT_THAT(Nodes(r->bundles), ElementsAre("n1", "n0"));
  }
}

// n0 (zone=a) and n1 have 2 CPUs each. The 2-CPU bundle is the scarcest and takes n0 first in a
// greedy pass; the two zone=a bundles then have nowhere to go. They must share n0.
TEST(PlacementGroupSearchTest, PackAndSpreadShareANodeWhenTheSelectorsLeaveNoOtherWay) {
  for (PlacementStrategy strategy : {PlacementStrategy::kPack, PlacementStrategy::kSpread}) {
    SCOPED_TRACE(PlacementStrategyName(strategy));
    ClusterView cluster;
    MustAdd(cluster, Spec("n0", "CPU=2", {{"zone", "a"}}));
    MustAdd(cluster, Spec("n1", "CPU=2"));
    PlacementGroupScheduler pgs(&cluster);
    PlacementGroupSpec spec = Group(strategy, {"CPU=2", "CPU=1", "CPU=1"});
    spec.primary.selectors = {LabelSelector(), *ParseLabelSelector("zone=a"),
                              *ParseLabelSelector("zone=a")};
    auto r = pgs.Create(spec);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->status, ScheduleStatus::kPlaced) << r->explanation;
    EXPECT_THAT(Nodes(r->bundles), ElementsAre("n1", "n0", "n0"));
  }
}

// A whole GPU and half of one fit an idle 2-GPU node together (on different devices), though
// their sum, 1.5 GPUs, is no amount a single allocation could take.
TEST(PlacementGroupSearchTest, StrictPackFitsBundlesTogetherDeviceByDevice) {
  ClusterView cluster;
  MustAdd(cluster, Spec("n0", "CPU=4,GPU=2", {}, FullyLinked(2)));
  PlacementGroupScheduler pgs(&cluster);
  auto r = pgs.Create(Group(PlacementStrategy::kStrictPack, {"GPU=1", "GPU=0.5"}));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, ScheduleStatus::kPlaced) << r->explanation;
  EXPECT_THAT(Nodes(r->bundles), ElementsAre("n0", "n0"));
  EXPECT_NE(r->bundles[0].allocation.devices[0].instances,
            r->bundles[1].allocation.devices[0].instances);

  // Two half-used devices hold a quarter and a half, one on each.
  ClusterView busy;
  MustAdd(busy, Spec("n0", "CPU=4,GPU=2", {}, FullyLinked(2)));
  ASSERT_TRUE(busy.Allocate(0, Res("GPU=0.5")).ok());   // device 0: 0.5 left
  ASSERT_TRUE(busy.Allocate(0, Res("GPU=0.75")).ok());  // device 1: 0.25 left
  PlacementGroupScheduler on_busy(&busy);
  auto q = on_busy.Create(Group(PlacementStrategy::kStrictPack, {"GPU=0.25", "GPU=0.5"}));
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->status, ScheduleStatus::kPlaced) << q->explanation;
}

// Three idle nodes; only n0 has zone=a. Two bundles need zone=a and distinct nodes: no
// assignment exists on any state of this cluster, and the explanation names those bundles.
TEST(PlacementGroupSearchTest, StrictSpreadProvesInfeasibilityByMatching) {
  ClusterView cluster;
  MustAdd(cluster, Spec("n0", "CPU=8,GPU=8", {{"zone", "a"}}, FullyLinked(8)));
  MustAdd(cluster, Spec("n1", "CPU=8,GPU=8", {{"zone", "b"}}, FullyLinked(8)));
  MustAdd(cluster, Spec("n2", "CPU=8,GPU=8", {{"zone", "b"}}, FullyLinked(8)));
  PlacementGroupScheduler pgs(&cluster);
  PlacementGroupSpec spec = Group(PlacementStrategy::kStrictSpread, {"GPU=1", "GPU=1", "CPU=1"});
  spec.primary.selectors = {*ParseLabelSelector("zone=a"), *ParseLabelSelector("zone=a"),
                            LabelSelector()};
  auto r = pgs.Create(spec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(r->explanation,
            "STRICT_SPREAD: bundles 0, 1 (GPU=1 with selector zone=a) need 2 nodes; only 1 can "
            "hold any of them (n0)");
}

// On an idle cluster nothing is busy: two zone=a bundles that only n0 can take, and that do not
// fit it together, are INFEASIBLE, explained by the bundles, not PENDING on "room".
TEST(PlacementGroupSearchTest, BundlesThatNeverFitTogetherAreInfeasibleOnAnIdleCluster) {
  ClusterView cluster;
  MustAdd(cluster, Spec("n0", "CPU=2", {{"zone", "a"}}));
  MustAdd(cluster, Spec("n1", "CPU=8"));
  PlacementGroupScheduler pgs(&cluster);
  PlacementGroupSpec spec = Group(PlacementStrategy::kPack, {"CPU=2", "CPU=1"});
  spec.primary.selectors.assign(2, *ParseLabelSelector("zone=a"));
  auto r = pgs.Create(spec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(r->explanation,
            "bundles 0 (CPU=2 with selector zone=a), 1 (CPU=1 with selector zone=a) can only go "
            "on n0, which cannot hold them together");
}

// A PACK group whose node fails is re-placed by the same search: the bundle without a selector
// must leave the only zone=a node to the one that needs it.
TEST(PlacementGroupSearchTest, AReplacedGroupIsSearchedToo) {
  ClusterView cluster;
  MustAdd(cluster, Spec("n-old", "CPU=4,GPU=2", {{"zone", "a"}}, FullyLinked(2)));
  PlacementGroupScheduler pgs(&cluster);
  auto r = pgs.Create(TrapGroup(PlacementStrategy::kPack));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, ScheduleStatus::kPlaced) << r->explanation;
  AddGreedyTrap(cluster);
  auto lost = cluster.FailNode(NodeId("n-old"));
  ASSERT_TRUE(lost.ok());
  auto reports = pgs.OnNodeFailed(NodeId("n-old"), *lost);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_TRUE(reports[0].placed) << reports[0].explanation;
  const PlacementGroup* group = pgs.Find(*r->id);
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->bundles[0]->node.value(), "n1");
  EXPECT_EQ(group->bundles[1]->node.value(), "n0");
}

// Six bundles, six one-CPU nodes, and selectors that leave exactly one assignment: bundle i may
// use node i or node i+1, and bundle 5 only node 5. A greedy pass that gives bundle i node i+1
// strands bundle 5; the search finds the diagonal.
TEST(PlacementGroupSearchTest, SixBundlesWithOneAssignmentAreFound) {
  for (PlacementStrategy strategy :
       {PlacementStrategy::kPack, PlacementStrategy::kSpread, PlacementStrategy::kStrictSpread}) {
    SCOPED_TRACE(PlacementStrategyName(strategy));
    ClusterView cluster;
    // Added n5 first: among idle nodes a greedy pass takes the first added, node i+1.
    for (int i = 5; i >= 0; --i) {
      MustAdd(cluster, Spec("n" + std::to_string(i), "CPU=1", {{"slot", std::to_string(i)}}));
    }
    PlacementGroupSpec spec;
    spec.strategy = strategy;
    for (int i = 0; i < 6; ++i) {
      spec.primary.bundles.push_back(Res("CPU=1"));
      spec.primary.selectors.push_back(*ParseLabelSelector(
          i == 5 ? "slot=5" : "slot=in(" + std::to_string(i) + "," + std::to_string(i + 1) + ")"));
    }
    PlacementGroupScheduler pgs(&cluster);
    auto r = pgs.Create(spec);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->status, ScheduleStatus::kPlaced) << r->explanation;
    EXPECT_THAT(Nodes(r->bundles), ElementsAre("n0", "n1", "n2", "n3", "n4", "n5"));
  }
}

// --- Restore: a head restarted from its state store takes its groups back ---

// What a head stores of a group's bundles and hands to Restore after a restart.
std::vector<RestoredBundle> Saved(const PlacementGroup& group) {
  std::vector<RestoredBundle> saved;
  for (const std::optional<BundlePlacement>& b : group.bundles) {
    if (!b.has_value()) {
      saved.emplace_back();
      continue;
    }
    saved.push_back(RestoredBundle{b->node, b->allocation.resources, b->allocation.devices});
  }
  return saved;
}

// A bundle's placement without the allocation id, which belongs to each view.
std::string Where(const std::optional<BundlePlacement>& b) {
  if (!b.has_value()) return "unplaced";
  std::ostringstream out;
  out << b->node << " " << b->allocation.resources.ToString();
  for (const DeviceGrant& g : b->allocation.devices) {
    out << " " << g.resource << ":";
    for (size_t i = 0; i < g.instances.size(); ++i)
      out << g.instances[i] << "=" << g.amounts[i] << ",";
  }
  return out.str();
}

std::vector<std::string> Wheres(const std::vector<std::optional<BundlePlacement>>& bundles) {
  std::vector<std::string> out;
  for (const auto& b : bundles) out.push_back(Where(b));
  return out;
}

// Nodes n0..n5 (8 GPUs, 16 CPUs) and a CPU-only c0, as the agents register them again.
void AddRestartCluster(ClusterView& cluster) {
  AddGpuNodes(cluster, 6);
  MustAdd(cluster, Spec("c0", "CPU=32,memory=64GiB"));
}

std::vector<PlacementGroupSpec> MixedGroups() {
  std::vector<PlacementGroupSpec> specs;
  specs.push_back(Group(PlacementStrategy::kPack, {"GPU=4", "GPU=2", "CPU=2,GPU=2"}, "pack"));
  specs.push_back(
      Group(PlacementStrategy::kStrictSpread, {"GPU=1", "GPU=0.5", "GPU=0.25"}, "spread"));
  specs.push_back(Group(PlacementStrategy::kStrictPack, {"CPU=4,memory=8GiB", "CPU=8"}, "cpu"));
  PlacementGroupSpec fallback = Group(PlacementStrategy::kStrictPack, {"GPU=16"}, "fallback");
  fallback.fallbacks.push_back(BundleOption{{Res("GPU=3"), Res("GPU=3")}, {}});
  specs.push_back(fallback);
  return specs;
}

TEST(PlacementGroupRestoreTest, ARestoredGroupHasExactlyItsPlacementAndTheViewMatches) {
  ClusterView before;
  AddRestartCluster(before);
  PlacementGroupScheduler original(&before);
  // A group that is gone by the restart shaped where the others went: placing them anew on the
  // restarted cluster would put them elsewhere.
  auto filler = original.Create(Group(PlacementStrategy::kSpread, {"GPU=3", "GPU=3", "GPU=3"}));
  ASSERT_EQ(filler->status, ScheduleStatus::kPlaced);
  std::vector<PlacementGroupId> ids;
  for (const PlacementGroupSpec& spec : MixedGroups()) {
    auto r = original.Create(spec);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->status, ScheduleStatus::kPlaced) << spec.name << ": " << r->explanation;
    ids.push_back(*r->id);
  }
  ASSERT_TRUE(original.Remove(*filler->id).ok());
  ASSERT_EQ(original.Find(ids[3])->option, 1u);  // the fallback was chosen
  {
    ClusterView fresh;
    AddRestartCluster(fresh);
    PlacementGroupScheduler anew(&fresh);
    auto again = anew.Create(MixedGroups()[0]);
    std::vector<std::optional<BundlePlacement>> placed(again->bundles.begin(),
                                                       again->bundles.end());
    ASSERT_NE(Wheres(placed), Wheres(original.Find(ids[0])->bundles));
  }

  ClusterView after;
  AddRestartCluster(after);
  PlacementGroupScheduler restored(&after);
  for (PlacementGroupId id : ids) {
    const PlacementGroup& g = *original.Find(id);
    const std::vector<RestoredBundle> saved = Saved(g);
    auto r = restored.Restore(g.spec, g.option, saved);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->state, PlacementGroupState::kCreated);
    EXPECT_EQ(r->option, g.option);
    EXPECT_THAT(r->refused, IsEmpty());
    EXPECT_EQ(r->explanation, "");
    EXPECT_EQ(Wheres(r->bundles), Wheres(g.bundles)) << g.spec.name;
    const PlacementGroup* kept = restored.Find(r->id);
    ASSERT_NE(kept, nullptr);
    EXPECT_EQ(restored.FindByName(g.spec.name), r->id);
    EXPECT_EQ(kept->state, PlacementGroupState::kCreated);
    EXPECT_EQ(kept->bundles, r->bundles);
    // The allocations are this view's.
    for (const auto& b : r->bundles)
      EXPECT_EQ(*after.FindAllocation(b->allocation.id), b->allocation);
  }
  EXPECT_EQ(ViewDigest(after), ViewDigest(before));
  // Nothing is waiting, and a later retry moves nothing.
  EXPECT_THAT(restored.OnClusterChanged(), IsEmpty());
  EXPECT_EQ(ViewDigest(after), ViewDigest(before));
}

TEST(PlacementGroupRestoreTest, RemoveAfterRestoreFreesExactlyWhatWasRestored) {
  ClusterView before;
  AddRestartCluster(before);
  PlacementGroupScheduler original(&before);
  auto created = original.Create(MixedGroups()[0]);
  ASSERT_EQ(created->status, ScheduleStatus::kPlaced);
  ClusterView after;
  AddRestartCluster(after);
  const std::string empty = ViewDigest(after);
  PlacementGroupScheduler restored(&after);
  // Work the restart did not touch: a lease on n5 (where the group is not).
  ASSERT_TRUE(after.Allocate(*after.Find(NodeId("n5")), Res("CPU=1,GPU=1")).ok());
  const std::string with_lease = ViewDigest(after);
  const PlacementGroup& g = *original.Find(*created->id);
  auto r = restored.Restore(g.spec, g.option, Saved(g));
  ASSERT_TRUE(r.ok()) << r.status();
  auto released = restored.Remove(r->id);
  ASSERT_TRUE(released.ok()) << released.status();
  ASSERT_EQ(released->size(), 3u);
  for (size_t b = 0; b < 3; ++b) EXPECT_EQ((*released)[b], r->bundles[b]->allocation);
  EXPECT_EQ(ViewDigest(after), with_lease);
  EXPECT_NE(ViewDigest(after), empty);
  EXPECT_TRUE(restored.groups().empty());
  EXPECT_FALSE(restored.FindByName("pack").has_value());
}

TEST(PlacementGroupRestoreTest, BundlesOnUnknownOrDeadNodesWaitAndArePlacedLater) {
  ClusterView before;
  AddGpuNodes(before, 4);
  PlacementGroupScheduler original(&before);
  auto created =
      original.Create(Group(PlacementStrategy::kStrictSpread, {"GPU=2", "GPU=2", "GPU=2"}, "g"));
  ASSERT_EQ(created->status, ScheduleStatus::kPlaced);
  ASSERT_THAT(Nodes(created->bundles), ElementsAre("n0", "n1", "n2"));

  // After the restart n0 is back, n1 registered and then died, n2 never came back; n3 and a new
  // n4 are there.
  ClusterView after;
  MustAdd(after, Spec("n0", "CPU=16,GPU=8", {{"zone", "a"}}, FullyLinked(8)));
  MustAdd(after, Spec("n1", "CPU=16,GPU=8", {{"zone", "b"}}, FullyLinked(8)));
  MustAdd(after, Spec("n3", "CPU=16,GPU=8", {{"zone", "b"}}, FullyLinked(8)));
  MustAdd(after, Spec("n4", "CPU=16,GPU=8", {{"zone", "a"}}, FullyLinked(8)));
  ASSERT_TRUE(after.FailNode(NodeId("n1")).ok());
  PlacementGroupScheduler restored(&after);
  const PlacementGroup& g = *original.Find(*created->id);
  auto r = restored.Restore(g.spec, g.option, Saved(g));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->state, PlacementGroupState::kRescheduling);
  EXPECT_THAT(r->refused, ElementsAre(UnrestoredBundle{1, "node n1 is dead"},
                                      UnrestoredBundle{2, "node n2 is not in the cluster"}));
  EXPECT_EQ(r->explanation, "bundle 1: node n1 is dead; bundle 2: node n2 is not in the cluster");
  EXPECT_EQ(Where(r->bundles[0]), Where(g.bundles[0]));  // the survivor is held as it was
  EXPECT_FALSE(r->bundles[1].has_value());
  EXPECT_FALSE(r->bundles[2].has_value());
  const PlacementGroup* waiting = restored.Find(r->id);
  EXPECT_EQ(waiting->state, PlacementGroupState::kRescheduling);
  EXPECT_EQ(waiting->explanation,
            "not restored: bundle 1: node n1 is dead; bundle 2: node n2 is not in the cluster");
  EXPECT_EQ(Available(after, "n3"), Res("CPU=16,GPU=8"));  // Restore placed nothing anew

  // The usual re-placement: the lost bundles go to nodes the survivor is not on.
  std::vector<RescheduleReport> reports = restored.OnClusterChanged();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_TRUE(reports[0].placed);
  EXPECT_THAT(reports[0].bundles, ElementsAre(1, 2));
  const PlacementGroup* placed = restored.Find(r->id);
  EXPECT_EQ(placed->state, PlacementGroupState::kCreated);
  EXPECT_EQ(Where(placed->bundles[0]), Where(g.bundles[0]));
  std::set<std::string> nodes;
  for (const auto& b : placed->bundles) nodes.insert(b->node.value());
  EXPECT_EQ(nodes, (std::set<std::string>{"n0", "n3", "n4"}));
}

TEST(PlacementGroupRestoreTest, BundlesSavedWithoutANodeWaitForOne) {
  ClusterView cluster;
  AddGpuNodes(cluster, 2);
  PlacementGroupScheduler pgs(&cluster);
  PlacementGroupSpec spec = Group(PlacementStrategy::kSpread, {"GPU=1", "GPU=1"}, "g");
  const Quantity one = Quantity::FromInt(1);
  std::vector<RestoredBundle> saved = {
      RestoredBundle{NodeId("n1"), Res("GPU=1"), {DeviceGrant{"GPU", {5}, {one}}}},
      RestoredBundle{}};
  auto r = pgs.Restore(spec, 0, saved);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->state, PlacementGroupState::kRescheduling);
  EXPECT_THAT(r->refused, IsEmpty());  // nothing to report: it had no node
  EXPECT_EQ(pgs.Find(r->id)->explanation, "bundle 1 has no node yet");
  EXPECT_EQ(r->bundles[0]->allocation.devices[0].instances, std::vector<int>{5});
  EXPECT_EQ(Available(cluster, "n0"), Res("CPU=16,GPU=8"));
  std::vector<RescheduleReport> reports = pgs.OnClusterChanged();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_TRUE(reports[0].placed);
  EXPECT_EQ(pgs.Find(r->id)->bundles[1]->node.value(), "n0");  // SPREAD: a node of its own

  // A group with nothing held is kept too, with its option.
  auto none = pgs.Restore(Group(PlacementStrategy::kPack, {"GPU=1"}, "h"), 0,
                          std::vector<RestoredBundle>(1));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->state, PlacementGroupState::kRescheduling);
  EXPECT_EQ(pgs.Find(none->id)->explanation, "bundle 0 has no node yet");
}

TEST(PlacementGroupRestoreTest, AllocationsTheViewCannotGiveAreRefusedAndNothingLeaks) {
  ClusterView cluster;
  AddGpuNodes(cluster, 2);
  MustAdd(cluster, Spec("small", "CPU=4,GPU=4", {}, FullyLinked(4)));
  const Quantity one = Quantity::FromInt(1);
  // A lease the agent of n0 reported holds GPU 3 and 2 CPUs.
  const Allocation lease = *cluster.AllocateExact(*cluster.Find(NodeId("n0")), Res("CPU=2,GPU=1"),
                                                  {DeviceGrant{"GPU", {3}, {one}}});
  const std::string with_lease = ViewDigest(cluster);
  PlacementGroupScheduler pgs(&cluster);
  PlacementGroupSpec spec =
      Group(PlacementStrategy::kPack, {"GPU=2", "GPU=1", "GPU=1", "CPU=2,GPU=1", "CPU=15"}, "g");
  std::vector<RestoredBundle> saved = {
      // Taken by the lease.
      RestoredBundle{NodeId("n0"), Res("GPU=2"), {DeviceGrant{"GPU", {2, 3}, {one, one}}}},
      // Fine.
      RestoredBundle{NodeId("n0"), Res("GPU=1"), {DeviceGrant{"GPU", {4}, {one}}}},
      // The same instance as the bundle before it.
      RestoredBundle{NodeId("n0"), Res("GPU=1"), {DeviceGrant{"GPU", {4}, {one}}}},
      // "small" came back with 4 GPUs; instance 6 is gone.
      RestoredBundle{NodeId("small"), Res("CPU=2,GPU=1"), {DeviceGrant{"GPU", {6}, {one}}}},
      // More CPU than is free next to the lease: 16 - 2 = 14.
      RestoredBundle{NodeId("n0"), Res("CPU=15"), {}},
  };
  auto r = pgs.Restore(spec, 0, saved);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->state, PlacementGroupState::kRescheduling);
  EXPECT_THAT(
      r->refused,
      ElementsAre(UnrestoredBundle{0, "node n0: GPU 3 has 0 free, not 1"},
                  UnrestoredBundle{2, "node n0: GPU 4 has 0 free, not 1"},
                  UnrestoredBundle{3, "GPU: instances must be ascending, distinct and below 4"},
                  UnrestoredBundle{4, "node n0 has CPU=14,GPU=6 free, not CPU=15"}));
  ASSERT_TRUE(r->bundles[1].has_value());
  for (int b : {0, 2, 3, 4}) EXPECT_FALSE(r->bundles[b].has_value()) << b;
  // Only bundle 1 is held besides the lease; removing the group leaves the lease alone.
  EXPECT_EQ(Available(cluster, "n0"), Res("CPU=14,GPU=6"));
  EXPECT_EQ(Available(cluster, "small"), Res("CPU=4,GPU=4"));
  ASSERT_EQ(pgs.Remove(r->id)->size(), 1u);
  EXPECT_EQ(ViewDigest(cluster), with_lease);
  EXPECT_EQ(*cluster.FindAllocation(lease.id), lease);
}

TEST(PlacementGroupRestoreTest, AnAllocationThatIsNotTheBundlesDemandIsRefused) {
  ClusterView cluster;
  AddGpuNodes(cluster, 1);
  PlacementGroupScheduler pgs(&cluster);
  const Quantity one = Quantity::FromInt(1);
  std::vector<RestoredBundle> saved = {
      RestoredBundle{NodeId("n0"), Res("GPU=1"), {DeviceGrant{"GPU", {0}, {one}}}}};
  auto r = pgs.Restore(Group(PlacementStrategy::kPack, {"CPU=1,GPU=1"}, "g"), 0, saved);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->refused, ElementsAre(UnrestoredBundle{
                              0, "its allocation GPU=1 is not the bundle's demand CPU=1,GPU=1"}));
  EXPECT_EQ(Available(cluster, "n0"), Res("CPU=16,GPU=8"));
}

TEST(PlacementGroupRestoreTest, BadInputIsAnErrorAndChangesNothing) {
  ClusterView cluster;
  AddGpuNodes(cluster, 2);
  PlacementGroupScheduler pgs(&cluster);
  ASSERT_EQ(pgs.Create(Group(PlacementStrategy::kPack, {"GPU=1"}, "taken"))->status,
            ScheduleStatus::kPlaced);
  const std::string view = ViewDigest(cluster);
  const Quantity one = Quantity::FromInt(1);
  const std::vector<RestoredBundle> one_bundle = {
      RestoredBundle{NodeId("n1"), Res("GPU=1"), {DeviceGrant{"GPU", {0}, {one}}}}};

  auto exists = pgs.Restore(Group(PlacementStrategy::kPack, {"GPU=1"}, "taken"), 0, one_bundle);
  EXPECT_EQ(exists.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(exists.status().message(), "a placement group named \"taken\" exists");

  auto option = pgs.Restore(Group(PlacementStrategy::kPack, {"GPU=1"}, "g"), 1, one_bundle);
  EXPECT_EQ(option.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(option.status().message(),
            "placement group \"g\": option 1 does not exist (the spec has 1)");

  auto count = pgs.Restore(Group(PlacementStrategy::kPack, {"GPU=1", "GPU=1"}, "g"), 0, one_bundle);
  EXPECT_EQ(count.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(count.status().message(),
            "placement group \"g\": 1 restored bundles for the 2 of option 0");

  auto invalid = pgs.Restore(Group(PlacementStrategy::kPack, {"CPU=0"}, "g"), 0, one_bundle);
  EXPECT_EQ(invalid.status().code(), absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(pgs.groups().size(), 1u);
  EXPECT_FALSE(pgs.FindByName("g").has_value());
  EXPECT_EQ(ViewDigest(cluster), view);
  // A restored name is taken like a created one.
  ASSERT_TRUE(pgs.Restore(Group(PlacementStrategy::kPack, {"GPU=1"}, "g"), 0, one_bundle).ok());
  EXPECT_EQ(pgs.Create(Group(PlacementStrategy::kPack, {"GPU=1"}, "g")).status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST(PlacementGroupRestoreTest, RestoreOrderDoesNotMatter) {
  ClusterView before;
  AddRestartCluster(before);
  PlacementGroupScheduler original(&before);
  auto filler = original.Create(Group(PlacementStrategy::kSpread, {"GPU=3", "GPU=3", "GPU=3"}));
  std::vector<const PlacementGroup*> groups;
  for (const PlacementGroupSpec& spec : MixedGroups()) {
    auto r = original.Create(spec);
    ASSERT_EQ(r->status, ScheduleStatus::kPlaced);
    groups.push_back(original.Find(*r->id));
  }
  ASSERT_TRUE(original.Remove(*filler->id).ok());
  auto restore_all = [&](const std::vector<int>& order) {
    auto cluster = std::make_unique<ClusterView>();
    AddRestartCluster(*cluster);
    PlacementGroupScheduler pgs(cluster.get());
    for (int i : order) {
      auto r = pgs.Restore(groups[i]->spec, groups[i]->option, Saved(*groups[i]));
      EXPECT_TRUE(r.ok() && r->state == PlacementGroupState::kCreated) << i;
    }
    return ViewDigest(*cluster);
  };
  const std::string forward = restore_all({0, 1, 2, 3});
  EXPECT_EQ(forward, ViewDigest(before));
  EXPECT_EQ(restore_all({3, 2, 1, 0}), forward);
  EXPECT_EQ(restore_all({1, 3, 0, 2}), forward);
}

TEST(PlacementGroupRestoreTest, ABundleOnADrainingNodeIsTakenBack) {
  ClusterView cluster;
  AddGpuNodes(cluster, 2);
  ASSERT_TRUE(cluster.SetDraining(NodeId("n0"), true).ok());
  PlacementGroupScheduler pgs(&cluster);
  const Quantity one = Quantity::FromInt(1);
  std::vector<RestoredBundle> saved = {
      RestoredBundle{NodeId("n0"), Res("GPU=1"), {DeviceGrant{"GPU", {7}, {one}}}}};
  auto r = pgs.Restore(Group(PlacementStrategy::kPack, {"GPU=1"}, "g"), 0, saved);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->state, PlacementGroupState::kCreated);
  EXPECT_EQ(Available(cluster, "n0"), Res("CPU=16,GPU=7"));
}

}  // namespace
}  // namespace tessera

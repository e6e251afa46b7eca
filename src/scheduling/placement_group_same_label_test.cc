// Placement groups confined to one value of a label key (same rack, same NVLink domain): every
// bundle inside one value, the value kept while any bundle is placed, explanations that say so.
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduling/placement_group_scheduler.h"
#include "scheduling/scheduling_test_util.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing_util::FullyLinked;
using testing_util::MustAdd;
using testing_util::Res;
using testing_util::Spec;

PlacementGroupSpec Confined(PlacementStrategy strategy, std::vector<std::string> bundles,
                            std::string key = "rack") {
  PlacementGroupSpec spec;
  spec.name = "g";
  spec.strategy = strategy;
  spec.same_label = std::move(key);
  for (const std::string& b : bundles) spec.primary.bundles.push_back(Res(b));
  return spec;
}

// Racks r1 (1 node), r2 (4 nodes), r3 (2 nodes), each node CPU=4; and "loose", with no rack.
void AddRacks(ClusterView& cluster) {
  const std::vector<std::pair<std::string, int>> racks = {{"r1", 1}, {"r2", 4}, {"r3", 2}};
  for (const auto& [rack, n] : racks) {
    for (int i = 0; i < n; ++i) {
      MustAdd(cluster, Spec(rack + "-" + std::to_string(i), "CPU=4", {{"rack", rack}}));
    }
  }
  MustAdd(cluster, Spec("loose", "CPU=64"));
}

std::set<std::string> RacksOf(const ClusterView& cluster, const std::vector<BundlePlacement>& b) {
  std::set<std::string> racks;
  for (const BundlePlacement& p : b) {
    const LabelSet& labels = cluster.node(*cluster.Find(p.node)).labels;
    auto it = labels.find("rack");
    racks.insert(it == labels.end() ? "(none)" : it->second);
  }
  return racks;
}

std::vector<std::string> Nodes(const std::vector<std::optional<BundlePlacement>>& bundles) {
  std::vector<std::string> nodes;
  for (const auto& b : bundles) nodes.push_back(b ? b->node.value() : "-");
  return nodes;
}

TEST(PlacementGroupSameLabelTest, EveryBundleLandsInOneValueFewestNodesFirst) {
  ClusterView cluster;
  AddRacks(cluster);
  PlacementGroupScheduler groups(&cluster);
  // r1 has one node: STRICT_SPREAD of two cannot fit there; r3 (2 nodes) is next, before r2.
  auto spread = groups.Create(Confined(PlacementStrategy::kStrictSpread, {"CPU=1", "CPU=1"}));
  ASSERT_TRUE(spread.ok()) << spread.status();
  ASSERT_EQ(spread->status, ScheduleStatus::kPlaced) << spread->explanation;
  EXPECT_EQ(RacksOf(cluster, spread->bundles), std::set<std::string>{"r3"});
  // Without the key every node is a candidate, the one without a rack label included.
  PlacementGroupSpec free = Confined(PlacementStrategy::kPack, {"CPU=40"}, "");
  free.name = "free";
  auto loose = groups.Create(free);
  ASSERT_EQ(loose->status, ScheduleStatus::kPlaced);
  EXPECT_EQ(loose->bundles[0].node, NodeId("loose"));
}

TEST(PlacementGroupSameLabelTest, HeterogeneousBundlesFindTheDomainThatHasEveryKind) {
  ClusterView cluster;
  // Domain d1 has GPU hosts only; d2 a GPU host and a CPU host.
  MustAdd(cluster, Spec("d1-gpu-0", "CPU=8,GPU=4", {{"domain", "d1"}}, FullyLinked(4)));
  MustAdd(cluster, Spec("d1-gpu-1", "CPU=8,GPU=4", {{"domain", "d1"}}, FullyLinked(4)));
  MustAdd(cluster, Spec("d2-gpu", "CPU=8,GPU=4", {{"domain", "d2"}}, FullyLinked(4)));
  MustAdd(cluster, Spec("d2-cpu", "CPU=64", {{"domain", "d2"}, {"pool", "cpu"}}));
  MustAdd(cluster, Spec("cpu-elsewhere", "CPU=64", {{"pool", "cpu"}}));
  PlacementGroupScheduler groups(&cluster);
  PlacementGroupSpec spec = Confined(PlacementStrategy::kPack, {"GPU=4", "CPU=32"}, "domain");
  spec.primary.selectors = {LabelSelector(), *ParseLabelSelector("pool=cpu")};
  auto r = groups.Create(spec);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, ScheduleStatus::kPlaced) << r->explanation;
  EXPECT_EQ(r->bundles[0].node, NodeId("d2-gpu"));
  EXPECT_EQ(r->bundles[1].node, NodeId("d2-cpu"));
}

TEST(PlacementGroupSameLabelTest, NoValueThatCouldEverHoldTheGroupIsInfeasible) {
  ClusterView cluster;
  AddRacks(cluster);
  PlacementGroupScheduler groups(&cluster);
  // 20 CPUs in all: the largest rack (r2) has 16.
  auto big = groups.Create(
      Confined(PlacementStrategy::kPack, {"CPU=4", "CPU=4", "CPU=4", "CPU=4", "CPU=4"}));
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(big->explanation,
            "no value of rack has nodes that could ever hold CPU=20 together (3 values)");
  auto no_key = groups.Create(Confined(PlacementStrategy::kPack, {"CPU=1"}, "row"));
  ASSERT_TRUE(no_key.ok());
  EXPECT_EQ(no_key->status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(no_key->explanation, "no alive node has label row");
  // Enough CPUs in r2 in all, but STRICT_PACK needs them on one node: never.
  auto packed = groups.Create(Confined(PlacementStrategy::kStrictPack, {"CPU=4", "CPU=4"}));
  ASSERT_TRUE(packed.ok());
  EXPECT_EQ(packed->status, ScheduleStatus::kInfeasible);
  EXPECT_THAT(packed->explanation, HasSubstr("confined to one value of rack: rack="));
}

TEST(PlacementGroupSameLabelTest, BusyValuesArePendingAndSaySo) {
  ClusterView cluster;
  AddRacks(cluster);
  PlacementGroupScheduler groups(&cluster);
  PlacementGroupSpec first = Confined(PlacementStrategy::kPack, {"CPU=12"});
  first.primary.bundles = {Res("CPU=4"), Res("CPU=4"), Res("CPU=4"), Res("CPU=4")};
  first.name = "first";
  ASSERT_EQ(groups.Create(first)->status, ScheduleStatus::kPlaced);  // all of r2
  auto second = groups.Create(Confined(PlacementStrategy::kPack, {"CPU=4", "CPU=4", "CPU=4"}));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->status, ScheduleStatus::kPending);
  EXPECT_THAT(second->explanation, HasSubstr("confined to one value of rack: rack=r2: bundle "));
  EXPECT_THAT(second->explanation, HasSubstr("held by placement group first"));
}

TEST(PlacementGroupSameLabelTest, ReplacementStaysInTheValueWhileABundleIsPlaced) {
  ClusterView cluster;
  AddRacks(cluster);
  PlacementGroupScheduler groups(&cluster);
  // Three distinct nodes: only r2 has them.
  auto r = groups.Create(Confined(PlacementStrategy::kStrictSpread, {"CPU=1", "CPU=1", "CPU=1"}));
  ASSERT_EQ(r->status, ScheduleStatus::kPlaced) << r->explanation;
  const PlacementGroup* group = groups.Find(*r->id);
  EXPECT_THAT(Nodes(group->bundles), ElementsAre("r2-0", "r2-1", "r2-2"));
  // r2-0 fails: its bundle goes to r2-3, not to the empty r1 or r3.
  auto lost = cluster.FailNode(NodeId("r2-0"));
  ASSERT_TRUE(lost.ok());
  std::vector<RescheduleReport> reports = groups.OnNodeFailed(NodeId("r2-0"), *lost);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_TRUE(reports[0].placed) << reports[0].explanation;
  EXPECT_THAT(Nodes(group->bundles), ElementsAre("r2-3", "r2-1", "r2-2"));
  // r2-1 fails too: r2 has no node left that holds none of the group's bundles, so the bundle
  // waits, saying where it must go, although r1 and r3 are idle.
  auto gone = cluster.FailNode(NodeId("r2-1"));
  ASSERT_TRUE(gone.ok());
  reports = groups.OnNodeFailed(NodeId("r2-1"), *gone);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_FALSE(reports[0].placed);
  EXPECT_THAT(reports[0].explanation,
              HasSubstr("confined to rack=r2 (where the group's other bundles are): rack=r2: "));
  EXPECT_EQ(group->state, PlacementGroupState::kRescheduling);
  // A node joins r2: the next retry places the bundle there.
  MustAdd(cluster, Spec("r2-9", "CPU=4", {{"rack", "r2"}}));
  reports = groups.OnClusterChanged();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_TRUE(reports[0].placed) << reports[0].explanation;
  EXPECT_THAT(Nodes(group->bundles), ElementsAre("r2-3", "r2-9", "r2-2"));
}

TEST(PlacementGroupSameLabelTest, AGroupThatLostEveryBundleMayTakeAnotherValue) {
  ClusterView cluster;
  AddRacks(cluster);
  PlacementGroupScheduler groups(&cluster);
  auto r = groups.Create(Confined(PlacementStrategy::kStrictPack, {"CPU=2", "CPU=2"}));
  ASSERT_EQ(r->status, ScheduleStatus::kPlaced);
  EXPECT_EQ(r->bundles[0].node, NodeId("r1-0"));  // the value with fewest nodes
  auto lost = cluster.FailNode(NodeId("r1-0"));
  ASSERT_TRUE(lost.ok());
  std::vector<RescheduleReport> reports = groups.OnNodeFailed(NodeId("r1-0"), *lost);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_TRUE(reports[0].placed) << reports[0].explanation;
  EXPECT_THAT(Nodes(groups.Find(*r->id)->bundles), ElementsAre("r3-0", "r3-0"));
}

TEST(PlacementGroupSameLabelTest, AnInvalidKeyIsRefused) {
  ClusterView cluster;
  AddRacks(cluster);
  PlacementGroupScheduler groups(&cluster);
  auto r = groups.Create(Confined(PlacementStrategy::kPack, {"CPU=1"}, "bad key!"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("same_label: "));
}

}  // namespace
}  // namespace tessera

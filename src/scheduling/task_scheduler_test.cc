#include "scheduling/task_scheduler.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hardware/node_label_keys.h"
#include "scheduling/scheduling_test_util.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing_util::FullyLinked;
using testing_util::MustAdd;
using testing_util::Res;
using testing_util::Spec;
using testing_util::TwoIslands;

SchedulingRequest Request(std::string_view resources, int64_t id = 1) {
  SchedulingRequest r;
  r.id = RequestId(id);
  r.resources = Res(resources);
  return r;
}

FallbackList Selectors(std::vector<std::string_view> cli) {
  std::vector<LabelSelector> options;
  for (std::string_view s : cli) options.push_back(*ParseLabelSelector(s));
  return FallbackList::FromSelectors(std::move(options));
}

// Schedules and expects a placement; returns its node id ("" otherwise).
std::string Place(TaskScheduler& scheduler, const SchedulingRequest& r) {
  absl::StatusOr<ScheduleResult> result = scheduler.Schedule(r);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok() || !result->placement) {
    ADD_FAILURE() << "not placed: " << (result.ok() ? result->explanation : "");
    return "";
  }
  return result->placement->node.value();
}

// Schedules `r` as a SPREAD request `n` times; the nodes it went to, in order.
std::vector<std::string> PlaceSpread(TaskScheduler& scheduler, SchedulingRequest r, int n) {
  r.strategy = NodeRanking::kSpread;
  std::vector<std::string> placed;
  for (int i = 0; i < n; ++i) placed.push_back(Place(scheduler, r));
  return placed;
}

ScheduleResult NotPlaced(TaskScheduler& scheduler, const SchedulingRequest& r) {
  absl::StatusOr<ScheduleResult> result = scheduler.Schedule(r);
  EXPECT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->placement.has_value());
  return *result;
}

void AddCpuNodes(ClusterView& cluster, int n, std::string_view resources = "CPU=4") {
  for (int i = 0; i < n; ++i) MustAdd(cluster, Spec("n" + std::to_string(i), resources));
}

TEST(TaskSchedulerTest, DefaultPacksBelowThresholdThenSpreads) {
  ClusterView cluster;
  AddCpuNodes(cluster, 3);
  TaskScheduler scheduler(&cluster);
  std::vector<std::string> placed;
  for (int i = 0; i < 7; ++i) placed.push_back(Place(scheduler, Request("CPU=1")));
  // n2 packs to 0.5 (the threshold), then n1, then n0; then the least utilized.
  EXPECT_THAT(placed, ElementsAre("n2", "n2", "n1", "n1", "n0", "n0", "n0"));
}

TEST(TaskSchedulerTest, PackThresholdIsConfigurable) {
  ClusterView cluster;
  AddCpuNodes(cluster, 2);
  TaskScheduler scheduler(&cluster, SchedulerOptions{.pack_threshold = 1.0});
  std::vector<std::string> placed;
  for (int i = 0; i < 5; ++i) placed.push_back(Place(scheduler, Request("CPU=1")));
  EXPECT_THAT(placed, ElementsAre("n1", "n1", "n1", "n1", "n0"));
}

TEST(TaskSchedulerTest, DefaultPrefersTheLocalNodeWhenItFits) {
  ClusterView cluster;
  AddCpuNodes(cluster, 3);
  TaskScheduler scheduler(&cluster);
  SchedulingRequest r = Request("CPU=3");
  r.local_node = NodeId("n0");
  EXPECT_EQ(Place(scheduler, r), "n0");
  EXPECT_EQ(Place(scheduler, r), "n2");  // n0 is full: the strategy decides
  r.local_node = NodeId("gone");
  EXPECT_EQ(Place(scheduler, r), "n1");
}

TEST(TaskSchedulerTest, SpreadGoesRoundRobinOverTheNodesThatFit) {
  ClusterView cluster;
  AddCpuNodes(cluster, 3);
  TaskScheduler scheduler(&cluster);
  SchedulingRequest r = Request("CPU=1");
  r.strategy = NodeRanking::kSpread;
  std::vector<std::string> placed;
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<ScheduleResult> result = scheduler.Schedule(r);
    placed.push_back(result->placement->node.value());
    ASSERT_TRUE(cluster.Release(result->placement->allocation.id).ok());
  }
  EXPECT_THAT(placed, ElementsAre("n0", "n1", "n2", "n0"));
  // How used a node is does not count, only whether the request fits: n1 keeps its turn while it
  // has a CPU free, and is passed over once it has none.
  ASSERT_TRUE(cluster.Allocate(*cluster.Find(NodeId("n1")), Res("CPU=3")).ok());
  std::vector<std::string> more;
  for (int i = 0; i < 5; ++i) more.push_back(Place(scheduler, r));
  EXPECT_THAT(more, ElementsAre("n1", "n2", "n0", "n2", "n0"));
}

TEST(TaskSchedulerTest, SpreadIsJudgedOnTheRequestedResourcesOnly) {
  // A node whose GPUs are all held still has its CPUs free: CPU-only SPREAD work spreads over it
  // too, instead of counting it as full.
  ClusterView cluster;
  MustAdd(cluster, Spec("gpu0", "CPU=8,GPU=2"));
  MustAdd(cluster, Spec("gpu1", "CPU=8,GPU=2"));
  ASSERT_TRUE(cluster.Allocate(*cluster.Find(NodeId("gpu0")), Res("GPU=2")).ok());
  TaskScheduler scheduler(&cluster);
  EXPECT_THAT(PlaceSpread(scheduler, Request("CPU=1"), 4),
              ElementsAre("gpu0", "gpu1", "gpu0", "gpu1"));
}

TEST(TaskSchedulerTest, SpreadHonoursSelectorsAndSkipsNodesThatCannotFit) {
  ClusterView cluster;
  for (int i = 0; i < 4; ++i) {
    MustAdd(cluster, Spec("n" + std::to_string(i), "CPU=2", {{"zone", i % 2 ? "b" : "a"}}));
  }
  TaskScheduler scheduler(&cluster);
  SchedulingRequest r = Request("CPU=1");
  r.strategy = NodeRanking::kSpread;
  r.selectors = Selectors({"zone=a"});
  EXPECT_THAT(PlaceSpread(scheduler, r, 4), ElementsAre("n0", "n2", "n0", "n2"));
  EXPECT_EQ(NotPlaced(scheduler, r).status, ScheduleStatus::kPending);
}

TEST(TaskSchedulerTest, CpuOnlyWorkAvoidsAcceleratorNodes) {
  ClusterView cluster;
  MustAdd(cluster, Spec("gpu", "CPU=8,GPU=8"));  // emptier and larger than the CPU nodes
  MustAdd(cluster, Spec("cpu0", "CPU=2"));
  MustAdd(cluster, Spec("cpu1", "CPU=2"));
  TaskScheduler scheduler(&cluster);
  std::vector<std::string> placed;
  for (int i = 0; i < 4; ++i) placed.push_back(Place(scheduler, Request("CPU=1")));
  EXPECT_THAT(placed, ElementsAre("cpu1", "cpu0", "cpu0", "cpu1"));  // packed, as among all nodes
  // Only when no CPU node can take it does CPU work go to the accelerator node.
  EXPECT_EQ(Place(scheduler, Request("CPU=1")), "gpu");
  // Work that asks for an accelerator goes where the accelerators are.
  EXPECT_EQ(Place(scheduler, Request("CPU=1,GPU=1")), "gpu");
}

TEST(TaskSchedulerTest, CpuOnlySpreadWorkAvoidsAcceleratorNodes) {
  ClusterView cluster;
  MustAdd(cluster, Spec("cpu0", "CPU=1"));
  MustAdd(cluster, Spec("gpu", "CPU=8,GPU=8"));
  MustAdd(cluster, Spec("cpu1", "CPU=1"));
  TaskScheduler scheduler(&cluster);
  EXPECT_THAT(PlaceSpread(scheduler, Request("CPU=1"), 4),
              ElementsAre("cpu0", "cpu1", "gpu", "gpu"));
}

TEST(TaskSchedulerTest, CpuOnlyWorkPassesOverALocalAcceleratorNodeButHonoursAffinity) {
  ClusterView cluster;
  MustAdd(cluster, Spec("gpu", "CPU=8,GPU=8"));
  MustAdd(cluster, Spec("cpu", "CPU=4"));
  TaskScheduler scheduler(&cluster);
  SchedulingRequest r = Request("CPU=1");
  r.local_node = NodeId("gpu");
  EXPECT_EQ(Place(scheduler, r), "cpu");
  r.local_node = NodeId("cpu");
  EXPECT_EQ(Place(scheduler, r), "cpu");
  r.local_node.reset();
  r.affinity = NodeAffinity{NodeId("gpu"), AffinityKind::kSoft};
  EXPECT_EQ(Place(scheduler, r), "gpu");
  r.affinity->kind = AffinityKind::kHard;
  EXPECT_EQ(Place(scheduler, r), "gpu");
  // With the CPU node full, the submitter's accelerator node takes it after all.
  ASSERT_TRUE(cluster.Allocate(*cluster.Find(NodeId("cpu")), Res("CPU=2")).ok());
  SchedulingRequest local = Request("CPU=1");
  local.local_node = NodeId("gpu");
  EXPECT_EQ(Place(scheduler, local), "gpu");
}

TEST(TaskSchedulerTest, AvoidingAcceleratorNodesCanBeTurnedOff) {
  ClusterView cluster;
  MustAdd(cluster, Spec("gpu", "CPU=8,GPU=8"));
  MustAdd(cluster, Spec("cpu", "CPU=2"));
  TaskScheduler scheduler(&cluster, SchedulerOptions{.avoid_accelerator_nodes = false});
  // Both nodes are empty: the tie goes to the higher index; then cpu is at the pack threshold and
  // gpu, below it, packs.
  std::vector<std::string> placed;
  for (int i = 0; i < 3; ++i) placed.push_back(Place(scheduler, Request("CPU=1")));
  EXPECT_THAT(placed, ElementsAre("cpu", "gpu", "gpu"));
  SchedulingRequest local = Request("CPU=1");
  local.local_node = NodeId("gpu");
  EXPECT_EQ(Place(scheduler, local), "gpu");
}

TEST(TaskSchedulerTest, NodesThatGainOrLoseAcceleratorsChangePool) {
  ClusterView cluster;
  MustAdd(cluster, Spec("a", "CPU=4"));
  MustAdd(cluster, Spec("b", "CPU=4,GPU=1"));
  TaskScheduler scheduler(&cluster);
  EXPECT_EQ(Place(scheduler, Request("CPU=1")), "a");
  // Accelerators change only by registering again.
  ASSERT_TRUE(cluster.RemoveNode(NodeId("a")).ok());
  ASSERT_TRUE(cluster.RemoveNode(NodeId("b")).ok());
  MustAdd(cluster, Spec("a", "CPU=4,GPU=1"));
  MustAdd(cluster, Spec("b", "CPU=4"));
  EXPECT_EQ(Place(scheduler, Request("CPU=1")), "b");
  ASSERT_TRUE(cluster.SetDraining(NodeId("b"), true).ok());
  EXPECT_EQ(Place(scheduler, Request("CPU=1")), "a");
  ASSERT_TRUE(cluster.SetDraining(NodeId("b"), false).ok());
  EXPECT_EQ(Place(scheduler, Request("CPU=1")), "b");
  ASSERT_TRUE(cluster.FailNode(NodeId("b")).ok());
  EXPECT_EQ(Place(scheduler, Request("CPU=1")), "a");
}

TEST(TaskSchedulerTest, HardAffinity) {
  ClusterView cluster;
  AddCpuNodes(cluster, 3);
  TaskScheduler scheduler(&cluster);
  SchedulingRequest r = Request("CPU=3");
  r.affinity = NodeAffinity{NodeId("n0"), AffinityKind::kHard};
  EXPECT_EQ(Place(scheduler, r), "n0");
  ScheduleResult busy = NotPlaced(scheduler, r);
  EXPECT_EQ(busy.status, ScheduleStatus::kPending);
  EXPECT_EQ(busy.explanation,
            "affinity node n0: 1 node could fit CPU=3; it is busy (available CPU: 1; held by task "
            "1)");
  r.affinity->node = NodeId("n9");
  ScheduleResult missing = NotPlaced(scheduler, r);
  EXPECT_EQ(missing.status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(missing.explanation, "affinity node n9 is not in the cluster");
  ASSERT_TRUE(cluster.FailNode(NodeId("n1")).ok());
  r.affinity->node = NodeId("n1");
  EXPECT_EQ(NotPlaced(scheduler, r).explanation, "affinity node n1 is dead");
  r.resources = Res("CPU=5");
  r.affinity->node = NodeId("n2");
  EXPECT_EQ(NotPlaced(scheduler, r).explanation,
            "affinity node n2: no node has 5 CPU (largest: 4)");
}

TEST(TaskSchedulerTest, SoftAffinityFallsBackToTheStrategy) {
  ClusterView cluster;
  AddCpuNodes(cluster, 3);
  TaskScheduler scheduler(&cluster);
  SchedulingRequest r = Request("CPU=3");
  r.affinity = NodeAffinity{NodeId("n0"), AffinityKind::kSoft};
  EXPECT_EQ(Place(scheduler, r), "n0");
  EXPECT_EQ(Place(scheduler, r), "n2");  // n0 busy
  ASSERT_TRUE(cluster.FailNode(NodeId("n1")).ok());
  r.affinity->node = NodeId("n1");  // dead: ignored
  r.resources = Res("CPU=1");
  EXPECT_EQ(Place(scheduler, r), "n0");  // both at 0.75: the least utilized, lowest first
}

TEST(TaskSchedulerTest, FallbackOrderIsHonoredAndReported) {
  ClusterView cluster;
  MustAdd(cluster, Spec("a", "CPU=4", {{"zone", "z1"}}));
  MustAdd(cluster, Spec("b", "CPU=4", {{"zone", "z2"}}));
  MustAdd(cluster, Spec("c", "CPU=4", {{"zone", "z3"}}));
  TaskScheduler scheduler(&cluster);
  SchedulingRequest r = Request("CPU=4");
  r.selectors = Selectors({"zone=z9", "zone=z2", "zone=z1"});
  absl::StatusOr<ScheduleResult> first = scheduler.Schedule(r);
  EXPECT_EQ(first->placement->node.value(), "b");
  EXPECT_EQ(first->placement->option, 1u);
  absl::StatusOr<ScheduleResult> second = scheduler.Schedule(r);  // z2 is busy now
  EXPECT_EQ(second->placement->node.value(), "a");
  EXPECT_EQ(second->placement->option, 2u);
  ScheduleResult third = NotPlaced(scheduler, r);
  EXPECT_EQ(third.status, ScheduleStatus::kPending);
  EXPECT_EQ(third.explanation,
            "option 0: no node has zone in (z9); "
            "option 1: 1 node match the selector and 1 could fit CPU=4; it is busy (available "
            "CPU: 0; held by task 1); "
            "option 2: 1 node match the selector and 1 could fit CPU=4; it is busy (available "
            "CPU: 0; held by task 1)");
}

TEST(TaskSchedulerTest, FractionsBestFitOntoOneDevice) {
  ClusterView cluster;
  MustAdd(cluster, Spec("n0", "GPU=2"));
  TaskScheduler scheduler(&cluster);
  auto device = [&](std::string_view resources) {
    absl::StatusOr<ScheduleResult> result = scheduler.Schedule(Request(resources));
    return result->placement->allocation.devices.at(0).instances.at(0);
  };
  EXPECT_EQ(device("GPU=0.5"), 0);
  EXPECT_EQ(device("GPU=0.3"), 0);  // 0.5 left on device 0 is the tighter fit
  EXPECT_EQ(device("GPU=0.5"), 1);  // 0.2 left on device 0: too small
  EXPECT_EQ(device("GPU=0.2"), 0);
  const NodeRecord& node = cluster.node(0);
  EXPECT_EQ(node.FindDevices("GPU")->available,
            (std::vector<Quantity>{Quantity(), *Quantity::Parse("0.5")}));
  ScheduleResult pending = NotPlaced(scheduler, Request("GPU=1"));
  EXPECT_EQ(pending.explanation,
            "1 node could fit GPU=1; it is busy (available GPU: 0; held by task 1)");
}

TEST(TaskSchedulerTest, MultiDeviceRequestGetsAWholeIsland) {
  ClusterView cluster;
  MustAdd(cluster, Spec("n0", "CPU=16,GPU=8", {}, TwoIslands()));
  TaskScheduler scheduler(&cluster);
  absl::StatusOr<ScheduleResult> one = scheduler.Schedule(Request("GPU=1"));
  const int taken = one->placement->allocation.devices[0].instances[0];
  absl::StatusOr<ScheduleResult> four = scheduler.Schedule(Request("GPU=4"));
  ASSERT_TRUE(four->placement.has_value());
  const std::vector<int>& island = four->placement->allocation.devices[0].instances;
  EXPECT_EQ(island, taken < 4 ? (std::vector<int>{4, 5, 6, 7}) : (std::vector<int>{0, 1, 2, 3}));
}

TEST(TaskSchedulerTest, ExplanationsForInfeasibleRequests) {
  ClusterView cluster;
  MustAdd(cluster,
          Spec("a", "CPU=8,GPU=8",
               {{std::string(labels::kAcceleratorType), "H100"}, {"zone", "z1"}}, FullyLinked(8)));
  MustAdd(cluster,
          Spec("b", "CPU=8,GPU=8",
               {{std::string(labels::kAcceleratorType), "H100"}, {"zone", "z1"}}, FullyLinked(8)));
  MustAdd(cluster, Spec("c", "CPU=8,GPU=16", {{"zone", "z2"}}));
  TaskScheduler scheduler(&cluster);
  SchedulingRequest tpu = Request("CPU=1", 1);
  tpu.selectors = Selectors({"tessera.io/accelerator-type=TPU-V6E"});
  ScheduleResult r1 = NotPlaced(scheduler, tpu);
  EXPECT_EQ(r1.status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(r1.explanation, "no node has tessera.io/accelerator-type in (TPU-V6E)");
  EXPECT_EQ(NotPlaced(scheduler, Request("GPU=32", 2)).explanation,
            "no node has 32 GPU (largest: 16)");
  EXPECT_EQ(NotPlaced(scheduler, Request("TPU=4", 3)).explanation, "no node has TPU");
  SchedulingRequest nine = Request("GPU=9", 4);
  nine.selectors = Selectors({"zone=z1"});
  EXPECT_EQ(NotPlaced(scheduler, nine).explanation,
            "2 nodes match the selector; none has GPU >= 9");
  EXPECT_EQ(NotPlaced(scheduler, Request("CPU=9,GPU=9", 5)).explanation,
            "no node has 9 CPU (largest: 8)");
  EXPECT_EQ(scheduler.parked_count(), 5u);
}

TEST(TaskSchedulerTest, ExplanationForPendingRequests) {
  ClusterView cluster;
  for (std::string id : {"a", "b", "c"})
    MustAdd(cluster, Spec(id, "CPU=8,GPU=4", {}, FullyLinked(4)));
  ASSERT_TRUE(cluster.Allocate(0, Res("GPU=2")).ok());
  ASSERT_TRUE(cluster.Allocate(1, Res("GPU=3")).ok());
  ASSERT_TRUE(cluster.Allocate(2, Res("GPU=4")).ok());
  TaskScheduler scheduler(&cluster);
  ScheduleResult r = NotPlaced(scheduler, Request("GPU=4"));
  EXPECT_EQ(r.status, ScheduleStatus::kPending);
  // Taken by the cluster view directly: nobody named the holders.
  EXPECT_EQ(r.explanation,
            "3 nodes could fit GPU=4; all are busy (available GPU: 2, 1, 0; held by other work)");
  EXPECT_EQ(scheduler.parked_count(), 0u);  // pending is not parked
}

TEST(TaskSchedulerTest, ParkedInfeasibleRequestBecomesFeasibleWhenANodeJoins) {
  ClusterView cluster;
  AddCpuNodes(cluster, 3, "CPU=4,GPU=8");
  TaskScheduler scheduler(&cluster);
  EXPECT_THAT(scheduler.OnClusterChanged(), IsEmpty());  // the initial nodes: nothing parked
  Allocation held = *cluster.Allocate(0, Res("CPU=1"));
  EXPECT_EQ(NotPlaced(scheduler, Request("GPU=16", 7)).status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(NotPlaced(scheduler, Request("TPU=4", 8)).status, ScheduleStatus::kInfeasible);
  // A release or a drain cannot help: nothing is re-examined.
  ASSERT_TRUE(cluster.Release(held.id).ok());
  ASSERT_TRUE(cluster.SetDraining(NodeId("n1"), true).ok());
  EXPECT_THAT(scheduler.OnClusterChanged(), IsEmpty());
  EXPECT_EQ(scheduler.reexamined_pairs(), 0);
  // A node that fits request 7 joins: only it is examined, for each parked request.
  MustAdd(cluster, Spec("big", "CPU=4,GPU=16"));
  EXPECT_THAT(scheduler.OnClusterChanged(), ElementsAre(RequestId(7)));
  EXPECT_EQ(scheduler.reexamined_pairs(), 2);
  EXPECT_EQ(scheduler.parked_count(), 1u);
  EXPECT_EQ(Place(scheduler, Request("GPU=16", 7)), "big");
}

TEST(TaskSchedulerTest, DrainingNodesTakeNoNewWork) {
  ClusterView cluster;
  AddCpuNodes(cluster, 2);
  ASSERT_TRUE(cluster.SetDraining(NodeId("n1"), true).ok());
  TaskScheduler scheduler(&cluster);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Place(scheduler, Request("CPU=1")), "n0");
  EXPECT_EQ(NotPlaced(scheduler, Request("CPU=1")).explanation,
            "1 node could fit CPU=1; it is busy (available CPU: 0; held by task 1)");
  SchedulingRequest r = Request("CPU=1");
  r.affinity = NodeAffinity{NodeId("n1"), AffinityKind::kHard};
  EXPECT_EQ(NotPlaced(scheduler, r).explanation, "affinity node n1 is draining");
}

TEST(TaskSchedulerTest, SelectorsPickThroughTheLabelIndex) {
  ClusterView cluster;
  for (int i = 0; i < 40; ++i) {
    MustAdd(cluster,
            Spec("n" + std::to_string(i), "CPU=4", {{"zone", "z" + std::to_string(i % 4)}}));
  }
  MustAdd(cluster, Spec("rare", "CPU=4", {{"zone", "z0"}, {"pool", "special"}}));
  TaskScheduler scheduler(&cluster);
  SchedulingRequest r = Request("CPU=1");
  r.selectors = Selectors({"pool=special"});
  EXPECT_EQ(Place(scheduler, r), "rare");
  r.selectors = Selectors({"zone=in(z1,z2)"});
  const std::string node = Place(scheduler, r);
  const NodeRecord& record = cluster.node(*cluster.Find(NodeId(node)));
  EXPECT_THAT(record.labels.at("zone"), ::testing::AnyOf("z1", "z2"));
}

TEST(TaskSchedulerTest, InvalidRequestsAreRefused) {
  ClusterView cluster;
  AddCpuNodes(cluster, 1);
  TaskScheduler scheduler(&cluster);
  absl::StatusOr<ScheduleResult> fraction = scheduler.Schedule(Request("GPU=1.5"));
  EXPECT_EQ(fraction.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fraction.status().message(),
            "GPU: 1.5 must be a whole number of devices or a fraction below 1 (one shared device)");
  EXPECT_EQ(scheduler.Schedule(Request("TPU=3")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler.Schedule(Request("HPU=0.5")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(scheduler.Schedule(Request("CPU=1.5")).ok());
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST(TaskSchedulerAdviseTest, AdviceTakesNothingAndParksNothing) {
  ClusterView cluster;
  MustAdd(cluster, testing_util::Spec("n0", "CPU=4,GPU=2"));
  TaskScheduler scheduler(&cluster);
  absl::StatusOr<ScheduleResult> advice = scheduler.Advise(Request("CPU=1,GPU=1"));
  ASSERT_TRUE(advice.ok());
  ASSERT_TRUE(advice->placement.has_value());
  EXPECT_EQ(advice->placement->node.value(), "n0");
  EXPECT_TRUE(advice->placement->allocation.resources.empty());
  EXPECT_EQ(cluster.node(0).available, cluster.node(0).total);
  // An infeasible request is explained, not parked.
  absl::StatusOr<ScheduleResult> never = scheduler.Advise(Request("GPU=4", 2));
  ASSERT_TRUE(never.ok());
  EXPECT_EQ(never->status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(scheduler.parked_count(), 0u);
}

TEST(TaskSchedulerAdviseTest, ExcludedNodesTakeNothingAndAreCountedApart) {
  ClusterView cluster;
  AddCpuNodes(cluster, 2, "CPU=4");
  MustAdd(cluster, testing_util::Spec("big", "CPU=64"));
  TaskScheduler scheduler(&cluster);
  SchedulingRequest r = Request("CPU=2");
  r.excluded_nodes = {NodeId("n0"), NodeId("n1")};
  EXPECT_EQ(Place(scheduler, r), "big");
  // Only an excluded node could ever hold it: pending (it may take it later), not infeasible.
  SchedulingRequest wide = Request("CPU=32", 2);
  wide.excluded_nodes = {NodeId("big")};
  absl::StatusOr<ScheduleResult> advice = scheduler.Advise(wide);
  ASSERT_TRUE(advice.ok());
  EXPECT_EQ(advice->status, ScheduleStatus::kPending);
  EXPECT_THAT(advice->explanation, ::testing::StartsWith("besides the 1 node tried: "));
  // A local node that is excluded is not preferred.
  SchedulingRequest local = Request("CPU=1", 3);
  local.local_node = NodeId("n0");
  local.excluded_nodes = {NodeId("n0")};
  EXPECT_NE(Place(scheduler, local), "n0");
}

}  // namespace
}  // namespace tessera

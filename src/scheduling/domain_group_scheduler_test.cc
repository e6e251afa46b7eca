#include "scheduling/domain_group_scheduler.h"

#include <map>
#include <random>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "hardware/node_label_keys.h"
#include "scheduling/scheduling_test_util.h"

namespace tessera {
namespace {

using testing_util::MustAdd;
using testing_util::Res;
using testing_util::Spec;

struct SliceOptions {
  std::string pod_type = "v6e-16";
  std::string topology = "4x4";
  int hosts = 4;
  std::string resources = "CPU=8,TPU=4";
  int skip_worker = -1;
};

void AddSlice(ClusterView& cluster, const std::string& name, const SliceOptions& o = {}) {
  for (int w = 0; w < o.hosts; ++w) {
    if (w == o.skip_worker) continue;
    LabelSet labels{{std::string(labels::kTpuSliceName), name},
                    {std::string(labels::kTpuWorkerId), std::to_string(w)},
                    {std::string(labels::kTpuTopology), o.topology},
                    {std::string(labels::kTpuPodType), o.pod_type}};
    MustAdd(cluster, Spec(name + "-w" + std::to_string(w), o.resources, labels));
  }
}

DomainAlternative Slices(std::string accelerator, std::string topology, int count = 1) {
  DomainAlternative alt;
  alt.accelerator = std::move(accelerator);
  alt.topology = std::move(topology);
  alt.count = count;
  return alt;
}

DomainGroupRequest Request(std::string name, std::vector<DomainAlternative> alternatives) {
  return DomainGroupRequest{std::move(name), std::move(alternatives)};
}

Quantity FreeTpu(const ClusterView& cluster, const std::string& node) {
  return cluster.node(*cluster.Find(NodeId(node))).available.Get("TPU");
}

TEST(DomainGroupSchedulerTest, ReservesEveryHostOfAnIntactIdleSlice) {
  ClusterView cluster;
  AddSlice(cluster, "a");
  AddSlice(cluster, "b");
  DomainGroupScheduler scheduler(&cluster);
  auto result = scheduler.ReserveSlices(Request("g", {Slices("v6e", "4x4")}));
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->status, ScheduleStatus::kPlaced);
  ASSERT_EQ(result->domains, std::vector<std::string>{"a"});
  ASSERT_EQ(result->bundles.size(), 4u);
  for (int w = 0; w < 4; ++w) {
    EXPECT_EQ(result->bundles[w].node, NodeId("a-w" + std::to_string(w)));
    EXPECT_EQ(result->bundles[w].worker, w);
    EXPECT_EQ(result->bundles[w].allocation.resources, Res("TPU=4"));
    EXPECT_EQ(FreeTpu(cluster, "a-w" + std::to_string(w)), Quantity::FromInt(0));
    EXPECT_EQ(FreeTpu(cluster, "b-w" + std::to_string(w)), Quantity::FromInt(4));
  }
}

TEST(DomainGroupSchedulerTest, SliceWithMissingWorkerIsNotIntact) {
  ClusterView cluster;
  AddSlice(cluster, "a", SliceOptions{.skip_worker = 2});
  AddSlice(cluster, "b");
  DomainGroupScheduler scheduler(&cluster);
  auto one = scheduler.ReserveSlices(Request("g1", {Slices("TPU-V6E", "4x4")}));
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->status, ScheduleStatus::kPlaced);
  EXPECT_EQ(one->domains, std::vector<std::string>{"b"});
  auto two = scheduler.ReserveSlices(Request("g2", {Slices("v6e", "4x4")}));
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->status, ScheduleStatus::kPending);  // b frees up one day
  EXPECT_EQ(two->explanation,
            "2 v6e 4x4 slices exist; 1 is busy (held by g1); 1 is not intact (a: missing worker "
            "2)");
  EXPECT_EQ(FreeTpu(cluster, "a-w0"), Quantity::FromInt(4));
}

TEST(DomainGroupSchedulerTest, SliceWithDeadHostIsNotIntact) {
  ClusterView cluster;
  AddSlice(cluster, "a");
  ASSERT_TRUE(cluster.FailNode(NodeId("a-w1")).ok());
  DomainGroupScheduler scheduler(&cluster);
  auto result = scheduler.ReserveSlices(Request("g", {Slices("v6e", "4x4")}));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(result->explanation, "1 v6e 4x4 slice exists; 1 is not intact (a: worker 1 is dead)");
  EXPECT_EQ(FreeTpu(cluster, "a-w0"), Quantity::FromInt(4));
}

TEST(DomainGroupSchedulerTest, BusySlicesArePendingAndNameTheirHolders) {
  ClusterView cluster;
  AddSlice(cluster, "a");
  AddSlice(cluster, "b");
  AddSlice(cluster, "c");
  DomainGroupScheduler scheduler(&cluster);
  ASSERT_EQ(scheduler.ReserveSlices(Request("g-7", {Slices("v6e", "4x4")}))->status,
            ScheduleStatus::kPlaced);
  ASSERT_EQ(scheduler.ReserveSlices(Request("g-9", {Slices("v6e", "4x4")}))->status,
            ScheduleStatus::kPlaced);
  // One chip of the last slice is taken by work the scheduler does not own: not idle.
  ASSERT_TRUE(cluster.Allocate(*cluster.Find(NodeId("c-w3")), Res("TPU=1")).ok());
  auto result = scheduler.ReserveSlices(Request("g-12", {Slices("v6e", "4x4")}));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->status, ScheduleStatus::kPending);
  EXPECT_EQ(result->explanation,
            "3 v6e 4x4 slices exist; all are busy (held by g-7, g-9, other work)");
}

TEST(DomainGroupSchedulerTest, NoSliceOfTheShapeIsInfeasibleAndListsTheSlicesThatExist) {
  ClusterView cluster;
  SliceOptions v5e{.pod_type = "v5litepod-8", .topology = "2x4", .hosts = 1, .resources = "TPU=8"};
  AddSlice(cluster, "x", v5e);
  AddSlice(cluster, "y", v5e);
  DomainGroupScheduler scheduler(&cluster);
  auto result = scheduler.ReserveSlices(Request("g", {Slices("v6e", "4x4")}));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(result->explanation, "no v6e 4x4 slice exists (slices: 2 v5e 2x4)");
}

TEST(DomainGroupSchedulerTest, KSlicesAreDistinctAndNeverShareAHost) {
  ClusterView cluster;
  for (std::string name : {"a", "b", "c", "d"}) AddSlice(cluster, name);
  DomainGroupScheduler scheduler(&cluster);
  auto result = scheduler.ReserveSlices(Request("multi", {Slices("v6e", "4x4", 3)}));
  ASSERT_TRUE(result.ok());
  ASSERT_EQ(result->status, ScheduleStatus::kPlaced);
  std::set<std::string> domains(result->domains.begin(), result->domains.end());
  EXPECT_EQ(domains.size(), 3u);
  std::set<std::string> hosts;
  for (const DomainBundle& b : result->bundles) hosts.insert(b.node.value());
  EXPECT_EQ(hosts.size(), 12u);
  EXPECT_EQ(result->bundles.size(), 12u);
}

TEST(DomainGroupSchedulerTest, TwoRequestsNeverShareAHost) {
  ClusterView cluster;
  for (std::string name : {"a", "b", "c", "d"}) AddSlice(cluster, name);
  DomainGroupScheduler scheduler(&cluster);
  auto first = scheduler.ReserveSlices(Request("g1", {Slices("v6e", "4x4", 2)}));
  auto second = scheduler.ReserveSlices(Request("g2", {Slices("v6e", "4x4", 2)}));
  ASSERT_EQ(first->status, ScheduleStatus::kPlaced);
  ASSERT_EQ(second->status, ScheduleStatus::kPlaced);
  std::set<std::string> hosts;
  for (const auto* r : {&*first, &*second}) {
    for (const DomainBundle& b : r->bundles) EXPECT_TRUE(hosts.insert(b.node.value()).second);
  }
  EXPECT_EQ(scheduler.ReserveSlices(Request("g3", {Slices("v6e", "4x4")}))->status,
            ScheduleStatus::kPending);
}

TEST(DomainGroupSchedulerTest, FallbackOrderIsHonoredAndReported) {
  ClusterView cluster;
  AddSlice(cluster, "a");
  AddSlice(
      cluster, "v",
      SliceOptions{.pod_type = "v5litepod-8", .topology = "2x4", .hosts = 1, .resources = "TPU=8"});
  DomainGroupScheduler scheduler(&cluster);
  const std::vector<DomainAlternative> alternatives = {
      Slices("v6e", "8x8"), Slices("v6e", "4x4", 2), Slices("v5e", "2x4"), Slices("v6e", "4x4")};
  auto result = scheduler.ReserveSlices(Request("g", alternatives));
  ASSERT_TRUE(result.ok());
  ASSERT_EQ(result->status, ScheduleStatus::kPlaced);
  EXPECT_EQ(result->alternative, 2u);  // the v5e, before the later single v6e
  EXPECT_EQ(result->domains, std::vector<std::string>{"v"});
  EXPECT_EQ(FreeTpu(cluster, "a-w0"), Quantity::FromInt(4));  // the 2-slice try left nothing

  auto later = scheduler.ReserveSlices(Request("h", {Slices("v6e", "8x8"), Slices("v5e", "2x4")}));
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->status, ScheduleStatus::kPending);
  EXPECT_EQ(later->explanation,
            "alternative 1: no v6e 8x8 slice exists (slices: 1 v5e 2x4, 1 v6e 4x4); alternative "
            "2: 1 v5e 2x4 slice exists; all are busy (held by g)");
}

TEST(DomainGroupSchedulerTest, AllOrNothingWhenTooFewIdleSlices) {
  ClusterView cluster;
  AddSlice(cluster, "a");
  AddSlice(cluster, "b");
  ASSERT_TRUE(cluster.Allocate(*cluster.Find(NodeId("b-w0")), Res("TPU=1")).ok());
  DomainGroupScheduler scheduler(&cluster);
  auto result = scheduler.ReserveSlices(Request("g", {Slices("v6e", "4x4", 2)}));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->status, ScheduleStatus::kPending);
  EXPECT_EQ(result->explanation,
            "2 v6e 4x4 slices exist; 1 is busy (held by other work); 1 idle, 2 needed");
  for (int w = 0; w < 4; ++w)
    EXPECT_EQ(FreeTpu(cluster, "a-w" + std::to_string(w)), Quantity::FromInt(4));
  EXPECT_FALSE(scheduler.FindByName("g").has_value());
}

TEST(DomainGroupSchedulerTest, TooFewSlicesIsInfeasible) {
  ClusterView cluster;
  AddSlice(cluster, "a");
  DomainGroupScheduler scheduler(&cluster);
  auto result = scheduler.ReserveSlices(Request("g", {Slices("v6e", "4x4", 2)}));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(result->explanation, "1 v6e 4x4 slice exists; 2 needed");
}

TEST(DomainGroupSchedulerTest, PrefersSlicesOnBusierHosts) {
  ClusterView cluster;
  AddSlice(cluster, "a");
  AddSlice(cluster, "b");
  // b's hosts already run CPU work: taking b keeps a whole on empty hosts.
  ASSERT_TRUE(cluster.Allocate(*cluster.Find(NodeId("b-w1")), Res("CPU=4")).ok());
  DomainGroupScheduler scheduler(&cluster);
  auto result = scheduler.ReserveSlices(Request("g", {Slices("v6e", "4x4")}));
  ASSERT_EQ(result->status, ScheduleStatus::kPlaced);
  EXPECT_EQ(result->domains, std::vector<std::string>{"b"});
}

TEST(DomainGroupSchedulerTest, PerChipBundlesAndPerHostExtra) {
  ClusterView cluster;
  AddSlice(cluster, "a");
  DomainGroupScheduler scheduler(&cluster);
  DomainAlternative alt = Slices("v6e", "4x4");
  alt.granularity = BundleGranularity::kPerChip;
  alt.per_host = Res("CPU=2");
  auto result = scheduler.ReserveSlices(Request("g", {alt}));
  ASSERT_EQ(result->status, ScheduleStatus::kPlaced);
  ASSERT_EQ(result->bundles.size(), 16u);
  EXPECT_EQ(result->bundles[0].allocation.resources, Res("CPU=2,TPU=1"));
  EXPECT_EQ(result->bundles[1].allocation.resources, Res("TPU=1"));
  EXPECT_EQ(cluster.node(*cluster.Find(NodeId("a-w3"))).available, Res("CPU=6,TPU=0"));
}

TEST(DomainGroupSchedulerTest, ReleaseReturnsExactlyWhatWasTaken) {
  ClusterView cluster;
  AddSlice(cluster, "a");
  AddSlice(cluster, "b");
  DomainGroupScheduler scheduler(&cluster);
  DomainAlternative alt = Slices("v6e", "4x4", 2);
  alt.per_host = Res("CPU=1");
  auto result = scheduler.ReserveSlices(Request("g", {alt}));
  ASSERT_EQ(result->status, ScheduleStatus::kPlaced);
  auto released = scheduler.Release(*result->id);
  ASSERT_TRUE(released.ok());
  ASSERT_EQ(released->size(), result->bundles.size());
  for (size_t i = 0; i < released->size(); ++i) {
    EXPECT_EQ((*released)[i], result->bundles[i].allocation);
  }
  for (NodeIndex n = 0; n < cluster.slot_count(); ++n) {
    EXPECT_EQ(cluster.node(n).available, cluster.node(n).total);
  }
  EXPECT_EQ(scheduler.Release(*result->id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(scheduler.ReserveSlices(Request("g", {alt}))->status, ScheduleStatus::kPlaced);
}

TEST(DomainGroupSchedulerTest, ReleaseAfterNodeFailureSkipsTheLostBundles) {
  ClusterView cluster;
  AddSlice(cluster, "a");
  DomainGroupScheduler scheduler(&cluster);
  auto result = scheduler.ReserveSlices(Request("g", {Slices("v6e", "4x4")}));
  ASSERT_EQ(result->status, ScheduleStatus::kPlaced);
  ASSERT_TRUE(cluster.FailNode(NodeId("a-w2")).ok());
  auto released = scheduler.Release(*result->id);
  ASSERT_TRUE(released.ok());
  EXPECT_EQ(released->size(), 3u);
}

NodeSpec NvLinkHost(const std::string& id, const std::string& domain) {
  return Spec(id, "CPU=16,GPU=8",
              LabelSet{{std::string(labels::kFabricDomain), domain},
                       {std::string(labels::kFabricKind), "nvlink"}},
              testing_util::FullyLinked(8));
}

TEST(DomainGroupSchedulerTest, NvLinkHostsComeFromOneDomainBestFit) {
  ClusterView cluster;
  for (int i = 0; i < 3; ++i) MustAdd(cluster, NvLinkHost("big-" + std::to_string(i), "big"));
  for (int i = 0; i < 2; ++i) MustAdd(cluster, NvLinkHost("small-" + std::to_string(i), "small"));
  MustAdd(cluster, Spec("plain", "CPU=16,GPU=8", {}, testing_util::FullyLinked(8)));
  DomainGroupScheduler scheduler(&cluster);
  DomainAlternative two;
  two.count = 2;
  two.per_host = Res("GPU=8");
  auto first = scheduler.ReserveSlices(Request("n1", {two}));
  ASSERT_EQ(first->status, ScheduleStatus::kPlaced);
  EXPECT_EQ(first->domains, std::vector<std::string>{"small"});
  ASSERT_EQ(first->bundles.size(), 2u);
  EXPECT_EQ(first->bundles[0].node, NodeId("small-0"));
  EXPECT_EQ(first->bundles[1].node, NodeId("small-1"));

  DomainAlternative four = two;
  four.count = 4;
  auto never = scheduler.ReserveSlices(Request("n2", {four}));
  EXPECT_EQ(never->status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(never->explanation, "no NVLink domain has 4 hosts that could fit GPU=8 (largest: 3)");

  DomainAlternative three = two;
  three.count = 3;
  ASSERT_EQ(scheduler.ReserveSlices(Request("n3", {three}))->status, ScheduleStatus::kPlaced);
  auto busy = scheduler.ReserveSlices(Request("n4", {two}));
  EXPECT_EQ(busy->status, ScheduleStatus::kPending);
  EXPECT_EQ(busy->explanation,
            "2 NVLink domains could hold 2 hosts of GPU=8; none has 2 free now (held by n1, n3)");
}

TEST(DomainGroupSchedulerTest, RejectsMalformedRequests) {
  ClusterView cluster;
  AddSlice(cluster, "a");
  DomainGroupScheduler scheduler(&cluster);
  EXPECT_EQ(scheduler.ReserveSlices(Request("g", {})).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler.ReserveSlices(Request("g", {Slices("v6e", "4x4", 0)})).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto bad = scheduler.ReserveSlices(Request("g", {Slices("v6e", "3x5")}));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("alternative 1"), std::string::npos);
  ASSERT_EQ(scheduler.ReserveSlices(Request("g", {Slices("v6e", "4x4")}))->status,
            ScheduleStatus::kPlaced);
  EXPECT_EQ(scheduler.ReserveSlices(Request("g", {Slices("v6e", "4x4")})).status().code(),
            absl::StatusCode::kAlreadyExists);
}

// Random reservations, releases, foreign allocations and node failures over slices of two
// shapes: groups never share a host, a reservation not placed changes nothing, a placed one holds
// whole distinct slices, and a release returns exactly the bundles still held.
TEST(DomainGroupSchedulerPropertyTest, RandomSequencesKeepTheInvariants) {
  for (uint32_t seed = 1; seed <= 30; ++seed) {
    std::mt19937 rng(seed);
    ClusterView cluster;
    for (int s = 0; s < 6; ++s) {
      AddSlice(cluster, "a" + std::to_string(s), SliceOptions{.skip_worker = s == 5 ? 3 : -1});
    }
    SliceOptions v5e{
        .pod_type = "v5litepod-8", .topology = "2x4", .hosts = 1, .resources = "TPU=8"};
    for (int s = 0; s < 3; ++s) AddSlice(cluster, "b" + std::to_string(s), v5e);
    DomainGroupScheduler scheduler(&cluster);
    std::map<int64_t, std::vector<DomainBundle>> live;  // group id -> bundles
    for (int step = 0; step < 60; ++step) {
      const int op = static_cast<int>(rng() % 10);
      if (op < 5) {
        std::vector<ResourceSet> before;
        for (NodeIndex n = 0; n < cluster.slot_count(); ++n)
          before.push_back(cluster.node(n).available);
        DomainAlternative first = Slices("v6e", "4x4", 1 + static_cast<int>(rng() % 3));
        if (rng() % 2 == 0) first.granularity = BundleGranularity::kPerChip;
        auto result = scheduler.ReserveSlices(
            Request("g" + std::to_string(step),
                    {first, Slices("v5e", "2x4", 1 + static_cast<int>(rng() % 2))}));
        ASSERT_TRUE(result.ok()) << result.status();
        if (result->status != ScheduleStatus::kPlaced) {
          EXPECT_FALSE(result->explanation.empty());
          for (NodeIndex n = 0; n < cluster.slot_count(); ++n) {
            ASSERT_EQ(cluster.node(n).available, before[n]) << "seed " << seed;
          }
          continue;
        }
        std::set<std::string> domains(result->domains.begin(), result->domains.end());
        ASSERT_EQ(domains.size(), result->domains.size());
        std::map<std::string, std::set<int>> workers;
        for (const DomainBundle& b : result->bundles) {
          ASSERT_TRUE(domains.contains(b.domain));
          workers[b.domain].insert(b.worker);
        }
        for (const auto& [d, w] : workers) {
          ASSERT_EQ(static_cast<int>(w.size()), d[0] == 'a' ? 4 : 1) << "seed " << seed;
        }
        live[result->id->value()] = result->bundles;
      } else if (op < 8 && !live.empty()) {
        auto it = live.begin();
        std::advance(it, static_cast<long>(rng() % live.size()));
        std::vector<Allocation> expected;
        for (const DomainBundle& b : it->second) {
          if (cluster.FindAllocation(b.allocation.id) != nullptr) expected.push_back(b.allocation);
        }
        auto released = scheduler.Release(DomainGroupId(it->first));
        ASSERT_TRUE(released.ok());
        EXPECT_EQ(*released, expected);
        live.erase(it);
      } else if (op == 8) {
        const NodeIndex n = static_cast<NodeIndex>(rng() % cluster.slot_count());
        if (cluster.node(n).state == NodeState::kAlive) {
          (void)cluster.Allocate(n, Res("TPU=1"));
        }
      } else {
        const NodeIndex n = static_cast<NodeIndex>(rng() % cluster.slot_count());
        (void)cluster.FailNode(cluster.node(n).id);
      }
      // No host is held by two groups.
      std::map<std::string, int64_t> holder;
      for (const auto& [id, bundles] : live) {
        for (const DomainBundle& b : bundles) {
          if (cluster.FindAllocation(b.allocation.id) == nullptr) continue;
          auto [it, inserted] = holder.emplace(b.node.value(), id);
          ASSERT_TRUE(inserted || it->second == id)
              << "seed " << seed << " host " << b.node.value();
        }
      }
    }
  }
}

}  // namespace
}  // namespace tessera

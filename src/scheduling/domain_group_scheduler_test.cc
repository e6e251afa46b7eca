#include "scheduling/domain_group_scheduler.h"

#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "hardware/node_label_keys.h"
#include "scheduling/scheduling_test_util.h"
#include "vocabulary/slice_shape.h"

namespace tessera {
namespace {

using testing_util::AddSlice;
using testing_util::MustAdd;
using testing_util::Res;
using testing_util::SliceOptions;
using testing_util::Spec;
using testing_util::ViewDigest;

// `count` slices of a valid shape, as the edges parse it ("v6e", "4x4").
DomainAlternative Slices(std::string_view accelerator, std::string_view topology, int count = 1) {
  DomainAlternative alt;
  alt.shape = testing_util::Shape(accelerator, topology);
  alt.count = count;
  return alt;
}

// A shape filled in by hand: only its generation and topology, its derived fields unset (and the
// topology not necessarily a slice of the generation).
DomainAlternative HandMade(TpuGeneration generation, std::vector<int> dims) {
  DomainAlternative alt;
  alt.shape = SliceShape{.generation = generation, .topology = TpuTopology{std::move(dims)}};
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
            "2 v6e 4x4 slices exist; 1 is busy (held by slice group g1); 1 is not intact (a: "
            "missing worker 2)");
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
            "3 v6e 4x4 slices exist; all are busy (held by slice group g-7, slice group g-9, "
            "other work)");
}

TEST(DomainGroupSchedulerTest, PerHostDemandNoHostCanEverFitIsInfeasible) {
  ClusterView cluster;
  AddSlice(cluster, "a");  // hosts of CPU=8,TPU=4, no GPU
  AddSlice(cluster, "b");
  DomainGroupScheduler scheduler(&cluster);
  DomainAlternative cpus = Slices("v6e", "4x4");
  cpus.per_host = Res("CPU=64");
  auto too_many_cpus = scheduler.ReserveSlices(Request("cpus", {cpus}));
  ASSERT_TRUE(too_many_cpus.ok());
  EXPECT_EQ(too_many_cpus->status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(too_many_cpus->explanation,
            "2 v6e 4x4 slices exist; none can hold CPU=64 per host beside its TPU (its hosts "
            "have CPU=8)");
  DomainAlternative gpu = Slices("v6e", "4x4");
  gpu.per_host = Res("GPU=1");
  auto no_gpu = scheduler.ReserveSlices(Request("gpu", {gpu}));
  ASSERT_TRUE(no_gpu.ok());
  EXPECT_EQ(no_gpu->status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(no_gpu->explanation,
            "2 v6e 4x4 slices exist; none can hold GPU=1 per host beside its TPU (its hosts have "
            "no GPU)");
  EXPECT_EQ(FreeTpu(cluster, "a-w0"), Quantity::FromInt(4));

  // One slice busy, the other on bigger hosts: PENDING on the busy one only.
  ClusterView mixed;
  AddSlice(mixed, "small");
  AddSlice(mixed, "big", SliceOptions{.resources = "CPU=96,TPU=4"});
  DomainGroupScheduler slices(&mixed);
  ASSERT_EQ(slices.ReserveSlices(Request("first", {cpus}))->status, ScheduleStatus::kPlaced);
  auto second = slices.ReserveSlices(Request("second", {cpus}));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->status, ScheduleStatus::kPending);
  EXPECT_EQ(second->explanation,
            "2 v6e 4x4 slices exist; 1 is busy (held by slice group first); 1 cannot hold CPU=64 "
            "per host beside its TPU (its hosts have CPU=8)");
}

TEST(DomainGroupSchedulerTest, AnAlternativePinnedToASliceTakesThatSliceOnly) {
  ClusterView cluster;
  AddSlice(cluster, "a");
  AddSlice(cluster, "b");
  DomainGroupScheduler scheduler(&cluster);
  DomainAlternative pinned = Slices("v6e", "4x4");
  pinned.domain = "b";
  auto first = scheduler.ReserveSlices(Request("first", {pinned}));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->status, ScheduleStatus::kPlaced);
  EXPECT_EQ(first->domains, std::vector<std::string>{"b"});
  // b is held; a is idle but not the one asked for.
  auto second = scheduler.ReserveSlices(Request("second", {pinned}));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->status, ScheduleStatus::kPending);
  EXPECT_EQ(second->explanation,
            "1 v6e 4x4 slice named b exists; all are busy (held by slice group first)");
  pinned.domain = "zz";
  auto missing = scheduler.ReserveSlices(Request("missing", {pinned}));
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(missing->explanation, "no v6e 4x4 slice named zz exists (slices: 2 v6e 4x4)");
  EXPECT_EQ(FreeTpu(cluster, "a-w0"), Quantity::FromInt(4));
}

TEST(DomainGroupSchedulerTest, ASelectorRestrictsTheSlicesToThoseWhoseEveryHostMatches) {
  ClusterView cluster;
  for (const auto& [slice, zone] : {std::pair{"east", "e"}, std::pair{"west", "w"}}) {
    for (int w = 0; w < 4; ++w) {
      LabelSet labels{{std::string(labels::kTpuSliceName), slice},
                      {std::string(labels::kTpuWorkerId), std::to_string(w)},
                      {std::string(labels::kTpuTopology), "4x4"},
                      {std::string(labels::kTpuPodType), "v6e-16"},
                      // One host of "east" sits in another zone: the slice does not qualify.
                      {"zone", std::string(slice) == "east" && w == 3 ? "w" : zone}};
      MustAdd(cluster, Spec(absl::StrCat(slice, "-w", w), "CPU=8,TPU=4", labels));
    }
  }
  DomainGroupScheduler scheduler(&cluster);
  DomainAlternative in_w = Slices("v6e", "4x4");
  in_w.selector = *ParseLabelSelector("zone=w");
  auto r = scheduler.ReserveSlices(Request("w", {in_w}));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->status, ScheduleStatus::kPlaced);
  EXPECT_EQ(r->domains, std::vector<std::string>{"west"});
  DomainAlternative in_e = Slices("v6e", "4x4");
  in_e.selector = *ParseLabelSelector("zone=e");
  auto e = scheduler.ReserveSlices(Request("e", {in_e}));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(e->explanation,
            "no v6e 4x4 slice with every host matching zone=e exists (slices: 2 v6e 4x4)");
}

TEST(DomainGroupSchedulerTest, NvLinkHostsCanBePinnedToADomainAndFilteredBySelector) {
  ClusterView cluster;
  for (const auto& [domain, n] : {std::pair{"nv-a", 3}, std::pair{"nv-b", 2}}) {
    for (int i = 0; i < n; ++i) {
      MustAdd(cluster, Spec(absl::StrCat(domain, "-", i), "CPU=8,GPU=4",
                            {{std::string(labels::kFabricDomain), domain},
                             {std::string(labels::kFabricKind), "nvlink"},
                             {"zone", i == 0 ? "x" : "y"}},
                            testing_util::FullyLinked(4)));
    }
  }
  DomainGroupScheduler scheduler(&cluster);
  DomainAlternative alt;
  alt.count = 2;
  alt.per_host = Res("GPU=4");
  alt.domain = "nv-a";  // best fit would take nv-b
  auto pinned = scheduler.ReserveSlices(Request("pinned", {alt}));
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  ASSERT_EQ(pinned->status, ScheduleStatus::kPlaced);
  EXPECT_EQ(pinned->domains, std::vector<std::string>{"nv-a"});
  alt.domain = "";
  alt.selector = *ParseLabelSelector("zone=x");  // one host per domain: never 2
  auto filtered = scheduler.ReserveSlices(Request("filtered", {alt}));
  ASSERT_TRUE(filtered.ok());
  EXPECT_EQ(filtered->status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(filtered->explanation,
            "no NVLink domain with hosts matching zone=x has 2 hosts that could fit GPU=4 "
            "(largest: 1)");
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
            "2: 1 v5e 2x4 slice exists; all are busy (held by slice group g)");
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
            "2 NVLink domains could hold 2 hosts of GPU=8; none has 2 free now (held by slice "
            "group n1, slice group n3)");
}

TEST(DomainGroupSchedulerTest, RejectsMalformedRequests) {
  ClusterView cluster;
  AddSlice(cluster, "a");
  DomainGroupScheduler scheduler(&cluster);
  EXPECT_EQ(scheduler.ReserveSlices(Request("g", {})).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler.ReserveSlices(Request("g", {Slices("v6e", "4x4", 0)})).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto bad = scheduler.ReserveSlices(Request("g", {HandMade(TpuGeneration::kV6e, {3, 5})}));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(
      bad.status().message(),
      "domain group g alternative 1: topology \"3x5\" is not a valid v6e slice; valid: "))
      << bad.status();
  ASSERT_EQ(scheduler.ReserveSlices(Request("g", {Slices("v6e", "4x4")}))->status,
            ScheduleStatus::kPlaced);
  EXPECT_EQ(scheduler.ReserveSlices(Request("g", {Slices("v6e", "4x4")})).status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST(DomainGroupSchedulerTest, AShapeFilledInByHandIsBuiltAgainFromItsGenerationAndTopology) {
  ClusterView cluster;
  AddSlice(cluster, "a");
  DomainGroupScheduler scheduler(&cluster);
  // Its chips, hosts and the rest unset: the scheduler derives them as MakeSliceShape does.
  auto result = scheduler.ReserveSlices(Request("g", {HandMade(TpuGeneration::kV6e, {4, 4})}));
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->status, ScheduleStatus::kPlaced);
  EXPECT_EQ(result->domains, std::vector<std::string>{"a"});
  EXPECT_EQ(result->bundles.size(), 4u);
}

// A host's slice labels are read into types once, when it registers: spellings of one shape are
// one shape, and a host whose pod type and topology disagree or do not parse is no slice's host.
TEST(DomainGroupSchedulerTest, SliceLabelsThatDisagreeOrDoNotParseMakeNoSlice) {
  ClusterView cluster;
  AddSlice(cluster, "a");
  AddSlice(cluster, "upper", SliceOptions{.pod_type = "V6E-16", .topology = "4X4"});
  AddSlice(cluster, "disagree", SliceOptions{.pod_type = "v6e-32"});  // 32 chips, not 16
  AddSlice(cluster, "garbled", SliceOptions{.topology = "4x"});
  for (int w = 0; w < 4; ++w) {
    MustAdd(cluster, Spec(absl::StrCat("unnumbered-w", w), "CPU=8,TPU=4",
                          {{std::string(labels::kTpuSliceName), "unnumbered"},
                           {std::string(labels::kTpuWorkerId), absl::StrCat("w", w)},
                           {std::string(labels::kTpuTopology), "4x4"},
                           {std::string(labels::kTpuPodType), "v6e-16"}}));
  }
  DomainGroupScheduler scheduler(&cluster);
  auto three = scheduler.ReserveSlices(Request("three", {Slices("v6e", "4x4", 3)}));
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(three->status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(three->explanation, "2 v6e 4x4 slices exist; 3 needed");
  auto two = scheduler.ReserveSlices(Request("two", {Slices("v6e", "4x4", 2)}));
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_EQ(two->status, ScheduleStatus::kPlaced);
  EXPECT_EQ(two->domains, (std::vector<std::string>{"a", "upper"}));
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

// --- Restore: a head restarted from its state store takes its slice groups back ---

// What a head stores of a group's bundles: node, domain, worker, resources and devices (no
// allocation id, which belongs to the old view).
std::vector<DomainBundle> Saved(const std::vector<DomainBundle>& bundles) {
  std::vector<DomainBundle> saved = bundles;
  for (DomainBundle& b : saved) {
    b.allocation.id = AllocationId();
    b.allocation.node = NodeId();
  }
  return saved;
}

// The bundles without the views' allocation ids.
std::vector<std::string> Wheres(const std::vector<DomainBundle>& bundles) {
  std::vector<std::string> out;
  for (const DomainBundle& b : bundles) {
    std::ostringstream line;
    line << b.node << " " << b.domain << " w" << b.worker << " "
         << b.allocation.resources.ToString();
    for (const DeviceGrant& g : b.allocation.devices) {
      line << " " << g.resource << ":";
      for (int i : g.instances) line << i << ",";
    }
    out.push_back(line.str());
  }
  return out;
}

DomainAlternative PerHost(std::string per_host) {
  DomainAlternative alt = Slices("v6e", "4x4");
  alt.per_host = Res(per_host);
  return alt;
}

DomainAlternative PerChip() {
  DomainAlternative alt = Slices("v6e", "4x4");
  alt.granularity = BundleGranularity::kPerChip;
  alt.per_host = Res("CPU=1");
  return alt;
}

void AddThreeSlices(ClusterView& cluster) {
  for (std::string name : {"a", "b", "c"}) AddSlice(cluster, name);
}

TEST(DomainGroupRestoreTest, AWholeSliceComesBackOnItsFourHostsExactly) {
  ClusterView before;
  AddThreeSlices(before);
  // b's hosts are busier: the first group takes b, the second a.
  ASSERT_TRUE(before.Allocate(*before.Find(NodeId("b-w0")), Res("CPU=1")).ok());
  DomainGroupScheduler original(&before);
  const DomainGroupRequest host_request = Request("hosts", {PerHost("CPU=2")});
  const DomainGroupRequest chip_request = Request("chips", {Slices("v6e", "8x8"), PerChip()});
  auto hosts = original.ReserveSlices(host_request);
  auto chips = original.ReserveSlices(chip_request);
  ASSERT_EQ(hosts->status, ScheduleStatus::kPlaced);
  ASSERT_EQ(chips->status, ScheduleStatus::kPlaced);
  ASSERT_EQ(hosts->domains, std::vector<std::string>{"b"});
  ASSERT_EQ(chips->domains, std::vector<std::string>{"a"});
  ASSERT_EQ(chips->alternative, 1u);
  ASSERT_EQ(chips->bundles.size(), 16u);

  ClusterView after;
  AddThreeSlices(after);
  ASSERT_TRUE(after.Allocate(*after.Find(NodeId("b-w0")), Res("CPU=1")).ok());  // the lease again
  DomainGroupScheduler restored(&after);
  // Restored the other way round: nothing is chosen, so the order cannot matter.
  auto back_chips = restored.Restore(chip_request, chips->alternative, Saved(chips->bundles));
  auto back_hosts = restored.Restore(host_request, hosts->alternative, Saved(hosts->bundles));
  ASSERT_TRUE(back_chips.ok()) << back_chips.status();
  ASSERT_TRUE(back_hosts.ok()) << back_hosts.status();
  for (const auto& [back, was] :
       {std::pair{&*back_hosts, &*hosts}, std::pair{&*back_chips, &*chips}}) {
    EXPECT_EQ(back->status, DomainRestoreStatus::kRestored);
    EXPECT_EQ(DomainRestoreStatusName(back->status), "RESTORED");
    EXPECT_EQ(back->explanation, "");
    EXPECT_TRUE(back->missing.empty());
    EXPECT_EQ(back->alternative, was->alternative);
    EXPECT_EQ(back->domains, was->domains);
    EXPECT_EQ(Wheres(back->bundles), Wheres(was->bundles));
    ASSERT_TRUE(back->id.has_value());
    EXPECT_EQ(*restored.Bundles(*back->id), back->bundles);
    for (const DomainBundle& b : back->bundles) {
      EXPECT_EQ(*after.FindAllocation(b.allocation.id), b.allocation);
    }
  }
  EXPECT_EQ(restored.FindByName("hosts"), back_hosts->id);
  EXPECT_EQ(ViewDigest(after), ViewDigest(before));
  // The restored groups hold their slices like reserved ones: only c is left, then nothing.
  auto third = restored.ReserveSlices(Request("third", {Slices("v6e", "4x4")}));
  ASSERT_EQ(third->status, ScheduleStatus::kPlaced);
  EXPECT_EQ(third->domains, std::vector<std::string>{"c"});
  auto fourth = restored.ReserveSlices(Request("fourth", {Slices("v6e", "4x4")}));
  EXPECT_EQ(fourth->explanation,
            "3 v6e 4x4 slices exist; all are busy (held by slice group chips, slice group hosts, "
            "slice group third)");

  // Release gives back exactly what was restored.
  auto released = restored.Release(*back_hosts->id);
  ASSERT_TRUE(released.ok());
  ASSERT_EQ(released->size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ((*released)[i], back_hosts->bundles[i].allocation);
  EXPECT_EQ(after.node(*after.Find(NodeId("b-w0"))).available, Res("CPU=7,TPU=4"));
  EXPECT_EQ(after.node(*after.Find(NodeId("b-w1"))).available, Res("CPU=8,TPU=4"));
}

TEST(DomainGroupRestoreTest, ASliceWithMissingOrDeadHostsIsRestoredBroken) {
  ClusterView before;
  AddSlice(before, "a");
  DomainGroupScheduler original(&before);
  const DomainGroupRequest request = Request("g", {PerHost("CPU=2")});
  auto reserved = original.ReserveSlices(request);
  ASSERT_EQ(reserved->status, ScheduleStatus::kPlaced);

  // After the restart a-w2 has not registered and a-w3 registered and died.
  ClusterView after;
  AddSlice(after, "a", SliceOptions{.skip_worker = 2});
  ASSERT_TRUE(after.FailNode(NodeId("a-w3")).ok());
  DomainGroupScheduler restored(&after);
  auto r = restored.Restore(request, 0, Saved(reserved->bundles));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, DomainRestoreStatus::kBroken);
  EXPECT_EQ(r->missing, (std::vector<NodeId>{NodeId("a-w2"), NodeId("a-w3")}));
  EXPECT_EQ(r->explanation,
            "hosts a-w2 (not in the cluster), a-w3 (dead) are missing; the group is broken until "
            "they are back");
  EXPECT_EQ(r->domains, std::vector<std::string>{"a"});
  EXPECT_EQ(Wheres(r->bundles), Wheres(reserved->bundles));
  // The present hosts' bundles are held, the missing ones' are not (id 0 is never held).
  ASSERT_EQ(r->bundles.size(), 4u);
  for (int w : {0, 1}) {
    EXPECT_NE(after.FindAllocation(r->bundles[w].allocation.id), nullptr) << w;
    EXPECT_EQ(FreeTpu(after, "a-w" + std::to_string(w)), Quantity::FromInt(0));
  }
  for (int w : {2, 3}) {
    EXPECT_EQ(r->bundles[w].allocation.id, AllocationId()) << w;
    EXPECT_EQ(r->bundles[w].allocation.node, NodeId("a-w" + std::to_string(w)));
  }
  // As after a host loss: the group keeps the slice's survivors until the caller reserves it
  // anew — Release (only what is held), then ReserveSlices once the hosts are back.
  auto released = restored.Release(*r->id);
  ASSERT_TRUE(released.ok());
  EXPECT_EQ(released->size(), 2u);
  for (NodeIndex n = 0; n < after.slot_count(); ++n) {
    EXPECT_EQ(after.node(n).available, after.node(n).total) << after.node(n).id;
  }
  ASSERT_TRUE(after.RemoveNode(NodeId("a-w3")).ok());
  for (int w : {2, 3}) {
    MustAdd(after, Spec("a-w" + std::to_string(w), "CPU=8,TPU=4",
                        {{std::string(labels::kTpuSliceName), "a"},
                         {std::string(labels::kTpuWorkerId), std::to_string(w)},
                         {std::string(labels::kTpuTopology), "4x4"},
                         {std::string(labels::kTpuPodType), "v6e-16"}}));
  }
  auto again = restored.ReserveSlices(request);
  ASSERT_EQ(again->status, ScheduleStatus::kPlaced);
  EXPECT_EQ(again->domains, std::vector<std::string>{"a"});
}

TEST(DomainGroupRestoreTest, AHostThatCannotTakeItsBundleBackRefusesTheWholeGroup) {
  ClusterView before;
  AddSlice(before, "a");
  DomainGroupScheduler original(&before);
  const DomainGroupRequest request = Request("g", {PerHost("CPU=2")});
  auto reserved = original.ReserveSlices(request);
  ASSERT_EQ(reserved->status, ScheduleStatus::kPlaced);
  const std::vector<DomainBundle> saved = Saved(reserved->bundles);

  ClusterView after;
  AddSlice(after, "a");
  // A lease an agent reported holds chip 2 of the last host.
  const Quantity one = Quantity::FromInt(1);
  const Allocation lease = *after.AllocateExact(*after.Find(NodeId("a-w3")), Res("TPU=1"),
                                                {DeviceGrant{"TPU", {2}, {one}}});
  const std::string view = ViewDigest(after);
  DomainGroupScheduler restored(&after);
  auto r = restored.Restore(request, 0, saved);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, DomainRestoreStatus::kRefused);
  EXPECT_EQ(r->explanation,
            "host a-w3 (worker 3 of slice a) cannot take its bundle back: node a-w3 has "
            "CPU=8,TPU=3 free, not CPU=2,TPU=4");
  EXPECT_FALSE(r->id.has_value());
  EXPECT_TRUE(r->bundles.empty());
  EXPECT_TRUE(r->domains.empty());
  // Nothing of it is held, and it is not kept: a-w0..2 were taken and given back.
  EXPECT_EQ(ViewDigest(after), view);
  EXPECT_FALSE(restored.FindByName("g").has_value());
  // Once the lease is gone the same restore goes through.
  ASSERT_TRUE(after.Release(lease.id).ok());
  auto retry = restored.Restore(request, 0, saved);
  ASSERT_TRUE(retry.ok());
  EXPECT_EQ(retry->status, DomainRestoreStatus::kRestored);
}

TEST(DomainGroupRestoreTest, AChipHeldByALeaseRefusesAPerChipGroup) {
  ClusterView before;
  AddSlice(before, "a");
  DomainGroupScheduler original(&before);
  const DomainGroupRequest request = Request("g", {PerChip()});
  auto reserved = original.ReserveSlices(request);
  ASSERT_EQ(reserved->status, ScheduleStatus::kPlaced);
  ClusterView after;
  AddSlice(after, "a");
  const Quantity one = Quantity::FromInt(1);
  ASSERT_TRUE(after
                  .AllocateExact(*after.Find(NodeId("a-w1")), Res("TPU=1"),
                                 {DeviceGrant{"TPU", {0}, {one}}})
                  .ok());
  const std::string view = ViewDigest(after);
  DomainGroupScheduler restored(&after);
  auto r = restored.Restore(request, 0, Saved(reserved->bundles));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, DomainRestoreStatus::kRefused);
  EXPECT_EQ(r->explanation,
            "host a-w1 (worker 1 of slice a) cannot take its bundle back: node a-w1: TPU 0 has 0 "
            "free, not 1");
  EXPECT_EQ(ViewDigest(after), view);
}

TEST(DomainGroupRestoreTest, AHostThatRegisteredAsSomethingElseRefusesTheGroup) {
  ClusterView before;
  AddSlice(before, "a");
  DomainGroupScheduler original(&before);
  const DomainGroupRequest request = Request("g", {Slices("v6e", "4x4")});
  auto reserved = original.ReserveSlices(request);
  ASSERT_EQ(reserved->status, ScheduleStatus::kPlaced);
  const std::vector<DomainBundle> saved = Saved(reserved->bundles);
  auto labels = [](std::string worker) {
    return LabelSet{{std::string(labels::kTpuSliceName), "a"},
                    {std::string(labels::kTpuWorkerId), std::move(worker)},
                    {std::string(labels::kTpuTopology), "4x4"},
                    {std::string(labels::kTpuPodType), "v6e-16"}};
  };
  {
    // a-w0 and a-w1 came back with their worker ids swapped.
    ClusterView after;
    MustAdd(after, Spec("a-w0", "CPU=8,TPU=4", labels("1")));
    MustAdd(after, Spec("a-w1", "CPU=8,TPU=4", labels("0")));
    MustAdd(after, Spec("a-w2", "CPU=8,TPU=4", labels("2")));
    MustAdd(after, Spec("a-w3", "CPU=8,TPU=4", labels("3")));
    DomainGroupScheduler restored(&after);
    auto r = restored.Restore(request, 0, saved);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, DomainRestoreStatus::kRefused);
    EXPECT_EQ(r->explanation,
              "host a-w0 (worker 0 of slice a) cannot take its bundle back: it registered as a "
              "worker 1, not a worker 0");
  }
  {
    // a-w2 came back with 8 chips.
    ClusterView after;
    for (int w = 0; w < 4; ++w) {
      MustAdd(after, Spec("a-w" + std::to_string(w), w == 2 ? "CPU=8,TPU=8" : "CPU=8,TPU=4",
                          labels(std::to_string(w))));
    }
    const std::string view = ViewDigest(after);
    DomainGroupScheduler restored(&after);
    auto r = restored.Restore(request, 0, saved);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, DomainRestoreStatus::kRefused);
    EXPECT_EQ(r->explanation,
              "host a-w2 (worker 2 of slice a) cannot take its bundle back: it has TPU=8; the "
              "slice's hosts held TPU=4");
    EXPECT_EQ(ViewDigest(after), view);
  }
}

TEST(DomainGroupRestoreTest, BundlesThatAreNotAWholeReservationAreInvalid) {
  ClusterView before;
  AddSlice(before, "a");
  AddSlice(before, "b");
  DomainGroupScheduler original(&before);
  const DomainGroupRequest request = Request("g", {PerHost("CPU=2")});
  auto reserved = original.ReserveSlices(request);
  ASSERT_EQ(reserved->status, ScheduleStatus::kPlaced);
  const std::vector<DomainBundle> saved = Saved(reserved->bundles);
  ASSERT_EQ(reserved->domains, std::vector<std::string>{"a"});

  ClusterView after;
  AddSlice(after, "a");
  AddSlice(after, "b");
  DomainGroupScheduler restored(&after);
  ASSERT_EQ(restored.ReserveSlices(Request("taken", {Slices("v6e", "4x4")}))->status,
            ScheduleStatus::kPlaced);  // takes b
  const std::string view = ViewDigest(after);
  auto message = [&](const DomainGroupRequest& req, size_t alternative,
                     const std::vector<DomainBundle>& bundles) {
    auto r = restored.Restore(req, alternative, bundles);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(ViewDigest(after), view);
    return r.ok() ? std::string("ok") : std::string(r.status().message());
  };
  std::vector<DomainBundle> three(saved.begin(), saved.begin() + 3);
  EXPECT_EQ(message(request, 0, three),
            "domain group g alternative 1: slice a has workers 0, 1, 2; a v6e 4x4 slice of hosts "
            "with TPU=4 has workers 0..3");
  std::vector<DomainBundle> less_cpu = saved;
  less_cpu[1].allocation.resources = Res("CPU=1,TPU=4");
  EXPECT_EQ(message(request, 0, less_cpu),
            "domain group g alternative 1: a worker 1 holds [CPU=1,TPU=4]; the alternative "
            "reserves [CPU=2,TPU=4] per host");
  std::vector<DomainBundle> half_host = saved;
  half_host[3].allocation.resources = Res("CPU=2,TPU=2");
  EXPECT_EQ(message(request, 0, half_host),
            "domain group g alternative 1: a has hosts holding TPU=4 and TPU=2 (every host of a "
            "slice holds all its chips)");
  std::vector<DomainBundle> twice = saved;
  twice[3].node = NodeId("a-w2");
  EXPECT_EQ(message(request, 0, twice),
            "domain group g alternative 1: host a-w2 appears as two hosts (a worker 2 and a "
            "worker 3)");
  EXPECT_EQ(message(Request("g", {[] {
                              DomainAlternative two = PerHost("CPU=2");
                              two.count = 2;
                              return two;
                            }()}),
                    0, saved),
            "domain group g alternative 1: the bundles are on 1 slice; the alternative is 2");
  EXPECT_EQ(message(request, 1, saved),
            "domain group g: alternative 2 does not exist (the request has 1)");
  EXPECT_EQ(message(request, 0, {}), "domain group g alternative 1: no bundles to restore");
  EXPECT_TRUE(
      absl::StartsWith(message(Request("g", {HandMade(TpuGeneration::kV6e, {3, 5})}), 0, saved),
                       "domain group g alternative 1: "));
  EXPECT_EQ(restored.Restore(Request("taken", {PerHost("CPU=2")}), 0, saved).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(ViewDigest(after), view);
  EXPECT_FALSE(restored.FindByName("g").has_value());
}

TEST(DomainGroupRestoreTest, RestoreOrderDoesNotMatter) {
  ClusterView before;
  AddThreeSlices(before);
  DomainGroupScheduler original(&before);
  std::vector<std::pair<DomainGroupRequest, DomainGroupResult>> groups;
  for (const DomainGroupRequest& request :
       {Request("g1", {PerHost("CPU=1")}), Request("g2", {PerChip()}),
        Request("g3", {PerHost("CPU=3")})}) {
    auto r = original.ReserveSlices(request);
    ASSERT_EQ(r->status, ScheduleStatus::kPlaced);
    groups.emplace_back(request, *r);
  }
  ASSERT_TRUE(original.Release(*groups[2].second.id).ok());
  groups.pop_back();  // the released one leaves its slice free
  auto restore = [&](std::vector<int> order) {
    ClusterView after;
    AddThreeSlices(after);
    DomainGroupScheduler restored(&after);
    for (int i : order) {
      auto r = restored.Restore(groups[i].first, groups[i].second.alternative,
                                Saved(groups[i].second.bundles));
      EXPECT_TRUE(r.ok() && r->status == DomainRestoreStatus::kRestored) << i;
    }
    return ViewDigest(after);
  };
  EXPECT_EQ(restore({0, 1}), ViewDigest(before));
  EXPECT_EQ(restore({1, 0}), ViewDigest(before));
}

TEST(DomainGroupRestoreTest, NvLinkHostsComeBackOrTheGroupIsBrokenOrRefused) {
  auto build = [](ClusterView& cluster, bool with_small_1, std::string small_1_domain) {
    for (int i = 0; i < 3; ++i) MustAdd(cluster, NvLinkHost("big-" + std::to_string(i), "big"));
    MustAdd(cluster, NvLinkHost("small-0", "small"));
    if (with_small_1) MustAdd(cluster, NvLinkHost("small-1", small_1_domain));
  };
  ClusterView before;
  build(before, true, "small");
  DomainGroupScheduler original(&before);
  DomainAlternative two;
  two.count = 2;
  two.per_host = Res("GPU=8");
  const DomainGroupRequest request = Request("n", {two});
  auto reserved = original.ReserveSlices(request);
  ASSERT_EQ(reserved->status, ScheduleStatus::kPlaced);
  ASSERT_EQ(reserved->domains, std::vector<std::string>{"small"});
  const std::vector<DomainBundle> saved = Saved(reserved->bundles);
  {
    ClusterView after;
    build(after, true, "small");
    DomainGroupScheduler restored(&after);
    std::vector<DomainBundle> same_host = saved;
    same_host[1].node = same_host[0].node;
    EXPECT_EQ(restored.Restore(request, 0, same_host).status().message(),
              "domain group n alternative 1: 2 bundles on 1 host; the alternative is 2 hosts with "
              "one bundle each");
    std::vector<DomainBundle> with_worker = saved;
    with_worker[0].worker = 0;
    EXPECT_EQ(restored.Restore(request, 0, with_worker).status().message(),
              "domain group n alternative 1: bundle 0 (host small-0) has worker id 0 (NVLink "
              "hosts have none, -1)");
  }
  {
    ClusterView after;
    build(after, true, "small");
    DomainGroupScheduler restored(&after);
    auto r = restored.Restore(request, 0, saved);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, DomainRestoreStatus::kRestored);
    EXPECT_EQ(Wheres(r->bundles), Wheres(reserved->bundles));
    EXPECT_EQ(ViewDigest(after), ViewDigest(before));
  }
  {
    ClusterView after;
    build(after, false, "");
    DomainGroupScheduler restored(&after);
    auto r = restored.Restore(request, 0, saved);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, DomainRestoreStatus::kBroken);
    EXPECT_EQ(r->explanation,
              "host small-1 (not in the cluster) is missing; the group is broken until it is back");
    EXPECT_EQ(after.node(*after.Find(NodeId("small-0"))).available, Res("CPU=16,GPU=0"));
  }
  {
    ClusterView after;
    build(after, true, "big");
    const std::string view = ViewDigest(after);
    DomainGroupScheduler restored(&after);
    auto r = restored.Restore(request, 0, saved);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, DomainRestoreStatus::kRefused);
    EXPECT_EQ(r->explanation,
              "host small-1 (NVLink domain small) cannot take its bundle back: it is not in "
              "NVLink domain small (its domain: big)");
    EXPECT_EQ(ViewDigest(after), view);
  }
}

}  // namespace
}  // namespace tessera

#include "scheduling/cluster_view.h"

#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hardware/node_discovery.h"
#include "hardware/node_label_keys.h"
#include "hardware/simulated/hardware_description.h"
#include "scheduling/scheduling_test_util.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing_util::FullyLinked;
using testing_util::MustAdd;
using testing_util::Res;
using testing_util::Spec;

TEST(ClusterViewTest, AddNodeChecksIdsAndDeviceCounts) {
  ClusterView cluster;
  MustAdd(cluster, Spec("n0", "CPU=8,GPU=8", {}, FullyLinked(8)));
  EXPECT_EQ(cluster.AddNode(Spec("n0", "CPU=1")).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(cluster.AddNode(Spec("", "CPU=1")).status().message(), "node id is empty");
  EXPECT_EQ(cluster.AddNode(Spec("n1", "GPU=4", {}, FullyLinked(8))).status().message(),
            "node n1: GPU total 4 does not match its 8 devices");
  EXPECT_EQ(cluster.AddNode(Spec("n2", "GPU=1.5")).status().message(),
            "node n2: GPU total 1.5 is not a whole number of devices");
  // A unit-instance resource declared without hardware gets unlinked devices.
  const NodeIndex plain = MustAdd(cluster, Spec("n3", "GPU=2"));
  ASSERT_NE(cluster.node(plain).FindDevices("GPU"), nullptr);
  EXPECT_EQ(cluster.node(plain).FindDevices("GPU")->available.size(), 2u);
  EXPECT_EQ(cluster.alive_count(), 2);
}

TEST(ClusterViewTest, AllocateAndReleaseReturnExactlyWhatWasTaken) {
  ClusterView cluster;
  const NodeIndex n = MustAdd(cluster, Spec("n0", "CPU=8,GPU=8", {}, FullyLinked(8)));
  absl::StatusOr<Allocation> a = cluster.Allocate(n, Res("CPU=2,GPU=3"));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->devices.size(), 1u);
  EXPECT_EQ(a->devices[0].instances.size(), 3u);
  EXPECT_EQ(cluster.node(n).available, Res("CPU=6,GPU=5"));
  EXPECT_EQ(cluster.node(n).FindDevices("GPU")->FullyFree(), 5);
  absl::StatusOr<Allocation> back = cluster.Release(a->id);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, *a);
  EXPECT_EQ(cluster.node(n).available, cluster.node(n).total);
  EXPECT_EQ(cluster.node(n).FindDevices("GPU")->FullyFree(), 8);
  // Double release is refused.
  EXPECT_EQ(cluster.Release(a->id).status().code(), absl::StatusCode::kNotFound);
}

TEST(ClusterViewTest, AllocateExactTakesTheNamedInstancesOrNothing) {
  ClusterView cluster;
  const NodeIndex n = MustAdd(cluster, Spec("n0", "CPU=8,GPU=4", {}, FullyLinked(4)));
  const Quantity one = Quantity::FromInt(1);
  const Quantity half = *Quantity::Parse("0.5");
  absl::StatusOr<Allocation> a =
      cluster.AllocateExact(n, Res("CPU=1,GPU=2"), {DeviceGrant{"GPU", {1, 3}, {one, one}}});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->devices[0].instances, ElementsAre(1, 3));
  EXPECT_EQ(cluster.node(n).available, Res("CPU=7,GPU=2"));
  // A taken instance, a grant that does not add up, or a missing grant: refused, nothing changes.
  EXPECT_EQ(
      cluster.AllocateExact(n, Res("GPU=1"), {DeviceGrant{"GPU", {3}, {one}}}).status().message(),
      "node n0: GPU 3 has 0 free, not 1");
  EXPECT_EQ(
      cluster.AllocateExact(n, Res("GPU=2"), {DeviceGrant{"GPU", {0}, {one}}}).status().message(),
      "GPU: the grant adds up to 1, the demand is 2");
  EXPECT_EQ(cluster.AllocateExact(n, Res("GPU=1"), {}).status().message(),
            "GPU is demanded but no instances are granted");
  EXPECT_EQ(
      cluster.AllocateExact(n, Res("GPU=1"), {DeviceGrant{"GPU", {7}, {one}}}).status().message(),
      "GPU: instances must be ascending, distinct and below 4");
  EXPECT_EQ(
      cluster.AllocateExact(n, Res("GPU=0.5"), {DeviceGrant{"GPU", {0}, {one}}}).status().message(),
      "GPU: instance 0 is granted 1 of a 0.5 demand");
  EXPECT_EQ(cluster.node(n).available, Res("CPU=7,GPU=2"));
  // A fraction on a named instance.
  absl::StatusOr<Allocation> f =
      cluster.AllocateExact(n, Res("GPU=0.5"), {DeviceGrant{"GPU", {2}, {half}}});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(cluster.node(n).FindDevices("GPU")->available[2], half);
  // Release returns exactly what was taken.
  ASSERT_TRUE(cluster.Release(a->id).ok());
  ASSERT_TRUE(cluster.Release(f->id).ok());
  EXPECT_EQ(cluster.node(n).available, cluster.node(n).total);
}

TEST(ClusterViewTest, NeverOverAllocates) {
  ClusterView cluster;
  const NodeIndex n = MustAdd(cluster, Spec("n0", "CPU=2,GPU=2"));
  ASSERT_TRUE(cluster.Allocate(n, Res("GPU=0.5")).ok());
  // 1.5 GPU is free in sum, but only one whole device.
  EXPECT_EQ(cluster.Allocate(n, Res("GPU=2")).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(cluster.Allocate(n, Res("CPU=3")).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(cluster.node(n).available, Res("CPU=2,GPU=1.5"));
}

TEST(ClusterViewTest, FailingANodeReportsItsAllocations) {
  ClusterView cluster;
  const NodeIndex n = MustAdd(cluster, Spec("n0", "CPU=8"));
  Allocation a = *cluster.Allocate(n, Res("CPU=1"));
  Allocation b = *cluster.Allocate(n, Res("CPU=2"));
  absl::StatusOr<std::vector<Allocation>> lost = cluster.FailNode(NodeId("n0"));
  ASSERT_TRUE(lost.ok());
  EXPECT_THAT(*lost, ElementsAre(a, b));
  EXPECT_EQ(cluster.node(n).state, NodeState::kDead);
  EXPECT_EQ(cluster.Release(a.id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cluster.Allocate(n, Res("CPU=1")).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cluster.alive_count(), 0);
  EXPECT_THAT(*cluster.RemoveNode(NodeId("n0")), IsEmpty());
  EXPECT_FALSE(cluster.Find(NodeId("n0")).has_value());
}

TEST(ClusterViewTest, DrainingNodeTakesNoNewWork) {
  ClusterView cluster;
  const NodeIndex n = MustAdd(cluster, Spec("n0", "CPU=8"));
  Allocation a = *cluster.Allocate(n, Res("CPU=1"));
  ASSERT_TRUE(cluster.SetDraining(NodeId("n0"), true).ok());
  EXPECT_EQ(cluster.Allocate(n, Res("CPU=1")).status().message(), "node n0 is draining");
  EXPECT_EQ(cluster.UtilizationOrder("CPU")->size(), 0u);
  EXPECT_TRUE(cluster.Release(a.id).ok());  // existing work still finishes
  ASSERT_TRUE(cluster.SetDraining(NodeId("n0"), false).ok());
  EXPECT_TRUE(cluster.Allocate(n, Res("CPU=1")).ok());
}

TEST(ClusterViewTest, RestoreExactAlsoTakesBackWhatADrainingNodeHolds) {
  ClusterView cluster;
  const NodeIndex n = MustAdd(cluster, Spec("n0", "CPU=8,GPU=4", {}, FullyLinked(4)));
  const NodeIndex other = MustAdd(cluster, Spec("n1", "CPU=8"));
  const Quantity one = Quantity::FromInt(1);
  ASSERT_TRUE(cluster.SetDraining(NodeId("n0"), true).ok());
  // New work is refused on a draining node, an existing reservation taken back is not.
  EXPECT_EQ(
      cluster.AllocateExact(n, Res("GPU=1"), {DeviceGrant{"GPU", {2}, {one}}}).status().message(),
      "node n0 is draining");
  absl::StatusOr<Allocation> a =
      cluster.RestoreExact(n, Res("CPU=2,GPU=2"), {DeviceGrant{"GPU", {0, 2}, {one, one}}});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(cluster.node(n).available, Res("CPU=6,GPU=2"));
  EXPECT_EQ(cluster.node(n).FindDevices("GPU")->FullyFree(), 2);
  EXPECT_EQ(cluster.node(n).utilization_ppm, 500'000);
  // It stays out of the utilization order while draining.
  EXPECT_EQ(cluster.UtilizationOrder("GPU")->size(), 0u);
  EXPECT_EQ(cluster.UtilizationOrder("")->size(), 1u);
  // The same checks as AllocateExact otherwise.
  EXPECT_EQ(
      cluster.RestoreExact(n, Res("GPU=1"), {DeviceGrant{"GPU", {2}, {one}}}).status().message(),
      "node n0: GPU 2 has 0 free, not 1");
  EXPECT_EQ(cluster.RestoreExact(n, Res("CPU=7"), {}).status().code(),
            absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(cluster.SetDraining(NodeId("n0"), false).ok());
  EXPECT_EQ(cluster.UtilizationOrder("GPU")->size(), 1u);
  EXPECT_EQ(*cluster.Release(a->id), *a);
  EXPECT_EQ(cluster.node(n).available, cluster.node(n).total);
  ASSERT_TRUE(cluster.FailNode(NodeId("n1")).ok());
  EXPECT_EQ(cluster.RestoreExact(other, Res("CPU=1"), {}).status().message(), "node n1 is dead");
}

TEST(ClusterViewTest, SetTotalsKeepsAllocationsAndRefusesDevices) {
  ClusterView cluster;
  const NodeIndex n = MustAdd(cluster, Spec("n0", "CPU=8,GPU=2"));
  ASSERT_TRUE(cluster.Allocate(n, Res("CPU=4")).ok());
  EXPECT_EQ(cluster.SetTotals(NodeId("n0"), Res("CPU=2,GPU=2")).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cluster.SetTotals(NodeId("n0"), Res("CPU=8,GPU=4")).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(cluster.SetTotals(NodeId("n0"), Res("CPU=16,GPU=2,memory=1GiB")).ok());
  EXPECT_EQ(cluster.node(n).available, Res("CPU=12,GPU=2,memory=1GiB"));
}

TEST(ClusterViewTest, LabelIndexFindsCandidates) {
  ClusterView cluster;
  for (int i = 0; i < 8; ++i) {
    MustAdd(cluster,
            Spec("n" + std::to_string(i), "CPU=1", {{"zone", "z" + std::to_string(i % 4)}}));
  }
  MustAdd(cluster, Spec("special", "CPU=1", {{"zone", "z0"}, {"gpu", "a100"}}));
  EXPECT_EQ(cluster.NodesWithLabel("zone", "z1")->size(), 2u);
  LabelSelector selector = *ParseLabelSelector("zone=in(z0,z1),gpu=exists()");
  EXPECT_EQ(cluster.SelectorCandidateCount(selector), 1u);  // gpu=exists() is most selective
  EXPECT_THAT(*cluster.SelectorCandidates(selector), ElementsAre(8));
  EXPECT_EQ(cluster.SelectorCandidates(*ParseLabelSelector("zone=in(z0,z1)"))->size(), 5u);
  EXPECT_FALSE(cluster.SelectorCandidates(*ParseLabelSelector("zone=!z0")).has_value());
  ASSERT_TRUE(cluster.RemoveNode(NodeId("special")).ok());
  EXPECT_EQ(cluster.NodesWithLabel("gpu", "a100"), nullptr);
}

TEST(ClusterViewTest, FabricMembershipComesFromLabels) {
  ClusterView cluster;
  const NodeIndex n = MustAdd(cluster, Spec("t0", "CPU=1",
                                            {{std::string(labels::kTpuSliceName), "slice-a"},
                                             {std::string(labels::kTpuWorkerId), "2"},
                                             {std::string(labels::kTpuTopology), "4x4"},
                                             {std::string(labels::kTpuPodType), "v6e-16"},
                                             {std::string(labels::kFabricDomain), "slice-a"}}));
  EXPECT_EQ(cluster.node(n).fabric,
            (FabricMembership{"slice-a", 2, TpuSliceType{TpuGeneration::kV6e, TpuTopology{{4, 4}}},
                              "slice-a"}));
}

// Labels are read into types when the node registers; what does not parse, or a pod type and a
// topology that disagree, is no slice's membership (the slice scheduler leaves the host out).
TEST(ClusterViewTest, FabricMembershipOfLabelsThatDoNotParseOrDisagree) {
  ClusterView cluster;
  auto add = [&](const std::string& id, const std::string& worker, const std::string& pod_type,
                 const std::string& topology) {
    return cluster
        .node(MustAdd(cluster, Spec(id, "CPU=1",
                                    {{std::string(labels::kTpuSliceName), "s"},
                                     {std::string(labels::kTpuWorkerId), worker},
                                     {std::string(labels::kTpuTopology), topology},
                                     {std::string(labels::kTpuPodType), pod_type}})))
        .fabric;
  };
  const FabricMembership spelled = add("spelled", "0", "V5E-8", "2X4");
  EXPECT_EQ(spelled.tpu_slice, (TpuSliceType{TpuGeneration::kV5litepod, TpuTopology{{2, 4}}}));
  EXPECT_EQ(spelled.tpu_worker_id, 0);
  EXPECT_EQ(add("more-chips", "0", "v6e-32", "4x4").tpu_slice, std::nullopt);
  EXPECT_EQ(add("not-v6e", "0", "v6e-16", "2x2x4").tpu_slice, std::nullopt);
  EXPECT_EQ(add("bad-topology", "0", "v6e-16", "4x").tpu_slice, std::nullopt);
  EXPECT_EQ(add("bad-pod-type", "0", "v6e", "4x4").tpu_slice, std::nullopt);
  const FabricMembership unnumbered = add("unnumbered", "w1", "v6e-16", "4x4");
  EXPECT_EQ(unnumbered.tpu_worker_id, std::nullopt);
  EXPECT_TRUE(unnumbered.tpu_slice.has_value());
  EXPECT_EQ(add("too-large", "99999999999", "v6e-16", "4x4").tpu_worker_id, std::nullopt);
  const FabricMembership none = cluster.node(MustAdd(cluster, Spec("plain", "CPU=1"))).fabric;
  EXPECT_EQ(none, FabricMembership{});
}

TEST(ClusterViewTest, NodeSpecFromSimulatedHardware) {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/examples/hardware/h100-sxm-8.yaml");
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<SimulatedHardware> simulated =
      ParseHardwareDescription(text.str(), "h100-sxm-8.yaml", AcceleratorFamilyNames());
  ASSERT_TRUE(simulated.ok()) << simulated.status();
  absl::StatusOr<NodeHardware> hardware =
      NodeFromSimulatedHardware(*std::move(simulated), "h100", DiscoveryOptions());
  ASSERT_TRUE(hardware.ok()) << hardware.status();
  NodeSpec spec = NodeSpecFromHardware(NodeId("h0"), *hardware);
  ASSERT_TRUE(spec.devices.contains("GPU"));
  EXPECT_EQ(spec.devices["GPU"]->count, 8);
  EXPECT_FALSE(spec.devices["GPU"]->links.empty());
  ClusterView cluster;
  const NodeIndex n = MustAdd(cluster, std::move(spec));
  EXPECT_EQ(cluster.node(n).total.Get("GPU"), Quantity::FromInt(8));
}

}  // namespace
}  // namespace tessera

// Sub-slice reservations: ICI-contiguous blocks of hosts inside larger TPU slices, never
// straddling slices, numbered as their own workers, restored exactly after a head restart.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduling/domain_group_scheduler.h"
#include "scheduling/scheduling_test_util.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing_util::AddSlice;
using testing_util::Res;

// A v6e slice of 4-chip hosts: 4x4 has workers 0 1 / 2 3 (x fastest); 4x8 has 8 hosts.
const testing_util::SliceOptions k4x8{.pod_type = "v6e-32", .topology = "4x8", .hosts = 8};

DomainGroupRequest Blocks(const std::string& name, const std::string& topology, int count = 1) {
  DomainAlternative alt;
  alt.shape = testing_util::Shape("v6e", topology);
  alt.count = count;
  alt.sub_slice = true;
  return DomainGroupRequest{name, {alt}};
}

std::vector<std::string> Hosts(const std::vector<DomainBundle>& bundles) {
  std::vector<std::string> out;
  for (const DomainBundle& b : bundles) {
    out.push_back(absl::StrCat(b.domain, " ", b.node.value(), " w", b.worker));
  }
  return out;
}

TEST(SubSliceReservationTest, BlocksOfALargerSliceAreTakenWithTheirOwnWorkerIds) {
  ClusterView cluster;
  AddSlice(cluster, "a");
  DomainGroupScheduler scheduler(&cluster);
  auto x = scheduler.ReserveSlices(Blocks("x", "2x4"));
  ASSERT_TRUE(x.ok()) << x.status();
  ASSERT_EQ(x->status, ScheduleStatus::kPlaced) << x->explanation;
  EXPECT_EQ(x->domains, std::vector<std::string>{"a/0"});
  EXPECT_THAT(Hosts(x->bundles), ElementsAre("a/0 a-w0 w0", "a/0 a-w2 w1"));
  EXPECT_EQ(x->bundles[0].allocation.resources, Res("TPU=4"));
  auto y = scheduler.ReserveSlices(Blocks("y", "2x4"));
  ASSERT_EQ(y->status, ScheduleStatus::kPlaced);
  EXPECT_THAT(Hosts(y->bundles), ElementsAre("a/1 a-w1 w0", "a/1 a-w3 w1"));
  // Both blocks are held, and so is every host of the parent.
  auto z = scheduler.ReserveSlices(Blocks("z", "2x4"));
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z->status, ScheduleStatus::kPending);
  EXPECT_EQ(z->explanation,
            "2 v6e 2x4 blocks in 1 slice; all are busy (held by slice group x, slice group y)");
  DomainAlternative whole;
  whole.shape = testing_util::Shape("v6e", "4x4");
  auto all = scheduler.ReserveSlices(DomainGroupRequest{"whole", {whole}});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->status, ScheduleStatus::kPending);
  // Released, a block returns exactly its hosts.
  ASSERT_TRUE(scheduler.Release(*x->id).ok());
  auto again = scheduler.ReserveSlices(Blocks("again", "2x4"));
  ASSERT_EQ(again->status, ScheduleStatus::kPlaced);
  EXPECT_EQ(again->domains, std::vector<std::string>{"a/0"});
}

TEST(SubSliceReservationTest, SmallestParentFirstAndPartlyUsedParentsBeforeIdleOnes) {
  ClusterView cluster;
  AddSlice(cluster, "big", k4x8);
  AddSlice(cluster, "p");
  AddSlice(cluster, "q");
  DomainGroupScheduler scheduler(&cluster);
  // One-host blocks (2x2): p and q are smaller than big; p comes first by name.
  auto first = scheduler.ReserveSlices(Blocks("first", "2x2"));
  ASSERT_EQ(first->status, ScheduleStatus::kPlaced) << first->explanation;
  EXPECT_EQ(first->domains, std::vector<std::string>{"p/0"});
  // p is now partly used: the next block comes from p too, keeping q whole.
  auto second = scheduler.ReserveSlices(Blocks("second", "2x2"));
  ASSERT_EQ(second->status, ScheduleStatus::kPlaced);
  EXPECT_EQ(second->domains, std::vector<std::string>{"p/1"});
  // Two blocks in one request are distinct and never straddle slices.
  auto pair = scheduler.ReserveSlices(Blocks("pair", "4x4", 2));
  ASSERT_EQ(pair->status, ScheduleStatus::kPlaced) << pair->explanation;
  EXPECT_THAT(pair->domains, ElementsAre("q/0", "big/0"));
  // A shape no slice can be cut into.
  auto wide = scheduler.ReserveSlices(Blocks("wide", "8x8"));
  ASSERT_TRUE(wide.ok());
  EXPECT_EQ(wide->status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(wide->explanation, "no slice holds a v6e 8x8 block (slices: 2 v6e 4x4, 1 v6e 4x8)");
}

TEST(SubSliceReservationTest, ADeadHostBreaksOnlyItsBlock) {
  ClusterView cluster;
  AddSlice(cluster, "a");
  ASSERT_TRUE(cluster.FailNode(NodeId("a-w1")).ok());
  DomainGroupScheduler scheduler(&cluster);
  auto two = scheduler.ReserveSlices(Blocks("two", "2x4", 2));
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(two->explanation,
            "2 v6e 2x4 blocks in 1 slice; 1 has a missing or dead host; 1 idle, 2 needed");
  auto one = scheduler.ReserveSlices(Blocks("one", "2x4"));
  ASSERT_EQ(one->status, ScheduleStatus::kPlaced);
  EXPECT_THAT(Hosts(one->bundles), ElementsAre("a/0 a-w0 w0", "a/0 a-w2 w1"));
}

TEST(SubSliceReservationTest, APinOrASelectorAppliesToTheParentSlice) {
  ClusterView cluster;
  AddSlice(cluster, "a");
  AddSlice(cluster, "b");
  DomainGroupScheduler scheduler(&cluster);
  DomainGroupRequest pinned = Blocks("pinned", "2x4");
  pinned.alternatives[0].domain = "b";
  auto r = scheduler.ReserveSlices(pinned);
  ASSERT_EQ(r->status, ScheduleStatus::kPlaced);
  EXPECT_EQ(r->domains, std::vector<std::string>{"b/0"});
  DomainGroupRequest nowhere = Blocks("nowhere", "2x4");
  nowhere.alternatives[0].domain = "c";
  auto none = scheduler.ReserveSlices(nowhere);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(none->explanation, "no slice named c holds a v6e 2x4 block (slices: 2 v6e 4x4)");
}

// What a head stores of a group's bundles: no allocation id, which belongs to the old view.
std::vector<DomainBundle> Saved(std::vector<DomainBundle> bundles) {
  for (DomainBundle& b : bundles) {
    b.allocation.id = AllocationId();
    b.allocation.node = NodeId();
  }
  return bundles;
}

TEST(SubSliceReservationTest, ARestoredBlockComesBackOnExactlyItsHosts) {
  ClusterView before;
  AddSlice(before, "a");
  DomainGroupScheduler original(&before);
  ASSERT_EQ(original.ReserveSlices(Blocks("x", "2x4"))->status, ScheduleStatus::kPlaced);
  auto y = original.ReserveSlices(Blocks("y", "2x4"));
  ASSERT_EQ(y->status, ScheduleStatus::kPlaced);
  ASSERT_EQ(y->domains, std::vector<std::string>{"a/1"});

  ClusterView after;
  AddSlice(after, "a");
  DomainGroupScheduler restored(&after);
  auto back = restored.Restore(Blocks("y", "2x4"), 0, Saved(y->bundles));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->status, DomainRestoreStatus::kRestored) << back->explanation;
  EXPECT_THAT(Hosts(back->bundles), ElementsAre("a/1 a-w1 w0", "a/1 a-w3 w1"));
  // The other block is still free in the new view.
  auto x = restored.ReserveSlices(Blocks("x", "2x4"));
  ASSERT_EQ(x->status, ScheduleStatus::kPlaced);
  EXPECT_EQ(x->domains, std::vector<std::string>{"a/0"});

  // Bundles whose hosts are not the block's workers are refused, and nothing is held.
  ClusterView third;
  AddSlice(third, "a");
  DomainGroupScheduler refusing(&third);
  std::vector<DomainBundle> swapped = Saved(y->bundles);
  std::swap(swapped[0].node, swapped[1].node);
  auto refused = refusing.Restore(Blocks("y", "2x4"), 0, swapped);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->status, DomainRestoreStatus::kRefused);
  EXPECT_THAT(refused->explanation,
              HasSubstr("it registered as a worker 3, not worker 1 (block 1 worker 0)"));
  EXPECT_EQ(third.node(*third.Find(NodeId("a-w1"))).available.Get("TPU"), Quantity::FromInt(4));
}

TEST(SubSliceReservationTest, SubSliceNeedsATpuAlternative) {
  ClusterView cluster;
  DomainGroupScheduler scheduler(&cluster);
  DomainAlternative nvlink;
  nvlink.per_host = Res("GPU=8");
  nvlink.sub_slice = true;
  auto r = scheduler.ReserveSlices(DomainGroupRequest{"bad", {nvlink}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("sub_slice needs a TPU slice shape"));
}

}  // namespace
}  // namespace tessera

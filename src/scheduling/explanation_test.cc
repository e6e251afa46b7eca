// Explanations name who holds what blocks a request: tasks, leases, placement groups and slice
// groups, by name up to five, as counts by kind beyond.
#include "scheduling/explanation.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduling/placement_group_scheduler.h"
#include "scheduling/scheduling_test_util.h"
#include "scheduling/task_scheduler.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing_util::FullyLinked;
using testing_util::MustAdd;
using testing_util::Res;
using testing_util::Spec;

SchedulingRequest Task(std::string name, std::string_view resources, int64_t id) {
  SchedulingRequest r;
  r.id = RequestId(id);
  r.holder = Holder{HolderKind::kTask, std::move(name)};
  r.resources = Res(resources);
  return r;
}

TEST(DescribeHoldersTest, NamesUpToFiveThenCountsByKind) {
  EXPECT_EQ(DescribeHolders({}), "nothing");
  const std::vector<Holder> few = {{HolderKind::kSliceGroup, "train"},
                                   {HolderKind::kTask, "b"},
                                   {HolderKind::kUnknown, ""},
                                   {HolderKind::kTask, "a"},
                                   {HolderKind::kTask, "a"}};
  EXPECT_EQ(DescribeHolders(few), "task a, task b, slice group train, other work");
  std::vector<Holder> many;
  for (int i = 0; i < 7; ++i) many.push_back({HolderKind::kTask, "t" + std::to_string(i)});
  many.push_back({HolderKind::kPlacementGroup, "pg"});
  many.push_back({HolderKind::kLease, "l-1"});
  many.push_back({HolderKind::kLease, "l-2"});
  many.push_back({HolderKind::kUnknown, ""});
  EXPECT_EQ(DescribeHolders(many), "7 tasks, 2 leases, 1 placement group, other work");
}

TEST(ExplanationTest, PendingTaskNamesTheTasksAndGroupsHoldingTheBlockingResource) {
  ClusterView cluster;
  MustAdd(cluster, Spec("g1", "CPU=16,GPU=4", {}, FullyLinked(4)));
  MustAdd(cluster, Spec("g2", "CPU=16,GPU=4", {}, FullyLinked(4)));
  TaskScheduler tasks(&cluster);
  PlacementGroupScheduler groups(&cluster);
  ASSERT_TRUE(tasks.Schedule(Task("trainer", "GPU=4", 1))->placement.has_value());
  // A CPU-only task holds no GPU: it is not named as a holder of GPUs.
  ASSERT_TRUE(tasks.Schedule(Task("logger", "CPU=1", 2))->placement.has_value());
  PlacementGroupSpec spec;
  spec.name = "serve";
  spec.strategy = PlacementStrategy::kPack;
  spec.primary.bundles = {Res("GPU=3")};
  ASSERT_EQ(groups.Create(spec)->status, ScheduleStatus::kPlaced);

  absl::StatusOr<ScheduleResult> blocked = tasks.Schedule(Task("eval", "GPU=2", 3));
  ASSERT_TRUE(blocked.ok());
  EXPECT_EQ(blocked->status, ScheduleStatus::kPending);
  EXPECT_EQ(blocked->explanation,
            "2 nodes could fit GPU=2; all are busy (available GPU: 1, 0; held by task trainer, "
            "placement group serve)");
}

TEST(ExplanationTest, ARequestWithoutAHolderIsNamedByItsId) {
  ClusterView cluster;
  MustAdd(cluster, Spec("n", "CPU=2"));
  TaskScheduler tasks(&cluster);
  SchedulingRequest anonymous;
  anonymous.id = RequestId(41);
  anonymous.resources = Res("CPU=2");
  ASSERT_TRUE(tasks.Schedule(anonymous)->placement.has_value());
  EXPECT_THAT(tasks.Schedule(Task("next", "CPU=1", 42))->explanation,
              HasSubstr("held by task 41)"));
}

TEST(ExplanationTest, GroupBundlesThatCannotFitNameTheirHolders) {
  ClusterView cluster;
  MustAdd(cluster, Spec("g1", "CPU=8,GPU=2", {}, FullyLinked(2)));
  TaskScheduler tasks(&cluster);
  PlacementGroupScheduler groups(&cluster);
  ASSERT_TRUE(tasks.Schedule(Task("warmup", "GPU=2", 1))->placement.has_value());
  PlacementGroupSpec spec;
  spec.name = "gang";
  spec.strategy = PlacementStrategy::kPack;
  spec.primary.bundles = {Res("GPU=1")};
  absl::StatusOr<PlacementGroupResult> result = groups.Create(spec);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->status, ScheduleStatus::kPending);
  EXPECT_THAT(result->explanation, HasSubstr("held by task warmup"));
}

TEST(ExplanationTest, HoldersAreForgottenWithTheirAllocations) {
  ClusterView cluster;
  MustAdd(cluster, Spec("a", "CPU=4"));
  MustAdd(cluster, Spec("b", "CPU=4"));
  absl::StatusOr<Allocation> one = cluster.Allocate(0, Res("CPU=1"));
  absl::StatusOr<Allocation> two = cluster.Allocate(1, Res("CPU=1"));
  ASSERT_TRUE(one.ok() && two.ok());
  ASSERT_TRUE(cluster.SetHolder(one->id, {HolderKind::kLease, "l-1"}).ok());
  ASSERT_TRUE(cluster.SetHolder(two->id, {HolderKind::kSliceGroup, "s"}).ok());
  EXPECT_EQ(cluster.HolderOf(one->id).ToString(), "lease l-1");
  EXPECT_THAT(HoldersOn(cluster, std::vector<NodeIndex>{1}),
              ElementsAre(Holder{HolderKind::kSliceGroup, "s"}));

  ASSERT_TRUE(cluster.Release(one->id).ok());
  EXPECT_EQ(cluster.HolderOf(one->id).kind, HolderKind::kUnknown);
  EXPECT_THAT(HoldersOn(cluster, std::vector<NodeIndex>{0}), IsEmpty());
  EXPECT_EQ(cluster.SetHolder(one->id, {HolderKind::kTask, "late"}).code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(cluster.FailNode(NodeId("b")).ok());
  EXPECT_EQ(cluster.HolderOf(two->id).kind, HolderKind::kUnknown);
  EXPECT_THAT(HoldersOn(cluster, std::vector<NodeIndex>{1}), IsEmpty());
}

}  // namespace
}  // namespace tessera

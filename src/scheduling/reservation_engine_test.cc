#include "scheduling/reservation_engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "hardware/node_label_keys.h"
#include "scheduling/scheduling_test_util.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing_util::AddSlice;
using testing_util::MustAdd;
using testing_util::Res;
using testing_util::SliceOptions;
using testing_util::Spec;
using testing_util::ViewDigest;

PlacementGroupSpec Group(std::string name, PlacementStrategy strategy,
                         std::vector<std::string> bundles) {
  PlacementGroupSpec spec;
  spec.name = std::move(name);
  spec.strategy = strategy;
  for (const std::string& b : bundles) spec.primary.bundles.push_back(Res(b));
  return spec;
}

DomainGroupRequest Slices(std::string name, std::string_view accelerator = "v6e",
                          std::string_view topology = "4x4") {
  DomainAlternative alt;
  alt.shape = testing_util::Shape(accelerator, topology);
  return DomainGroupRequest{std::move(name), {alt}};
}

LabelSet SliceLabels(const std::string& slice, int worker) {
  return LabelSet{{std::string(labels::kTpuSliceName), slice},
                  {std::string(labels::kTpuWorkerId), std::to_string(worker)},
                  {std::string(labels::kTpuTopology), "4x4"},
                  {std::string(labels::kTpuPodType), "v6e-16"}};
}

std::vector<std::string> Names(const std::vector<ReservationOutcome>& outcomes) {
  std::vector<std::string> names;
  for (const ReservationOutcome& o : outcomes) names.push_back(o.name);
  return names;
}

TEST(ReservationEngineTest, WhatCannotBePlacedWaitsAndIsRetriedGroupsFirstEachInNameOrder) {
  ClusterView view;
  const NodeIndex n1 = MustAdd(view, Spec("n1", "CPU=4,ssd=4"));  // the only node with ssd
  ReservationEngine engine(&view);
  ASSERT_EQ(
      engine.CreatePlacementGroup(Group("first", PlacementStrategy::kPack, {"ssd=4"}))->status,
      ReservationStatus::kPlaced);
  auto b = engine.CreatePlacementGroup(Group("b", PlacementStrategy::kPack, {"ssd=2"}));
  auto a = engine.CreatePlacementGroup(Group("a", PlacementStrategy::kPack, {"ssd=2"}));
  auto never = engine.CreatePlacementGroup(Group("never", PlacementStrategy::kPack, {"ssd=64"}));
  ASSERT_TRUE(b.ok() && a.ok() && never.ok());
  EXPECT_EQ(b->status, ReservationStatus::kPending);
  EXPECT_THAT(b->explanation, HasSubstr("held by placement group first"));
  EXPECT_EQ(never->status, ReservationStatus::kInfeasible);
  AddSlice(view, "v6e-0");
  auto slices = engine.ReserveSlices(Slices("train"));
  ASSERT_TRUE(slices.ok());
  EXPECT_EQ(slices->status, ReservationStatus::kPlaced);
  auto waiting_slice = engine.ReserveSlices(Slices("also"));
  ASSERT_TRUE(waiting_slice.ok());
  EXPECT_EQ(waiting_slice->status, ReservationStatus::kPending);

  // Nothing changed: every waiting one is tried again, groups first, each kind in name order.
  EXPECT_THAT(Names(engine.RetryWaiting()), ElementsAre("a", "b", "never", "also"));
  // Room for both waiting groups once `first` is gone: tried in name order.
  ASSERT_TRUE(engine.Remove("first").ok());
  std::vector<ReservationOutcome> retried = engine.RetryWaiting();
  ASSERT_EQ(retried.size(), 4u);
  EXPECT_EQ(retried[0].status, ReservationStatus::kPlaced);  // a
  EXPECT_EQ(retried[1].status, ReservationStatus::kPlaced);  // b: 2 + 2 fit
  EXPECT_EQ(engine.Find("a")->status, ReservationStatus::kPlaced);
  EXPECT_EQ(view.node(n1).available.Get("ssd"), Quantity::FromInt(0));
  // A reservation may be held back (the head's, while a round is in flight).
  EXPECT_THAT(Names(engine.RetryWaiting([](const std::string& name) { return name != "also"; })),
              ElementsAre("never"));
}

TEST(ReservationEngineTest, BadInputKeepsNothingAndNamesAreSharedByBothKinds) {
  ClusterView view;
  MustAdd(view, Spec("n1", "CPU=4"));
  AddSlice(view, "v6e-0");
  ReservationEngine engine(&view);
  const std::string before = ViewDigest(view);
  EXPECT_EQ(
      engine.CreatePlacementGroup(Group("", PlacementStrategy::kPack, {"CPU=1"})).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine.CreatePlacementGroup(Group("g", PlacementStrategy::kPack, {})).status().code(),
            absl::StatusCode::kInvalidArgument);
  DomainGroupRequest bad_shape = Slices("s");
  bad_shape.alternatives[0].shape->topology = TpuTopology{{3, 7}};  // by hand: no v6e slice
  EXPECT_EQ(engine.ReserveSlices(bad_shape).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(engine.records().empty());
  EXPECT_EQ(ViewDigest(view), before);
  ASSERT_TRUE(engine.CreatePlacementGroup(Group("g", PlacementStrategy::kPack, {"CPU=1"})).ok());
  EXPECT_EQ(engine.ReserveSlices(Slices("g")).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(engine.Remove("nothing").status().code(), absl::StatusCode::kNotFound);
}

TEST(ReservationEngineTest, RemoveGivesBackExactlyWhatWasHeld) {
  ClusterView view;
  MustAdd(view, Spec("n1", "CPU=4"));
  ReservationEngine engine(&view);
  const std::string before = ViewDigest(view);
  ASSERT_TRUE(
      engine.CreatePlacementGroup(Group("g", PlacementStrategy::kPack, {"CPU=1", "CPU=2"})).ok());
  ASSERT_TRUE(engine.CreatePlacementGroup(Group("w", PlacementStrategy::kPack, {"CPU=9"})).ok());
  auto released = engine.Remove("g");
  ASSERT_TRUE(released.ok());
  EXPECT_EQ(released->size(), 2u);
  auto withdrawn = engine.Remove("w");
  ASSERT_TRUE(withdrawn.ok());
  EXPECT_TRUE(withdrawn->empty());
  EXPECT_EQ(ViewDigest(view), before);
  EXPECT_TRUE(engine.records().empty());
}

TEST(ReservationEngineTest, ANodeFailureReplacesGroupBundlesAndBreaksSliceGroupsUntilHostsReturn) {
  ClusterView view;
  // Only the cpu nodes have ssd: the group's bundles cannot go to the slice hosts.
  MustAdd(view, Spec("cpu-0", "CPU=4,ssd=1"));
  MustAdd(view, Spec("cpu-1", "CPU=4,ssd=1"));
  AddSlice(view, "v6e-0");
  ReservationEngine engine(&view);
  ASSERT_TRUE(
      engine.CreatePlacementGroup(Group("pg", PlacementStrategy::kStrictSpread, {"ssd=1", "ssd=1"}))
          .ok());
  ASSERT_TRUE(engine.ReserveSlices(Slices("train")).ok());
  ASSERT_EQ(engine.Bundles("pg")[0]->node.value(), "cpu-0");

  auto lost = view.FailNode(NodeId("cpu-0"));
  ASSERT_TRUE(lost.ok());
  std::vector<ReservationOutcome> touched = engine.OnNodeFailed(NodeId("cpu-0"), "gone", *lost);
  ASSERT_EQ(touched.size(), 1u);
  EXPECT_EQ(touched[0].status, ReservationStatus::kReplacing);  // no third node for STRICT_SPREAD
  EXPECT_TRUE(touched[0].replacement);
  EXPECT_THAT(touched[0].bundles, ElementsAre(0));
  EXPECT_FALSE(engine.Bundles("pg")[0].has_value());

  lost = view.FailNode(NodeId("v6e-0-w2"));
  ASSERT_TRUE(lost.ok());
  touched = engine.OnNodeFailed(NodeId("v6e-0-w2"), "missed heartbeats", *lost);
  ASSERT_EQ(touched.size(), 1u);
  EXPECT_EQ(touched[0].name, "train");
  EXPECT_EQ(touched[0].status, ReservationStatus::kBroken);
  EXPECT_EQ(touched[0].explanation, "host v6e-0-w2 died (missed heartbeats)");
  EXPECT_THAT(touched[0].bundles, ElementsAre(2));

  // A new node lets the group re-place its bundle; the slice group waits for its host.
  MustAdd(view, Spec("cpu-2", "CPU=4,ssd=1"));
  auto alive = [&](const NodeId& id) {
    auto index = view.Find(id);
    return index.has_value() && view.node(*index).state != NodeState::kDead;
  };
  auto all = [](const std::string&) { return true; };
  EXPECT_TRUE(engine.HealBroken(alive, all).empty());
  std::vector<ReservationOutcome> retried = engine.RetryWaiting();
  ASSERT_EQ(retried.size(), 1u);
  EXPECT_EQ(retried[0].name, "pg");
  EXPECT_EQ(retried[0].status, ReservationStatus::kPlaced);
  EXPECT_EQ(engine.Bundles("pg")[0]->node.value(), "cpu-2");

  // The host registers again: the slice group gives back what it held and is reserved anew.
  ASSERT_TRUE(view.RemoveNode(NodeId("v6e-0-w2")).ok());
  MustAdd(view, Spec("v6e-0-w2", "CPU=8,TPU=4", SliceLabels("v6e-0", 2)));
  EXPECT_THAT(engine.HealBroken(alive, all), ElementsAre("train"));
  EXPECT_EQ(engine.Find("train")->status, ReservationStatus::kPending);
  EXPECT_EQ(engine.Find("train")->explanation, "its hosts are back; reserving it again");
  retried = engine.RetryWaiting();
  ASSERT_EQ(retried.size(), 1u);
  EXPECT_EQ(retried[0].status, ReservationStatus::kPlaced);
  EXPECT_EQ(engine.SliceHosts("train")->size(), 4u);
}

TEST(ReservationEngineTest, AnUnplacedReservationWaitsAgainAndABrokenOneCanBeHeldBack) {
  ClusterView view;
  MustAdd(view, Spec("n1", "CPU=4"));
  AddSlice(view, "v6e-0");
  ReservationEngine engine(&view);
  const std::string before = ViewDigest(view);
  ASSERT_TRUE(engine.CreatePlacementGroup(Group("g", PlacementStrategy::kPack, {"CPU=4"})).ok());
  ASSERT_TRUE(engine.ReserveSlices(Slices("s")).ok());
  engine.Unplace("g", "two-phase commit failed: n1 refused");
  engine.Unplace("s", "two-phase commit failed: v6e-0-w0 refused");
  EXPECT_EQ(ViewDigest(view), before);
  EXPECT_EQ(engine.Find("g")->status, ReservationStatus::kPending);
  EXPECT_EQ(engine.Find("g")->explanation, "two-phase commit failed: n1 refused");
  EXPECT_TRUE(engine.Bundles("g").empty());
  EXPECT_EQ(Names(engine.RetryWaiting()), (std::vector<std::string>{"g", "s"}));
  EXPECT_EQ(engine.Find("s")->status, ReservationStatus::kPlaced);

  // An agent lost a bundle of the live slice: broken, healed only when allowed.
  engine.Break("s", "host v6e-0-w1 lost bundle 1");
  EXPECT_EQ(engine.Find("s")->status, ReservationStatus::kBroken);
  auto alive = [](const NodeId&) { return true; };
  EXPECT_TRUE(engine.HealBroken(alive, [](const std::string&) { return false; }).empty());
  EXPECT_THAT(engine.HealBroken(alive, [](const std::string&) { return true; }), ElementsAre("s"));
}

TEST(ReservationEngineTest, ARequestInsideAReservationIsJudgedAgainstItsBundles) {
  ClusterView view;
  MustAdd(view, Spec("n1", "CPU=4"));
  MustAdd(view, Spec("n2", "CPU=4"));
  ReservationEngine engine(&view);
  ASSERT_TRUE(
      engine.CreatePlacementGroup(Group("g", PlacementStrategy::kStrictSpread, {"CPU=2", "CPU=1"}))
          .ok());
  PlacementGroupSpec later = Group("later", PlacementStrategy::kPack, {"CPU=8", "CPU=1"});
  ASSERT_TRUE(engine.CreatePlacementGroup(later).ok());

  BundleTargetCheck check = engine.CheckBundleTarget("nope", 0, Res("CPU=1"));
  EXPECT_EQ(check.status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(check.explanation, "no placement group or slice group named nope");
  check = engine.CheckBundleTarget("g", 5, Res("CPU=1"));
  EXPECT_EQ(check.explanation, "g has 2 bundles; there is no bundle 5");
  check = engine.CheckBundleTarget("g", 1, Res("CPU=2"));
  EXPECT_EQ(check.status, ScheduleStatus::kInfeasible);
  EXPECT_EQ(check.explanation, "bundle 1 of g reserves CPU=1; it can never hold CPU=2");
  check = engine.CheckBundleTarget("g", -1, Res("CPU=3"));
  EXPECT_EQ(check.explanation,
            "no bundle of g can ever hold CPU=3 (a request never spans bundles)");
  check = engine.CheckBundleTarget("g", -1, Res("CPU=1"));
  EXPECT_EQ(check.status, ScheduleStatus::kPlaced);
  ASSERT_EQ(check.candidates.size(), 2u);
  EXPECT_EQ(check.candidates[0].first, 0);
  EXPECT_EQ(check.candidates[1].first, 1);
  EXPECT_EQ(check.candidates[1].second, engine.Bundles("g")[1]->node);
  // A group that waits: PENDING, saying why, unless the bundle could never hold it.
  check = engine.CheckBundleTarget("later", 1, Res("CPU=1"));
  EXPECT_EQ(check.status, ScheduleStatus::kPending);
  EXPECT_THAT(check.explanation, HasSubstr("placement group later is not placed yet ("));
  EXPECT_EQ(engine.CheckBundleTarget("later", 1, Res("CPU=2")).status, ScheduleStatus::kInfeasible);

  // A bundle lost with its node waits to be re-placed: pending, not missing.
  const NodeId holder = engine.Bundles("g")[1]->node;  // STRICT_SPREAD: nowhere else to go
  auto lost = view.FailNode(holder);
  ASSERT_TRUE(lost.ok());
  engine.OnNodeFailed(holder, "gone", *lost);
  check = engine.CheckBundleTarget("g", 1, Res("CPU=1"));
  EXPECT_EQ(check.status, ScheduleStatus::kPending);
  EXPECT_THAT(check.explanation, HasSubstr("bundle 1 of g is waiting to be re-placed ("));
  check = engine.CheckBundleTarget("g", -1, Res("CPU=1"));
  EXPECT_EQ(check.status, ScheduleStatus::kPlaced);  // bundle 0 still has its node
  EXPECT_THAT(check.replacing, HasSubstr("bundle 1 of g is waiting to be re-placed"));
}

TEST(ReservationEngineTest, RestoredReservationsComeBackExactlyOrWait) {
  ClusterView first;
  MustAdd(first, Spec("n1", "CPU=4,ssd=8"));  // the slice hosts have no ssd
  AddSlice(first, "v6e-0");
  ReservationEngine before(&first);
  ASSERT_TRUE(before
                  .CreatePlacementGroup(
                      Group("g", PlacementStrategy::kPack, {"CPU=1,ssd=1", "CPU=2,ssd=1"}))
                  .ok());
  ASSERT_TRUE(before.ReserveSlices(Slices("s")).ok());

  // A fresh view where one slice host did not come back yet.
  ClusterView view;
  MustAdd(view, Spec("n1", "CPU=4,ssd=8"));
  AddSlice(view, "v6e-0", SliceOptions{.skip_worker = 3});
  ReservationEngine engine(&view);
  std::vector<RestoredBundle> bundles;
  for (const auto& b : before.Bundles("g")) {
    bundles.push_back(RestoredBundle{b->node, b->allocation.resources, b->allocation.devices});
  }
  auto group = engine.RestorePlacementGroup(before.Find("g")->spec, 0, bundles);
  ASSERT_TRUE(group.ok());
  EXPECT_EQ(group->status, ReservationStatus::kPlaced);
  auto slice = engine.RestoreSliceGroup(Slices("s"), 0, *before.SliceHosts("s"));
  ASSERT_TRUE(slice.ok());
  EXPECT_EQ(slice->status, ReservationStatus::kBroken);
  EXPECT_THAT(slice->bundles, ElementsAre(3));
  ASSERT_TRUE(engine
                  .RestoreWaiting(Group("w", PlacementStrategy::kPack, {"ssd=1"}),
                                  ReservationStatus::kPending, "held by placement group g")
                  .ok());
  EXPECT_EQ(engine.Find("w")->status, ReservationStatus::kPending);
  EXPECT_EQ(view.node(*view.Find(NodeId("n1"))).available.Get("CPU"), Quantity::FromInt(1));
  // A record that no longer fits (bundles of another shape) waits to be placed anew.
  std::vector<RestoredBundle> wrong(1);
  auto refused = engine.RestorePlacementGroup(
      Group("x", PlacementStrategy::kPack, {"ssd=1", "ssd=1"}), 0, wrong);
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->status, ReservationStatus::kPending);
  EXPECT_THAT(refused->explanation, HasSubstr("could not be restored as it was"));
  EXPECT_EQ(engine.RetryWaiting().size(), 2u);  // w and x, both placed now
  EXPECT_EQ(engine.Find("w")->status, ReservationStatus::kPlaced);
}

TEST(ReservationEngineTest, DecisionsRunInsideTheWrapper) {
  ClusterView view;
  MustAdd(view, Spec("n1", "CPU=4"));
  AddSlice(view, "v6e-0");
  ReservationEngine engine(&view);
  std::vector<ReservationKind> kinds;
  engine.set_decision_wrapper([&](ReservationKind kind, absl::FunctionRef<void()> decide) {
    kinds.push_back(kind);
    decide();
  });
  ASSERT_TRUE(engine.CreatePlacementGroup(Group("g", PlacementStrategy::kPack, {"CPU=9"})).ok());
  ASSERT_TRUE(engine.ReserveSlices(Slices("s")).ok());
  engine.RetryWaiting();
  EXPECT_THAT(kinds, ElementsAre(ReservationKind::kPlacementGroup, ReservationKind::kSliceGroup,
                                 ReservationKind::kPlacementGroup));
}

}  // namespace
}  // namespace tessera

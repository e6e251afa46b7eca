// Unit tests of the reservation machinery both kinds share: grouping by node, two-phase commit
// and its rollback, state words and demand.
#include "head/reservation.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

// Records what the head asked; fails the named step on demand. Thread-compatible: the head calls
// different agents at once, never one agent twice at once.
class RecordingAgent : public NodeAgentClient {
 public:
  absl::Status Prepare(const v1::PrepareBundlesRequest& request) override {
    for (const auto& bundle : request.bundles()) {
      calls.push_back((request.commit() ? "prepare+commit " : "prepare ") +
                      Index(bundle.bundle_index()));
    }
    if (on_prepare) return on_prepare();
    return fail_prepare;
  }
  absl::Status Commit(const v1::CommitBundlesRequest& request) override {
    for (int index : request.bundle_indices()) calls.push_back("commit " + Index(index));
    return fail_commit;
  }
  absl::Status Cancel(const v1::CancelBundlesRequest& request) override {
    for (int index : request.bundle_indices()) calls.push_back("cancel " + Index(index));
    return absl::OkStatus();
  }

  std::vector<std::string> calls;
  std::function<absl::Status()> on_prepare;  // replaces fail_prepare when set
  absl::Status fail_prepare;
  absl::Status fail_commit;

 private:
  static std::string Index(int index) { return std::to_string(index); }
};

struct Agents {
  std::map<std::string, std::shared_ptr<RecordingAgent>> by_node;
  AgentLookup lookup() {
    return [this](const std::string& node) -> std::shared_ptr<NodeAgentClient> {
      auto it = by_node.find(node);
      return it == by_node.end() ? nullptr : it->second;
    };
  }
};

TEST(NodeWorkPlanTest, GroupsBundlesByNodeInNodeOrder) {
  Agents agents;
  agents.by_node["a"] = std::make_shared<RecordingAgent>();
  NodeWorkPlan plan(agents.lookup());
  EXPECT_TRUE(plan.empty());
  plan.Prepare("b", 0, {});
  plan.Prepare("a", 1, {});
  plan.Cancel("a", 2);
  plan.Prepare("b", 3, {});
  std::vector<NodeWork> work = plan.Take();
  ASSERT_EQ(work.size(), 2u);
  EXPECT_EQ(work[0].node, "a");
  EXPECT_NE(work[0].client, nullptr);
  ASSERT_EQ(work[0].prepare.size(), 1u);
  EXPECT_EQ(work[0].prepare[0].first, 1);
  EXPECT_EQ(work[0].cancel, std::vector<int>{2});
  EXPECT_EQ(work[1].node, "b");
  EXPECT_EQ(work[1].client, nullptr);  // not alive
  ASSERT_EQ(work[1].prepare.size(), 2u);
  EXPECT_TRUE(plan.empty());
}

TEST(TwoPhaseCommitTest, PreparesEverywhereThenCommits) {
  Agents agents;
  agents.by_node["a"] = std::make_shared<RecordingAgent>();
  agents.by_node["b"] = std::make_shared<RecordingAgent>();
  NodeWorkPlan plan(agents.lookup());
  plan.Prepare("a", 0, {});
  plan.Prepare("b", 1, {});
  ASSERT_TRUE(TwoPhaseCommit("g", plan.Take()).ok());
  EXPECT_EQ(agents.by_node["a"]->calls, (std::vector<std::string>{"prepare 0", "commit 0"}));
  EXPECT_EQ(agents.by_node["b"]->calls, (std::vector<std::string>{"prepare 1", "commit 1"}));
}

TEST(TwoPhaseCommitTest, AFailedCommitCancelsEveryPreparedBundleAndNamesTheNode) {
  Agents agents;
  agents.by_node["a"] = std::make_shared<RecordingAgent>();
  agents.by_node["b"] = std::make_shared<RecordingAgent>();
  agents.by_node["b"]->fail_commit = absl::UnavailableError("gone");
  NodeWorkPlan plan(agents.lookup());
  plan.Prepare("a", 0, {});
  plan.Prepare("b", 1, {});
  absl::Status status = TwoPhaseCommit("g", plan.Take());
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(), "commit on b failed: gone");
  EXPECT_EQ(agents.by_node["a"]->calls,
            (std::vector<std::string>{"prepare 0", "commit 0", "cancel 0"}));
  EXPECT_EQ(agents.by_node["b"]->calls,
            (std::vector<std::string>{"prepare 1", "commit 1", "cancel 1"}));
}

TEST(TwoPhaseCommitTest, AFailedPrepareCancelsEveryParticipantAndCommitsNothing) {
  Agents agents;
  agents.by_node["a"] = std::make_shared<RecordingAgent>();
  agents.by_node["b"] = std::make_shared<RecordingAgent>();
  agents.by_node["b"]->fail_prepare = absl::ResourceExhaustedError("GPU 3 is not free");
  NodeWorkPlan plan(agents.lookup());
  plan.Prepare("a", 0, {});
  plan.Prepare("b", 1, {});
  absl::Status status = TwoPhaseCommit("g", plan.Take());
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(status.message(), "prepare on b failed: GPU 3 is not free");
  EXPECT_EQ(agents.by_node["a"]->calls, (std::vector<std::string>{"prepare 0", "cancel 0"}));
  EXPECT_EQ(agents.by_node["b"]->calls, (std::vector<std::string>{"prepare 1", "cancel 1"}));
}

TEST(TwoPhaseCommitTest, ADeadNodeFailsTheRoundBeforeAnyCall) {
  Agents agents;
  agents.by_node["a"] = std::make_shared<RecordingAgent>();
  NodeWorkPlan plan(agents.lookup());
  plan.Prepare("a", 0, {});
  plan.Prepare("z", 1, {});
  absl::Status status = TwoPhaseCommit("g", plan.Take());
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(), "node z is not alive");
  EXPECT_TRUE(agents.by_node["a"]->calls.empty());
}

TEST(TwoPhaseCommitTest, ALoneParticipantPreparesAndCommitsInOneCall) {
  Agents agents;
  agents.by_node["a"] = std::make_shared<RecordingAgent>();
  agents.by_node["b"] = std::make_shared<RecordingAgent>();
  NodeWorkPlan plan(agents.lookup());
  plan.Prepare("a", 0, {});
  plan.Prepare("a", 1, {});
  plan.Cancel("b", 2);  // cancels are not part of the round
  ASSERT_TRUE(TwoPhaseCommit("g", plan.Take()).ok());
  EXPECT_EQ(agents.by_node["a"]->calls,
            (std::vector<std::string>{"prepare+commit 0", "prepare+commit 1"}));
  EXPECT_TRUE(agents.by_node["b"]->calls.empty());
}

TEST(TwoPhaseCommitTest, AFailedOnePhaseCommitIsCancelledAsItMayHaveBeenApplied) {
  Agents agents;
  agents.by_node["a"] = std::make_shared<RecordingAgent>();
  agents.by_node["a"]->fail_prepare = absl::DeadlineExceededError("no answer");
  NodeWorkPlan plan(agents.lookup());
  plan.Prepare("a", 0, {});
  absl::Status status = TwoPhaseCommit("g", plan.Take());
  EXPECT_EQ(status.message(), "prepare on a failed: no answer");
  EXPECT_EQ(agents.by_node["a"]->calls, (std::vector<std::string>{"prepare+commit 0", "cancel 0"}));
}

TEST(TwoPhaseCommitTest, EveryNodeIsAskedAtOnce) {
  // Each prepare waits until all three have arrived: asked one after another, the first would
  // wait in vain and fail the round.
  absl::Mutex mu;
  int arrived = 0;
  auto all_arrive = [&] {
    absl::MutexLock lock(&mu);
    ++arrived;
    auto everyone = [&] { return arrived == 3; };
    return mu.AwaitWithTimeout(absl::Condition(&everyone), absl::Seconds(10))
               ? absl::OkStatus()
               : absl::DeadlineExceededError("the other prepares never came");
  };
  Agents agents;
  for (const char* node : {"a", "b", "c"}) {
    auto agent = std::make_shared<RecordingAgent>();
    agent->on_prepare = all_arrive;
    agents.by_node[node] = agent;
  }
  NodeWorkPlan plan(agents.lookup());
  plan.Prepare("a", 0, {});
  plan.Prepare("b", 1, {});
  plan.Prepare("c", 2, {});
  ASSERT_TRUE(TwoPhaseCommit("g", plan.Take()).ok());
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(arrived, 3);
  }
  EXPECT_EQ(agents.by_node["c"]->calls, (std::vector<std::string>{"prepare 2", "commit 2"}));
}

TEST(ReservationTest, StatesDependOnTheKind) {
  EXPECT_EQ(PlacementGroupStateOf(ReservationPhase::kHeld), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(SliceGroupStateOf(ReservationPhase::kHeld), v1::SLICE_GROUP_STATE_RESERVED);
  EXPECT_EQ(PlacementGroupStateOf(ReservationPhase::kDegraded),
            v1::PLACEMENT_GROUP_STATE_RESCHEDULING);
  EXPECT_EQ(SliceGroupStateOf(ReservationPhase::kDegraded), v1::SLICE_GROUP_STATE_BROKEN);
  EXPECT_EQ(SliceGroupStateOf(ReservationPhase::kCommitting), v1::SLICE_GROUP_STATE_PENDING);
  EXPECT_EQ(PlacementGroupStateOf(ReservationPhase::kCommitting),
            v1::PLACEMENT_GROUP_STATE_PENDING);
  EXPECT_EQ(PlacementGroupStateOf(ReservationPhase::kInfeasible),
            v1::PLACEMENT_GROUP_STATE_INFEASIBLE);
  EXPECT_EQ(SliceGroupStateOf(ReservationPhase::kInfeasible), v1::SLICE_GROUP_STATE_INFEASIBLE);
}

TEST(ReservationTest, ABrokenSliceGroupIsNoDemandButAReplacedPlacementGroupIs) {
  Reservation group(ReservationKind::kPlacementGroup);
  Reservation slices(ReservationKind::kSliceGroup);
  group.phase = slices.phase = ReservationPhase::kDegraded;
  EXPECT_TRUE(group.IsDemand());
  EXPECT_FALSE(slices.IsDemand());
  slices.phase = ReservationPhase::kPending;
  EXPECT_TRUE(slices.IsDemand());
}

TEST(ReservationTest, CommittingWithoutAnExplanationSaysWhatItDoes) {
  Reservation group(ReservationKind::kPlacementGroup);
  group.phase = ReservationPhase::kCommitting;
  EXPECT_EQ(group.ShownExplanation(), "reserving on the node agents");
  group.explanation = "two-phase commit failed: x";
  EXPECT_EQ(group.ShownExplanation(), "two-phase commit failed: x");
}

}  // namespace
}  // namespace tessera

// The head's two-phase rounds run off the health path and concurrently: while an agent sits on
// a prepare, the health check still declares a silent node dead, and two reservations waiting
// on two slow agents are prepared at the same time (a serial head would make the second wait
// for the first; here each prepare waits for the other to have started).
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "head/head_service.h"
#include "head/head_service_test_util.h"
#include "scheduling/scheduling_test_util.h"
#include "wire/proto_convert.h"

namespace tessera {
namespace {

using head_testing::FakeAgent;
using testing_util::Res;
using testing_util::Spec;

class HeadServiceConcurrencyTest : public ::testing::Test {
 protected:
  HeadServiceConcurrencyTest() {
    HeadServiceOptions options;
    options.clock = &clock_;
    options.store = &store_;
    options.agent_clients = [this](const std::string& node, const std::string&) {
      auto& agent = agents_[node];
      if (agent == nullptr) agent = std::make_shared<FakeAgent>();
      return agent;
    };
    head_ = std::make_unique<HeadService>(std::move(options));
  }

  void Register(const std::string& id, std::string_view resources) {
    v1::RegisterNodeRequest request;
    wire::NodeToProto(Spec(id, resources), "127.0.0.1:1", "i1", request.mutable_node());
    v1::RegisterNodeResponse response;
    ASSERT_TRUE(head_->nodes().RegisterNode(nullptr, &request, &response).ok());
  }

  void Beat(const std::string& id) {
    v1::HeartbeatRequest request;
    request.set_node_id(id);
    request.set_incarnation("i1");
    v1::HeartbeatResponse response;
    ASSERT_TRUE(head_->nodes().Heartbeat(nullptr, &request, &response).ok());
  }

  // One bundle of `bundle` (a node's own resource pins it there).
  v1::PlacementGroupInfo Create(const std::string& name, const std::string& bundle) {
    v1::CreatePlacementGroupRequest request;
    request.set_name(name);
    request.set_strategy(v1::PLACEMENT_STRATEGY_PACK);
    wire::ResourcesToProto(Res(bundle),
                           request.mutable_primary()->add_bundles()->mutable_resources());
    v1::PlacementGroupInfo info;
    EXPECT_TRUE(head_->reservations().CreatePlacementGroup(nullptr, &request, &info).ok());
    return info;
  }

  void Remove(const std::string& name) {
    v1::RemovePlacementGroupRequest request;
    request.set_name(name);
    v1::RemovePlacementGroupResponse response;
    ASSERT_TRUE(head_->reservations().RemovePlacementGroup(nullptr, &request, &response).ok());
  }

  v1::PlacementGroupState StateOf(const std::string& name) {
    v1::ListRequest request;
    v1::ListPlacementGroupsResponse list;
    EXPECT_TRUE(head_->reservations().ListPlacementGroups(nullptr, &request, &list).ok());
    for (const auto& group : list.groups()) {
      if (group.name() == name) return group.state();
    }
    return v1::PLACEMENT_GROUP_STATE_UNSPECIFIED;
  }

  bool NodeDead(const std::string& id) {
    for (const std::string& event : head_->events()) {
      if (absl::StrContains(event, "node " + id + " declared dead")) return true;
    }
    return false;
  }

  FakeClock clock_;
  InMemoryStateStore store_;
  std::map<std::string, std::shared_ptr<FakeAgent>> agents_;
  std::unique_ptr<HeadService> head_;
};

TEST_F(HeadServiceConcurrencyTest, AHealthCheckIsNotHeldUpByAnAgentSittingOnAPrepare) {
  Register("n1", "CPU=4,on_n1=1");
  Register("n2", "CPU=4,on_n2=1");
  ASSERT_EQ(Create("hog", "CPU=4,on_n1=1").state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  // Waits for room on n1: placed by the next reconciliation, whose prepare then blocks.
  ASSERT_EQ(Create("waiter", "CPU=4,on_n1=1").state(), v1::PLACEMENT_GROUP_STATE_PENDING);
  absl::Notification in_prepare;
  absl::Notification release;
  agents_.at("n1")->OnPrepare([&] {
    if (!in_prepare.HasBeenNotified()) in_prepare.Notify();
    release.WaitForNotification();
  });
  Remove("hog");
  head_->Reconcile(/*wait=*/false);  // starts the round and returns
  ASSERT_TRUE(in_prepare.WaitForNotificationWithTimeout(absl::Seconds(60)));

  // n2 falls silent past the timeout while n1's agent still sits on the prepare (checks come
  // every 250 ms, as the head's timer runs them: none is late).
  for (int i = 0; i < 24; ++i) {
    clock_.Advance(absl::Milliseconds(250));
    Beat("n1");
    head_->CheckHealth();
  }
  EXPECT_TRUE(NodeDead("n2"));
  EXPECT_FALSE(NodeDead("n1"));
  EXPECT_EQ(StateOf("waiter"), v1::PLACEMENT_GROUP_STATE_PENDING);  // still committing

  release.Notify();
  head_->Reconcile(/*wait=*/true);
  EXPECT_EQ(StateOf("waiter"), v1::PLACEMENT_GROUP_STATE_CREATED);
}

TEST_F(HeadServiceConcurrencyTest, TwoReservationsOnTwoSlowAgentsArePreparedAtOnce) {
  Register("n1", "CPU=4,on_n1=1");
  Register("n2", "CPU=4,on_n2=1");
  ASSERT_EQ(Create("hog1", "CPU=4,on_n1=1").state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  ASSERT_EQ(Create("hog2", "CPU=4,on_n2=1").state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  ASSERT_EQ(Create("a", "CPU=4,on_n1=1").state(), v1::PLACEMENT_GROUP_STATE_PENDING);
  ASSERT_EQ(Create("b", "CPU=4,on_n2=1").state(), v1::PLACEMENT_GROUP_STATE_PENDING);
  // Each prepare waits until both have started: rounds run one after another would never see
  // the second start while the first waits, and give up.
  absl::Mutex mu;
  int started = 0;
  std::atomic<int> met{0};
  auto barrier = [&] {
    absl::MutexLock lock(&mu);
    ++started;
    auto both = [&] { return started >= 2; };
    if (mu.AwaitWithTimeout(absl::Condition(&both), absl::Seconds(30))) ++met;
  };
  agents_.at("n1")->OnPrepare(barrier);
  agents_.at("n2")->OnPrepare(barrier);
  Remove("hog1");
  Remove("hog2");
  head_->Tick();
  EXPECT_EQ(met.load(), 2);
  EXPECT_EQ(StateOf("a"), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(StateOf("b"), v1::PLACEMENT_GROUP_STATE_CREATED);
}

}  // namespace
}  // namespace tessera

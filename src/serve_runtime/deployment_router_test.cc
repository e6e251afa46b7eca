// DeploymentRouter over an in-memory replica runtime and replica set source: replica sets reach
// the router, probes are get_num_ongoing_requests calls, dead replicas are dropped (found so by
// a probe or by a request), rejections route again, max_queued_requests is Ray's backpressure,
// and the autoscaling reports go out every report_interval (a FakeClock) and at once on a cold
// start; a caller that prefers its node (a handle with _prefer_local_routing) routes to the
// replica there.
#include "serve_runtime/deployment_router.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "serve_runtime/replica_test_fakes.h"

namespace tessera::serve {
namespace {

using fakes::FakeReplicaRuntime;
using fakes::FakeReplicaSetSource;
using fakes::MakeReplica;
using fakes::MakeSet;
using fakes::WaitUntil;
using ::testing::HasSubstr;

// What route callbacks received, in order.
class Outcomes {
 public:
  RouteCallback Callback() {
    return [this](absl::StatusOr<std::string> replica) {
      absl::MutexLock lock(&mu_);
      got_.push_back(std::move(replica));
    };
  }
  size_t size() const {
    absl::MutexLock lock(&mu_);
    return got_.size();
  }
  absl::StatusOr<std::string> at(size_t i) const {
    absl::MutexLock lock(&mu_);
    return got_.at(i);
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<absl::StatusOr<std::string>> got_ ABSL_GUARDED_BY(mu_);
};

class DeploymentRouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto created = DeploymentRouter::Create({.application = "app",
                                             .source = "proxy:n1",
                                             .runtime = &runtime_,
                                             .replica_sets = &source_,
                                             .clock = &clock_,
                                             .seed = 7});
    ASSERT_TRUE(created.ok()) << created.status();
    router_ = *std::move(created);
  }
  void TearDown() override {
    source_.Close();  // the watcher's poll returns
    router_->Stop();
  }

  // Publishes the ingress set of "app" and waits for the router to have it.
  void Publish(v1::GetServeReplicasResponse set) {
    const uint64_t version = source_.Publish("app", "", std::move(set));
    ASSERT_TRUE(WaitUntil([&] { return router_->replica_set_version() == version; }));
  }

  FakeClock clock_;
  FakeReplicaRuntime runtime_;
  FakeReplicaSetSource source_;
  std::unique_ptr<DeploymentRouter> router_;
};

TEST_F(DeploymentRouterTest, RoutesToTheReplicaOfTheSetAfterProbingIt) {
  Publish(MakeSet("d", {MakeReplica("app#d#a")}));
  Outcomes outcomes;
  ASSERT_TRUE(router_->Route({.request_id = "r1"}, outcomes.Callback()).ok());
  ASSERT_TRUE(WaitUntil([&] { return outcomes.size() == 1; }));
  EXPECT_EQ(outcomes.at(0).value_or("error"), "app#d#a");
  std::vector<FakeReplicaRuntime::CallRecord> calls = runtime_.calls();
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls[0].replica_id, "app#d#a");
  EXPECT_EQ(calls[0].method, "get_num_ongoing_requests");
  EXPECT_FALSE(calls[0].argument.has_value());
  EXPECT_EQ(router_->ongoing(), 1);
  router_->Finished("app#d#a");
  EXPECT_EQ(router_->ongoing(), 0);
}

TEST_F(DeploymentRouterTest, ADeadReplicaIsDroppedAndAnotherChosen) {
  runtime_.SetQueueLen("app#d#dead", absl::UnavailableError("actor is dead"));
  Publish(MakeSet("d", {MakeReplica("app#d#dead"), MakeReplica("app#d#live")}));
  Outcomes outcomes;
  ASSERT_TRUE(router_->Route({.request_id = "r1"}, outcomes.Callback()).ok());
  ASSERT_TRUE(WaitUntil([&] { return outcomes.size() == 1; }));
  EXPECT_EQ(outcomes.at(0).value_or("error"), "app#d#live");
  ASSERT_TRUE(WaitUntil([&] { return router_->Stats().num_replicas == 1; }));
}

TEST_F(DeploymentRouterTest, AReplicaThatDiedIsRoutedAroundUntilASetNamesItAgain) {
  runtime_.SetQueueLen("app#d#b", 3);
  Publish(MakeSet("d", {MakeReplica("app#d#a"), MakeReplica("app#d#b")}));
  Outcomes outcomes;
  ASSERT_TRUE(router_->Route({.request_id = "r1"}, outcomes.Callback()).ok());
  ASSERT_TRUE(WaitUntil([&] { return outcomes.size() == 1; }));
  EXPECT_EQ(outcomes.at(0).value_or("error"), "app#d#a");  // the shorter queue
  // r1's call found a's actor dead: r1 waits again, and only b is left to take it (a's probe
  // would still answer 0, shorter than b's 3).
  router_->Died("app#d#a");
  EXPECT_NE(router_->Rejected("app#d#a", {.request_id = "r1"}, outcomes.Callback()), 0u);
  ASSERT_TRUE(WaitUntil([&] { return outcomes.size() == 2; }));
  EXPECT_EQ(outcomes.at(1).value_or("error"), "app#d#b");
  EXPECT_EQ(router_->Stats().num_replicas, 1);
  router_->Died("app#d#unknown");  // nothing to drop: nothing changes
  EXPECT_EQ(router_->Stats().num_replicas, 1);
  Publish(MakeSet("d", {MakeReplica("app#d#a"), MakeReplica("app#d#b")}));
  EXPECT_EQ(router_->Stats().num_replicas, 2);
}

TEST_F(DeploymentRouterTest, ARejectedRequestIsRoutedAgainFirstInLine) {
  Publish(MakeSet("d", {MakeReplica("app#d#a", 1)}));
  Outcomes outcomes;
  ASSERT_TRUE(router_->Route({.request_id = "r1"}, outcomes.Callback()).ok());
  ASSERT_TRUE(WaitUntil([&] { return outcomes.size() == 1; }));
  EXPECT_EQ(router_->ongoing(), 1);
  // The replica said it was full: the request waits again, and is not ongoing meanwhile (its
  // probes say full until the replica has room).
  runtime_.SetQueueLen("app#d#a", 1);
  const DeploymentRouter::Ticket again =
      router_->Rejected("app#d#a", {.request_id = "r1"}, outcomes.Callback());
  EXPECT_NE(again, 0u);
  EXPECT_EQ(router_->ongoing(), 0);
  // The cache says the replica is at its cap (1): a probe is asked again, which says 0.
  runtime_.SetQueueLen("app#d#a", 0);
  ASSERT_TRUE(WaitUntil([&] { return outcomes.size() == 2; }));
  EXPECT_EQ(outcomes.at(1).value_or("error"), "app#d#a");
  EXPECT_EQ(router_->ongoing(), 1);
  EXPECT_GE(runtime_.calls_of("get_num_ongoing_requests"), 2u);
}

TEST_F(DeploymentRouterTest, MaxQueuedRequestsIsRaysBackPressure) {
  Publish(MakeSet("d", {}, /*max_queued_requests=*/1));
  Outcomes outcomes;
  ASSERT_TRUE(router_->Route({.request_id = "r1"}, outcomes.Callback()).ok());
  absl::StatusOr<DeploymentRouter::Ticket> refused =
      router_->Route({.request_id = "r2"}, outcomes.Callback());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.status().message(),
            "Request dropped due to backpressure (num_queued_requests=1, "
            "max_queued_requests=1).");
  // The first still waits; a replica takes it.
  Publish(MakeSet("d", {MakeReplica("app#d#a")}, 1));
  ASSERT_TRUE(WaitUntil([&] { return outcomes.size() == 1; }));
  EXPECT_EQ(outcomes.at(0).value_or("error"), "app#d#a");
}

TEST_F(DeploymentRouterTest, ColdStartIsReportedAtOnce) {
  Publish(MakeSet("d", {}));
  Outcomes outcomes;
  ASSERT_TRUE(router_->Route({.request_id = "r1"}, outcomes.Callback()).ok());
  // No time passes on the clock: the report goes out because a request waits with no replica.
  ASSERT_TRUE(WaitUntil([&] { return !source_.reports().empty(); }));
  const v1::ServeAutoscalingSample sample = source_.reports()[0];
  EXPECT_EQ(sample.application(), "app");
  EXPECT_EQ(sample.deployment(), "d");  // the ingress, resolved by the source
  EXPECT_EQ(sample.source(), "proxy:n1");
  EXPECT_EQ(sample.queued_requests(), 1);
  EXPECT_EQ(sample.ongoing_requests(), 0);
  // Once only, until replicas come.
  ASSERT_TRUE(router_->Route({.request_id = "r2"}, outcomes.Callback()).ok());
  EXPECT_EQ(source_.reports().size(), 1u);
  source_.Close();  // the watcher's poll returns
  router_->Stop();  // the waiting requests are cancelled while `outcomes` still lives
}

TEST_F(DeploymentRouterTest, OngoingRequestsAreReportedEveryInterval) {
  Publish(MakeSet("d", {MakeReplica("app#d#a")}));
  Outcomes outcomes;
  ASSERT_TRUE(router_->Route({.request_id = "r1"}, outcomes.Callback()).ok());
  ASSERT_TRUE(WaitUntil([&] { return outcomes.size() == 1; }));
  EXPECT_TRUE(source_.reports().empty());
  clock_.Advance(absl::Seconds(10));
  ASSERT_TRUE(WaitUntil([&] { return source_.reports().size() == 1; }));
  EXPECT_EQ(source_.reports()[0].ongoing_requests(), 1);
  router_->Finished("app#d#a");
  clock_.Advance(absl::Seconds(10));
  ASSERT_TRUE(WaitUntil([&] { return source_.reports().size() == 2; }));
  EXPECT_EQ(source_.reports()[1].ongoing_requests(), 0);
}

TEST_F(DeploymentRouterTest, AnApplicationGoneLeavesNoReplicaToRouteTo) {
  Publish(MakeSet("d", {MakeReplica("app#d#a")}));
  source_.Remove("app", "");
  ASSERT_TRUE(WaitUntil([&] { return router_->Stats().num_replicas == 0; }));
}

TEST_F(DeploymentRouterTest, StopCancelsWaitingRequestsAndLaterRoutes) {
  Publish(MakeSet("d", {}));
  Outcomes outcomes;
  ASSERT_TRUE(router_->Route({.request_id = "r1"}, outcomes.Callback()).ok());
  source_.Close();
  router_->Stop();
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes.at(0).status().code(), absl::StatusCode::kCancelled);
  absl::StatusOr<DeploymentRouter::Ticket> late =
      router_->Route({.request_id = "r2"}, outcomes.Callback());
  EXPECT_EQ(late.status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(late.status().message(), HasSubstr("stopped"));
  EXPECT_EQ(outcomes.size(), 1u);
}

TEST(DeploymentRouterLocalityTest, ACallerThatPrefersItsNodeRoutesToTheReplicaThere) {
  FakeClock clock;
  FakeReplicaRuntime runtime;
  FakeReplicaSetSource source;
  auto created = DeploymentRouter::Create({.application = "app",
                                           .source = "handle:driver:app/",
                                           .runtime = &runtime,
                                           .replica_sets = &source,
                                           .clock = &clock,
                                           .self_node_id = "n2",
                                           .prefer_local_node = true,
                                           .seed = 7});
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<DeploymentRouter> router = *std::move(created);
  const uint64_t version = source.Publish(
      "app", "",
      MakeSet("d", {MakeReplica("app#d#on-n1", 5, "n1"), MakeReplica("app#d#on-n2", 5, "n2")}));
  ASSERT_TRUE(WaitUntil([&] { return router->replica_set_version() == version; }));
  Outcomes outcomes;
  for (size_t i = 0; i < 8; ++i) {
    ASSERT_TRUE(router->Route({.request_id = absl::StrCat("r", i)}, outcomes.Callback()).ok());
    ASSERT_TRUE(WaitUntil([&] { return outcomes.size() == i + 1; }));
    EXPECT_EQ(outcomes.at(i).value_or("error"), "app#d#on-n2");
    router->Finished("app#d#on-n2");
  }
  source.Close();  // the watcher's poll returns
  router->Stop();
}

TEST(DeploymentRouterOptionsTest, RequiredPartsAreChecked) {
  FakeReplicaRuntime runtime;
  FakeReplicaSetSource source;
  EXPECT_EQ(DeploymentRouter::Create({.application = "app", .source = "s", .runtime = &runtime})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DeploymentRouter::Create(
                {.application = "", .source = "s", .runtime = &runtime, .replica_sets = &source})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DeploymentRouter::Create({.application = "app",
                                      .source = "s",
                                      .runtime = &runtime,
                                      .replica_sets = &source,
                                      .report_interval = absl::ZeroDuration()})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::serve

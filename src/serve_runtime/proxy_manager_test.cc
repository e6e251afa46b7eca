// ProxyManager over an in-memory proxy runtime, a node table the test sets and a FakeClock:
// which nodes get a proxy (EveryNode: those with a replica), the ports of proxies that share a
// host, health checks and the replacement of a proxy that fails them or dies, a failed start
// retried, drains, nodes that leave, Serve stopped, and the adoption of a previous controller's
// proxies.
#include "serve_runtime/proxy_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "serve_runtime/replica_test_fakes.h"

namespace tessera::serve {
namespace {

using fakes::FakeProxyRuntime;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

v1::ServeStartOptions Start(const std::string& location = "EveryNode", int port = 8000) {
  v1::ServeStartOptions start;
  start.set_http_host("0.0.0.0");
  start.set_http_port(port);
  start.set_request_timeout_s(5);
  start.set_keep_alive_timeout_s(90);
  start.set_proxy_location(location);
  return start;
}

class ProxyManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetNodes({{"n1", "10.0.0.1"}, {"n2", "10.0.0.2"}, {"n3", "10.0.0.3"}});
    ProxyManagerOptions options;
    options.clock = &clock_;
    options.runtime = &runtime_;
    options.list_nodes = [this]() -> absl::StatusOr<std::vector<ServeNode>> {
      absl::MutexLock lock(&mu_);
      return nodes_;
    };
    options.head_host = [this] {
      absl::MutexLock lock(&mu_);
      return head_host_;
    };
    auto made = ProxyManager::Create(std::move(options));
    ASSERT_TRUE(made.ok()) << made.status();
    manager_ = *std::move(made);
  }

  void SetNodes(std::vector<ServeNode> nodes) {
    absl::MutexLock lock(&mu_);
    nodes_ = std::move(nodes);
  }

  void Update(const std::set<std::string>& replica_nodes,
              std::optional<v1::ServeStartOptions> start = Start()) {
    manager_->Update(start, replica_nodes);
  }

  // Starts the proxies asked for, each answering its address; their node ids.
  std::vector<std::string> AnswerStarts() {
    std::vector<std::string> nodes;
    for (FakeProxyRuntime::StartRequest& start : runtime_.TakeStarts()) {
      nodes.push_back(start.launch.node_id);
      start.done(absl::StrCat(start.launch.node_host, ":", start.launch.http_port));
    }
    return nodes;
  }

  // Answers every call made so far with `result`; the "node method" of each.
  std::vector<std::string> AnswerCalls(const absl::StatusOr<std::string>& result) {
    std::vector<std::string> calls;
    for (FakeProxyRuntime::CallRequest& call : runtime_.TakeCalls()) {
      calls.push_back(absl::StrCat(call.node_id, " ", call.method));
      call.done(result);
    }
    return calls;
  }

  // A HEALTHY proxy on n1 (the only node with a replica).
  void HealthyOnN1() {
    Update({"n1"});
    ASSERT_THAT(AnswerStarts(), ElementsAre("n1"));
    ASSERT_EQ(Status("n1").status(), "HEALTHY");
  }

  // The status of the proxy of `node` (an empty one when there is none).
  v1::ServeProxyStatus Status(const std::string& node) {
    for (const v1::ServeProxyStatus& status : manager_->Statuses()) {
      if (status.node_id() == node) return status;
    }
    return v1::ServeProxyStatus();
  }

  FakeClock clock_;
  FakeProxyRuntime runtime_;
  absl::Mutex mu_;
  std::vector<ServeNode> nodes_ ABSL_GUARDED_BY(mu_);
  std::string head_host_ ABSL_GUARDED_BY(mu_) = "10.0.0.9";
  std::unique_ptr<ProxyManager> manager_;
};

TEST_F(ProxyManagerTest, EveryNodeStartsAProxyOnEachNodeWithAReplica) {
  Update({"n1", "n2"});
  std::vector<FakeProxyRuntime::StartRequest> starts = runtime_.TakeStarts();
  ASSERT_THAT(starts, SizeIs(2));
  const ProxyLaunch& launch = starts[0].launch;
  EXPECT_EQ(launch.node_id, "n1");
  EXPECT_EQ(launch.node_host, "10.0.0.1");
  EXPECT_EQ(launch.http_host, "0.0.0.0");
  EXPECT_EQ(launch.http_port, 8000);  // each on a host of its own
  EXPECT_EQ(launch.request_timeout_s, 5);
  EXPECT_EQ(launch.keep_alive_timeout_s, 90);
  EXPECT_FALSE(launch.replace);
  EXPECT_EQ(starts[1].launch.node_id, "n2");
  EXPECT_EQ(Status("n1").status(), "STARTING");
  EXPECT_EQ(Status("n1").address(), "");
  // n3 has no replica: no proxy, but one a previous controller left there is looked for once.
  std::vector<FakeProxyRuntime::FindRequest> finds = runtime_.TakeFinds();
  ASSERT_THAT(finds, SizeIs(1));
  EXPECT_EQ(finds[0].node_id, "n3");
  finds[0].done(absl::NotFoundError("no proxy"));

  for (FakeProxyRuntime::StartRequest& start : starts) start.done(std::string("10.0.0.1:8000"));
  EXPECT_EQ(Status("n1").status(), "HEALTHY");
  EXPECT_EQ(Status("n1").address(), "10.0.0.1:8000");
  EXPECT_THAT(manager_->Statuses(), SizeIs(2));

  Update({"n1", "n2"});
  EXPECT_THAT(runtime_.TakeStarts(), IsEmpty());
  EXPECT_THAT(runtime_.TakeFinds(), IsEmpty());
}

TEST_F(ProxyManagerTest, AProxySharingAHostWithAnotherBindsAFreePort) {
  SetNodes({{"a", "10.0.0.5"}, {"b", "10.0.0.5"}, {"c", "10.0.0.9"}});
  Update({"a", "b", "c"});
  std::vector<FakeProxyRuntime::StartRequest> starts = runtime_.TakeStarts();
  ASSERT_THAT(starts, SizeIs(3));
  EXPECT_EQ(starts[0].launch.http_port, 8000);  // the first on 10.0.0.5
  EXPECT_EQ(starts[1].launch.http_port, 0);     // b shares a's host
  EXPECT_EQ(starts[2].launch.http_port, 0);     // c is on the head's machine
}

TEST_F(ProxyManagerTest, OnlyEveryNodeRunsProxiesAndServeStoppedKillsThem) {
  Update({"n1"}, Start("HeadOnly"));
  Update({"n1"}, Start("Disabled"));
  EXPECT_THAT(runtime_.TakeStarts(), IsEmpty());
  EXPECT_THAT(manager_->Statuses(), IsEmpty());

  HealthyOnN1();
  Update({"n1"}, std::nullopt);
  EXPECT_THAT(runtime_.kills(), ElementsAre("n1"));
  EXPECT_THAT(manager_->Statuses(), IsEmpty());
}

TEST_F(ProxyManagerTest, ThreeFailedHealthChecksReplaceTheProxy) {
  HealthyOnN1();
  for (int failure = 1; failure <= 3; ++failure) {
    Update({"n1"});
    EXPECT_THAT(runtime_.TakeCalls(), IsEmpty()) << "a check waits for its period";
    clock_.Advance(absl::Seconds(10));
    Update({"n1"});
    std::vector<FakeProxyRuntime::CallRequest> calls = runtime_.TakeCalls();
    ASSERT_THAT(calls, SizeIs(1));
    EXPECT_EQ(calls[0].method, "check_health");
    EXPECT_EQ(calls[0].timeout, absl::Seconds(10));
    calls[0].done(absl::DeadlineExceededError("no answer"));
    EXPECT_EQ(Status("n1").status(), failure < 3 ? "HEALTHY" : "UNHEALTHY");
  }
  EXPECT_THAT(Status("n1").message(), HasSubstr("3 health checks failed in a row"));
  Update({"n1"});
  std::vector<FakeProxyRuntime::StartRequest> starts = runtime_.TakeStarts();
  ASSERT_THAT(starts, SizeIs(1));
  EXPECT_TRUE(starts[0].launch.replace);
  EXPECT_EQ(Status("n1").status(), "STARTING");
  starts[0].done(std::string("10.0.0.1:8000"));
  EXPECT_EQ(Status("n1").status(), "HEALTHY");
}

TEST_F(ProxyManagerTest, AProxyWhoseActorDiedIsReplacedAtOnce) {
  HealthyOnN1();
  clock_.Advance(absl::Seconds(10));
  Update({"n1"});
  EXPECT_THAT(AnswerCalls(absl::UnavailableError("actor died")), ElementsAre("n1 check_health"));
  EXPECT_EQ(Status("n1").status(), "UNHEALTHY");
  EXPECT_THAT(Status("n1").message(), HasSubstr("its actor died"));
  Update({"n1"});
  EXPECT_THAT(AnswerStarts(), ElementsAre("n1"));
  EXPECT_EQ(Status("n1").status(), "HEALTHY");
}

TEST_F(ProxyManagerTest, AFailedStartIsTriedAgainAfterTheBackoff) {
  Update({"n1"});
  std::vector<FakeProxyRuntime::StartRequest> starts = runtime_.TakeStarts();
  ASSERT_THAT(starts, SizeIs(1));
  starts[0].done(absl::UnavailableError("Address already in use"));
  EXPECT_EQ(Status("n1").status(), "UNHEALTHY");
  EXPECT_THAT(Status("n1").message(), HasSubstr("cannot start: Address already in use"));
  Update({"n1"});
  EXPECT_THAT(runtime_.TakeStarts(), IsEmpty());
  clock_.Advance(absl::Seconds(5));
  Update({"n1"});
  starts = runtime_.TakeStarts();
  ASSERT_THAT(starts, SizeIs(1));
  EXPECT_TRUE(starts[0].launch.replace);
}

TEST_F(ProxyManagerTest, ANodeWithoutReplicasDrainsItsProxyThenEndsIt) {
  HealthyOnN1();
  Update({});
  EXPECT_EQ(Status("n1").status(), "DRAINING");
  EXPECT_THAT(AnswerCalls(std::string("")), ElementsAre("n1 start_draining"));
  clock_.Advance(absl::Seconds(29));
  Update({});
  EXPECT_THAT(runtime_.TakeCalls(), IsEmpty()) << "it drains for min_draining_period first";
  clock_.Advance(absl::Seconds(1));
  Update({});
  EXPECT_THAT(AnswerCalls(std::string("False")), ElementsAre("n1 is_drained"));
  EXPECT_EQ(Status("n1").status(), "DRAINING");
  clock_.Advance(absl::Seconds(10));
  Update({});
  EXPECT_THAT(AnswerCalls(std::string("True")), ElementsAre("n1 is_drained"));
  EXPECT_THAT(runtime_.kills(), ElementsAre("n1"));
  EXPECT_THAT(manager_->Statuses(), IsEmpty());
}

TEST_F(ProxyManagerTest, ADrainingProxyWhoseNodeGetsAReplicaAgainServes) {
  HealthyOnN1();
  Update({});
  EXPECT_THAT(AnswerCalls(std::string("")), ElementsAre("n1 start_draining"));
  Update({"n1"});
  EXPECT_EQ(Status("n1").status(), "HEALTHY");
  EXPECT_THAT(AnswerCalls(std::string("")), ElementsAre("n1 stop_draining"));
  EXPECT_THAT(runtime_.kills(), IsEmpty());
}

TEST_F(ProxyManagerTest, ADrainAndItsEndReachTheProxyInOrder) {
  HealthyOnN1();
  Update({});  // start_draining, not yet answered
  Update({"n1"});
  EXPECT_THAT(AnswerCalls(std::string("")), ElementsAre("n1 start_draining"));
  Update({"n1"});
  EXPECT_THAT(AnswerCalls(std::string("")), ElementsAre("n1 stop_draining"));
}

TEST_F(ProxyManagerTest, ANodeThatLeavesTakesItsProxyAlong) {
  Update({"n1", "n2"});
  AnswerStarts();
  SetNodes({{"n1", "10.0.0.1"}});
  Update({"n1", "n2"});
  EXPECT_THAT(runtime_.kills(), IsEmpty()) << "the nodes are listed every second";
  clock_.Advance(absl::Seconds(1));
  Update({"n1", "n2"});
  EXPECT_THAT(runtime_.kills(), ElementsAre("n2"));
  EXPECT_THAT(manager_->Statuses(), SizeIs(1));
}

TEST_F(ProxyManagerTest, APreviousControllersProxyIsAdoptedAndDrains) {
  Update({});
  std::vector<FakeProxyRuntime::FindRequest> finds = runtime_.TakeFinds();
  ASSERT_THAT(finds, SizeIs(3));
  finds[0].done(std::string("10.0.0.1:8000"));  // n1's
  finds[1].done(absl::NotFoundError("none"));
  finds[2].done(absl::NotFoundError("none"));
  EXPECT_EQ(Status("n1").status(), "HEALTHY");
  EXPECT_EQ(Status("n1").address(), "10.0.0.1:8000");
  Update({});
  EXPECT_EQ(Status("n1").status(), "DRAINING");
  EXPECT_THAT(runtime_.TakeFinds(), IsEmpty()) << "each node is looked up once";
}

TEST_F(ProxyManagerTest, AStartGivenUpMeanwhileEndsTheActorItMade) {
  Update({"n1"});
  std::vector<FakeProxyRuntime::StartRequest> starts = runtime_.TakeStarts();
  ASSERT_THAT(starts, SizeIs(1));
  Update({"n1"}, std::nullopt);
  EXPECT_THAT(runtime_.kills(), ElementsAre("n1"));
  starts[0].done(std::string("10.0.0.1:8000"));
  EXPECT_THAT(runtime_.kills(), ElementsAre("n1", "n1"));
  EXPECT_THAT(manager_->Statuses(), IsEmpty());
}

TEST(ProxyManagerOptionsTest, RequiredPartsAndDurationsAreChecked) {
  FakeProxyRuntime runtime;
  ProxyManagerOptions options;
  options.runtime = &runtime;
  EXPECT_EQ(ProxyManager::Create(options).status().message(),
            "a proxy manager needs a clock, a runtime and a node list");
  options.list_nodes = [] { return absl::StatusOr<std::vector<ServeNode>>(); };
  options.health_check_period = absl::ZeroDuration();
  EXPECT_TRUE(absl::IsInvalidArgument(ProxyManager::Create(options).status()));
  options.health_check_period = absl::Seconds(10);
  options.unhealthy_threshold = 0;
  EXPECT_EQ(ProxyManager::Create(options).status().message(),
            "a proxy manager's unhealthy_threshold must be at least 1, got 0");
}

TEST(HostOfAddressTest, TakesTheHostOfHostPort) {
  EXPECT_EQ(HostOfAddress("10.0.0.1:8000"), "10.0.0.1");
  EXPECT_EQ(HostOfAddress("[::1]:8000"), "::1");
  EXPECT_EQ(HostOfAddress("::1"), "::1");
  EXPECT_EQ(HostOfAddress("node-a"), "node-a");
}

}  // namespace
}  // namespace tessera::serve

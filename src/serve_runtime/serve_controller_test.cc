#include "serve_runtime/serve_controller.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "head/failing_state_store.h"
#include "head/state_store.h"
#include "metrics/metric_registry.h"
#include "serve_runtime/replica_test_fakes.h"
#include "serve_runtime/serve_controller_service.h"
#include "serve_runtime/serve_records.h"

namespace tessera::serve {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::Pair;
using ::testing::SizeIs;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;
using ::testing::UnorderedElementsAreArray;

// ---------------------------------------------------------------------------------------------
// An in-memory ReplicaRuntime: it records every call and lets the test answer it.

struct StartCall {
  ReplicaLaunch launch;
  std::function<void(const std::string&)> pending;
  std::function<void(absl::StatusOr<ReplicaAddress>)> done;
};

struct CallMade {
  std::string replica_id;
  std::string method;
  std::optional<std::string> argument;
  absl::Duration timeout;
  std::function<void(absl::StatusOr<std::string>)> done;
};

struct FindCall {
  std::string replica_id;
  std::function<void(absl::StatusOr<ReplicaAddress>)> done;
};

ReplicaAddress AddressOf(const std::string& replica_id) {
  return ReplicaAddress{"actor-" + replica_id, "10.0.0.1:7000", "node-1"};
}

class FakeRuntime final : public ReplicaRuntime {
 public:
  void Start(const ReplicaLaunch& launch, std::function<void(const std::string&)> pending,
             std::function<void(absl::StatusOr<ReplicaAddress>)> done) override {
    absl::MutexLock lock(&mu_);
    started_.push_back(launch.replica_id);
    starts_.push_back(StartCall{launch, std::move(pending), std::move(done)});
  }
  void Find(const std::string& replica_id,
            std::function<void(absl::StatusOr<ReplicaAddress>)> done) override {
    absl::MutexLock lock(&mu_);
    finds_.push_back(FindCall{replica_id, std::move(done)});
  }
  void Call(const std::string& replica_id, const std::string& method,
            std::optional<std::string> argument, absl::Duration timeout,
            std::function<void(absl::StatusOr<std::string>)> done) override {
    absl::MutexLock lock(&mu_);
    ++calls_made_[method];
    calls_.push_back(CallMade{replica_id, method, std::move(argument), timeout, std::move(done)});
  }
  std::unique_ptr<ReplicaStream> CallStreaming(const std::string&, const std::string&, std::string,
                                               std::function<void(std::string)>,
                                               std::function<void(absl::Status)>) override {
    return nullptr;  // the controller streams nothing
  }
  void Kill(const std::string& replica_id) override {
    absl::MutexLock lock(&mu_);
    kills_.push_back(replica_id);
  }
  std::optional<std::string> DeathOf(const std::string& replica_id) override {
    absl::MutexLock lock(&mu_);
    auto dead = deaths_.find(replica_id);
    if (dead == deaths_.end()) return std::nullopt;
    return dead->second;
  }
  // The cluster's records say the replica's actor died of `cause`.
  void SetDead(const std::string& replica_id, std::string cause) {
    absl::MutexLock lock(&mu_);
    deaths_[replica_id] = std::move(cause);
  }

  std::vector<StartCall> TakeStarts() {
    absl::MutexLock lock(&mu_);
    return std::exchange(starts_, {});
  }
  std::vector<FindCall> TakeFinds() {
    absl::MutexLock lock(&mu_);
    return std::exchange(finds_, {});
  }
  // The unanswered calls of `method`, which are answered by the caller now.
  std::vector<CallMade> TakeCalls(const std::string& method) {
    absl::MutexLock lock(&mu_);
    std::vector<CallMade> taken;
    std::vector<CallMade> kept;
    for (CallMade& call : calls_) (call.method == method ? taken : kept).push_back(std::move(call));
    calls_ = std::move(kept);
    return taken;
  }
  int calls_made(const std::string& method) const {
    absl::MutexLock lock(&mu_);
    auto it = calls_made_.find(method);
    return it == calls_made_.end() ? 0 : it->second;
  }
  std::vector<std::string> started() const {
    absl::MutexLock lock(&mu_);
    return started_;
  }
  std::vector<std::string> kills() const {
    absl::MutexLock lock(&mu_);
    return kills_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<StartCall> starts_ ABSL_GUARDED_BY(mu_);
  std::vector<FindCall> finds_ ABSL_GUARDED_BY(mu_);
  std::vector<CallMade> calls_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> calls_made_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> started_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> kills_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> deaths_ ABSL_GUARDED_BY(mu_);
};

// ---------------------------------------------------------------------------------------------
// Requests.

v1::ServeDeploymentSpec DeploymentSpec(const std::string& name, int replicas,
                                       const std::string& version = "v1") {
  v1::ServeDeploymentSpec spec;
  spec.set_name(name);
  spec.set_code_version(version);
  spec.set_replica_spec("spec-of-" + name + "-" + version);
  spec.set_num_replicas(replicas);
  spec.set_max_ongoing_requests(5);
  spec.set_max_queued_requests(-1);
  spec.set_graceful_shutdown_wait_loop_s(2);
  spec.set_graceful_shutdown_timeout_s(20);
  spec.set_health_check_period_s(10);
  spec.set_health_check_timeout_s(30);
  spec.set_max_constructor_retry_count(20);
  (*spec.mutable_resources()->mutable_amounts())["CPU"] = 1;
  return spec;
}

// The ingress is the first deployment.
v1::ServeApplicationSpec App(const std::string& name, std::optional<std::string> prefix,
                             std::vector<v1::ServeDeploymentSpec> deployments) {
  v1::ServeApplicationSpec app;
  app.set_name(name);
  if (prefix.has_value()) app.set_route_prefix(*prefix);
  app.set_ingress_deployment(deployments.empty() ? "" : deployments.front().name());
  app.set_ingress_takes_http(true);
  for (v1::ServeDeploymentSpec& deployment : deployments) {
    *app.add_deployments() = std::move(deployment);
  }
  return app;
}

v1::DeployServeApplicationsRequest Request(std::vector<v1::ServeApplicationSpec> apps,
                                           bool replace_all = false) {
  v1::DeployServeApplicationsRequest request;
  request.mutable_start()->set_http_host("127.0.0.1");
  request.mutable_start()->set_http_port(8000);
  request.mutable_start()->set_request_timeout_s(5);
  request.mutable_start()->set_proxy_location("EveryNode");
  for (v1::ServeApplicationSpec& app : apps) *request.add_applications() = std::move(app);
  request.set_replace_all(replace_all);
  return request;
}

v1::DeployServeApplicationsRequest OneApp(int replicas = 2, const std::string& version = "v1") {
  return Request({App("app", "/", {DeploymentSpec("d", replicas, version)})});
}

std::vector<std::string> IdsOf(const v1::GetServeReplicasResponse& response) {
  std::vector<std::string> ids;
  for (const v1::ServeReplica& replica : response.replicas()) ids.push_back(replica.replica_id());
  return ids;
}

// ---------------------------------------------------------------------------------------------

class ServeControllerTest : public ::testing::Test {
 protected:
  ServeControllerTest() { controller_ = NewController(&store_, &runtime_); }

  std::unique_ptr<ServeController> NewController(StateStore* store, FakeRuntime* runtime,
                                                 ServeControllerOptions options = {}) {
    options.seed = 11;
    return std::make_unique<ServeController>(store, &clock_, runtime, std::move(options));
  }

  void Deploy(const v1::DeployServeApplicationsRequest& request) {
    const absl::Status status = controller_->Deploy(request);
    ASSERT_TRUE(status.ok()) << status;
  }

  void Loop() { controller_->RunControlLoopOnce(); }

  // Every replica being started starts; their ids.
  std::vector<std::string> StartAll(FakeRuntime& runtime) {
    std::vector<std::string> ids;
    for (StartCall& start : runtime.TakeStarts()) {
      ids.push_back(start.launch.replica_id);
      start.done(AddressOf(start.launch.replica_id));
    }
    return ids;
  }

  // Answers every unanswered call of `method` with `result`; how many there were.
  static int Answer(FakeRuntime& runtime, const std::string& method,
                    const absl::StatusOr<std::string>& result) {
    std::vector<CallMade> calls = runtime.TakeCalls(method);
    for (CallMade& call : calls) call.done(result);
    return static_cast<int>(calls.size());
  }

  // Control loops in which every start, drain, health check and reconfigure succeeds, until
  // nothing is left to do.
  void Settle(ServeController& controller, FakeRuntime& runtime) {
    for (int i = 0; i < 20; ++i) {
      controller.RunControlLoopOnce();
      StartAll(runtime);
      Answer(runtime, "prepare_for_shutdown", "");
      Answer(runtime, "check_health", "");
      Answer(runtime, kReconfigureMethod, "");
    }
    controller.RunControlLoopOnce();
  }
  void Settle() { Settle(*controller_, runtime_); }

  v1::GetServeReplicasResponse Replicas(const std::string& app = "app",
                                        const std::string& deployment = "") {
    absl::StatusOr<v1::GetServeReplicasResponse> replicas =
        controller_->GetReplicas(app, deployment, 0, absl::ZeroDuration());
    EXPECT_TRUE(replicas.ok()) << replicas.status();
    return replicas.ok() ? *replicas : v1::GetServeReplicasResponse();
  }

  static std::optional<v1::ServeApplicationStatus> AppStatus(const ServeController& controller,
                                                             const std::string& name) {
    const v1::ServeStatus status = controller.Status();
    for (const v1::ServeApplicationStatus& app : status.applications()) {
      if (app.name() == name) return app;
    }
    return std::nullopt;
  }
  std::optional<v1::ServeApplicationStatus> AppStatus(const std::string& name = "app") {
    return AppStatus(*controller_, name);
  }

  std::vector<std::string> StoredKeys() {
    std::vector<std::string> keys;
    const auto entries = store_.List(kServeTable);
    EXPECT_TRUE(entries.ok());
    for (const auto& [key, value] : *entries) keys.push_back(key);
    return keys;
  }

  FakeClock clock_;
  InMemoryStateStore store_;
  FakeRuntime runtime_;
  std::unique_ptr<ServeController> controller_;
};

// --- deploy, start-up, replica sets ---------------------------------------------------------

TEST_F(ServeControllerTest, DeployStartsReplicasThatRoutersSeeOnceRunning) {
  Deploy(OneApp(2));
  const v1::GetServeReplicasResponse before = Replicas();
  EXPECT_EQ(before.deployment(), "d");
  EXPECT_THAT(before.replicas(), IsEmpty());
  EXPECT_EQ(before.max_queued_requests(), -1);

  Loop();
  std::vector<StartCall> starts = runtime_.TakeStarts();
  ASSERT_THAT(starts, SizeIs(2));
  for (const StartCall& start : starts) {
    EXPECT_THAT(start.launch.replica_id, StartsWith("app#d#"));
    EXPECT_EQ(start.launch.application, "app");
    EXPECT_EQ(start.launch.deployment, "d");
    EXPECT_EQ(start.launch.replica_spec, "spec-of-d-v1");
    EXPECT_EQ(start.launch.resources.amounts().at("CPU"), 1);
    EXPECT_EQ(start.launch.max_concurrency, 1000);
  }
  EXPECT_EQ(Replicas().version(), before.version()) << "starting replicas take no requests";

  // A long poll on the empty set wakes once a replica runs.
  absl::StatusOr<v1::GetServeReplicasResponse> woken;
  std::thread watcher(
      [&] { woken = controller_->GetReplicas("app", "", before.version(), absl::Hours(1)); });
  for (StartCall& start : starts) start.done(AddressOf(start.launch.replica_id));
  watcher.join();
  ASSERT_TRUE(woken.ok()) << woken.status();
  EXPECT_NE(woken->version(), before.version());
  EXPECT_THAT(woken->replicas(), Not(IsEmpty()));

  const v1::GetServeReplicasResponse after = Replicas("app", "d");
  EXPECT_THAT(IdsOf(after),
              UnorderedElementsAre(starts[0].launch.replica_id, starts[1].launch.replica_id));
  const v1::ServeReplica& replica = after.replicas(0);
  EXPECT_EQ(replica.actor_id(), "actor-" + replica.replica_id());
  EXPECT_EQ(replica.owner_address(), "10.0.0.1:7000");
  EXPECT_EQ(replica.node_id(), "node-1");
  EXPECT_EQ(replica.max_ongoing_requests(), 5);

  absl::StatusOr<RouteTable> routes = controller_->GetRoutes(0, absl::ZeroDuration());
  ASSERT_TRUE(routes.ok());
  ASSERT_THAT(routes->routes, SizeIs(1));
  EXPECT_EQ(routes->routes[0].route_prefix, "/");
  EXPECT_EQ(routes->routes[0].application, "app");
  EXPECT_EQ(routes->routes[0].ingress_deployment, "d");
  EXPECT_TRUE(routes->routes[0].takes_http);
  EXPECT_EQ(routes->routes[0].request_timeout_s, 5);
}

TEST_F(ServeControllerTest, AReplicaOfADeploymentOnSlicesIsLaunchedWithItsSlice) {
  v1::DeployServeApplicationsRequest request = OneApp(1);
  v1::ServeReplicaSlice* slice =
      request.mutable_applications(0)->mutable_deployments(0)->mutable_resources()->mutable_slice();
  slice->mutable_shape()->set_generation(v1::TPU_GENERATION_V6E);
  slice->mutable_shape()->add_dims(4);
  slice->mutable_shape()->add_dims(4);
  (*slice->mutable_per_host())["CPU"] = 1;
  Deploy(request);
  Loop();
  const std::vector<StartCall> starts = runtime_.TakeStarts();
  ASSERT_THAT(starts, SizeIs(1));
  // The runtime reserves it (ActorReplicaRuntime); the controller hands it over as it came.
  ASSERT_TRUE(starts[0].launch.resources.has_slice());
  EXPECT_EQ(starts[0].launch.resources.slice().shape().generation(), v1::TPU_GENERATION_V6E);
  EXPECT_THAT(starts[0].launch.resources.slice().shape().dims(), ElementsAre(4, 4));
  EXPECT_EQ(starts[0].launch.resources.slice().per_host().at("CPU"), 1);
}

TEST_F(ServeControllerTest, StatusHasServeStatusShapes) {
  EXPECT_FALSE(controller_->Status().started());
  EXPECT_THAT(controller_->Status().applications(), IsEmpty());

  Deploy(OneApp(2));
  controller_->SetProxyStatus("node-1", ProxyStatus::kHealthy, "127.0.0.1:8000");
  v1::ServeStatus status = controller_->Status();
  EXPECT_TRUE(status.started());
  EXPECT_EQ(status.target_capacity(), 100);
  ASSERT_THAT(status.proxies(), SizeIs(1));
  EXPECT_EQ(status.proxies(0).node_id(), "node-1");
  EXPECT_EQ(status.proxies(0).status(), "HEALTHY");
  EXPECT_EQ(status.proxies(0).address(), "127.0.0.1:8000");
  ASSERT_THAT(status.applications(), SizeIs(1));
  const v1::ServeApplicationStatus& app = status.applications(0);
  EXPECT_EQ(app.name(), "app");
  EXPECT_EQ(app.status(), "DEPLOYING");
  EXPECT_DOUBLE_EQ(app.last_deployed_time_s(), absl::ToUnixSeconds(clock_.Now()));
  EXPECT_EQ(app.route_prefix(), "/");
  EXPECT_EQ(app.ingress_deployment(), "d");
  ASSERT_THAT(app.deployments(), SizeIs(1));
  EXPECT_EQ(app.deployments(0).name(), "d");
  EXPECT_EQ(app.deployments(0).status(), "UPDATING");
  EXPECT_EQ(app.deployments(0).status_trigger(), "CONFIG_UPDATE_STARTED");
  EXPECT_EQ(app.deployments(0).target_num_replicas(), 2);

  Loop();
  EXPECT_THAT(AppStatus()->deployments(0).replica_states(), ElementsAre(Pair("STARTING", 2)));
  Settle();
  const v1::ServeApplicationStatus running = *AppStatus();
  EXPECT_EQ(running.status(), "RUNNING");
  EXPECT_EQ(running.deployments(0).status(), "HEALTHY");
  EXPECT_EQ(running.deployments(0).status_trigger(), "CONFIG_UPDATE_COMPLETED");
  EXPECT_THAT(running.deployments(0).replica_states(), ElementsAre(Pair("RUNNING", 2)));
  EXPECT_EQ(controller_->start_options()->http_port(), 8000);
}

TEST_F(ServeControllerTest, StatusListsEachReplicaWithItsPlaceAndWhyItWaits) {
  Deploy(OneApp(2));
  Loop();
  std::vector<StartCall> starts = runtime_.TakeStarts();
  ASSERT_THAT(starts, SizeIs(2));
  starts[0].pending("waiting for resources: {CPU: 1}; held by placement group hog");
  ReplicaAddress address = AddressOf(starts[1].launch.replica_id);
  address.pid = 4242;
  starts[1].done(address);
  // The runtime's answers come back as the machine's events.
  const v1::ServeDeploymentStatus deployment = AppStatus()->deployments(0);
  ASSERT_THAT(deployment.replicas(), SizeIs(2));
  std::map<std::string, v1::ServeReplicaDetails> by_id;
  for (const v1::ServeReplicaDetails& replica : deployment.replicas()) {
    by_id[replica.replica_id()] = replica;
  }
  const v1::ServeReplicaDetails& waiting = by_id.at(starts[0].launch.replica_id);
  EXPECT_EQ(waiting.state(), "STARTING");
  EXPECT_EQ(waiting.message(), "waiting for resources: {CPU: 1}; held by placement group hog");
  EXPECT_EQ(waiting.node_id(), "");
  EXPECT_EQ(waiting.actor_id(), "");
  EXPECT_DOUBLE_EQ(waiting.state_since_s(), absl::ToUnixSeconds(clock_.Now()));
  const v1::ServeReplicaDetails& running = by_id.at(starts[1].launch.replica_id);
  EXPECT_EQ(running.state(), "RUNNING");
  EXPECT_EQ(running.message(), "");
  EXPECT_EQ(running.node_id(), "node-1");
  EXPECT_EQ(running.actor_id(), "actor-" + starts[1].launch.replica_id);
  EXPECT_EQ(running.pid(), 4242);
}

TEST_F(ServeControllerTest, RedeployingTheSameConfigRestartsNothing) {
  v1::DeployServeApplicationsRequest request = OneApp(2);
  request.mutable_applications(0)->mutable_deployments(0)->set_user_config_json("{\"a\": 1}");
  Deploy(request);
  Settle();
  const v1::GetServeReplicasResponse before = Replicas();
  ASSERT_THAT(before.replicas(), SizeIs(2));

  // The same goal, its user_config spaced otherwise.
  request.mutable_applications(0)->mutable_deployments(0)->set_user_config_json("{ \"a\" :1 }");
  Deploy(request);
  Settle();
  EXPECT_THAT(runtime_.started(), SizeIs(2));
  EXPECT_THAT(runtime_.kills(), IsEmpty());
  EXPECT_EQ(runtime_.calls_made(kReconfigureMethod), 0);
  EXPECT_EQ(Replicas().version(), before.version());
  EXPECT_EQ(AppStatus()->status(), "RUNNING");
}

TEST_F(ServeControllerTest, ACodeVersionChangeRollsTheReplicas) {
  Deploy(OneApp(2, "v1"));
  Settle();
  const std::vector<std::string> old = IdsOf(Replicas());

  Deploy(OneApp(2, "v2"));
  Loop();
  // A rolling update: one replica at a time (max(int(0.2 x 2), 1)).
  std::vector<CallMade> drains = runtime_.TakeCalls("prepare_for_shutdown");
  ASSERT_THAT(drains, SizeIs(1));
  EXPECT_THAT(old, Contains(drains[0].replica_id));
  EXPECT_EQ(drains[0].timeout, absl::Seconds(20));
  std::vector<StartCall> starts = runtime_.TakeStarts();
  ASSERT_THAT(starts, SizeIs(1));
  EXPECT_EQ(starts[0].launch.replica_spec, "spec-of-d-v2");
  EXPECT_EQ(AppStatus()->status(), "DEPLOYING");

  drains[0].done("");
  EXPECT_THAT(runtime_.kills(), ElementsAre(drains[0].replica_id));
  starts[0].done(AddressOf(starts[0].launch.replica_id));
  Settle();
  const std::vector<std::string> now = IdsOf(Replicas());
  ASSERT_THAT(now, SizeIs(2));
  for (const std::string& id : now) EXPECT_THAT(old, Not(Contains(id)));
  EXPECT_THAT(runtime_.kills(), UnorderedElementsAreArray(old));
  EXPECT_EQ(AppStatus()->deployments(0).status(), "HEALTHY");
}

TEST_F(ServeControllerTest, AMaxOngoingRequestsChangeReachesTheReplicasWithoutRestarting) {
  v1::DeployServeApplicationsRequest request = OneApp(1);
  Deploy(request);
  Settle();
  const std::vector<std::string> ids = IdsOf(Replicas());

  request.mutable_applications(0)->mutable_deployments(0)->set_max_ongoing_requests(7);
  Deploy(request);
  Loop();
  std::vector<CallMade> calls = runtime_.TakeCalls(kReconfigureMethod);
  ASSERT_THAT(calls, SizeIs(1));
  EXPECT_EQ(calls[0].argument,
            "{\"user_config\":null,\"max_ongoing_requests\":7,"
            "\"graceful_shutdown_wait_loop_s\":2.0}");
  calls[0].done("");
  Settle();
  EXPECT_THAT(runtime_.kills(), IsEmpty());
  EXPECT_THAT(IdsOf(Replicas()), UnorderedElementsAreArray(ids));
}

TEST_F(ServeControllerTest, AUserConfigChangeReconfiguresWithoutRestarting) {
  v1::DeployServeApplicationsRequest request = OneApp(2);
  request.mutable_applications(0)->mutable_deployments(0)->set_user_config_json("{\"a\": 1}");
  Deploy(request);
  Settle();
  const std::vector<std::string> ids = IdsOf(Replicas());

  request.mutable_applications(0)->mutable_deployments(0)->set_user_config_json("{\"a\": 2}");
  Deploy(request);
  Loop();
  std::vector<CallMade> calls = runtime_.TakeCalls(kReconfigureMethod);
  ASSERT_THAT(calls, SizeIs(1));  // in batches of the rollout size
  EXPECT_EQ(calls[0].argument,
            "{\"user_config\":{\"a\":2},\"max_ongoing_requests\":5,"
            "\"graceful_shutdown_wait_loop_s\":2.0}");
  EXPECT_THAT(ids, Contains(calls[0].replica_id));
  EXPECT_THAT(AppStatus()->deployments(0).replica_states(), Contains(Pair("UPDATING", 1)));
  calls[0].done("");

  Settle();
  EXPECT_EQ(runtime_.calls_made(kReconfigureMethod), 2);
  EXPECT_THAT(runtime_.started(), SizeIs(2));
  EXPECT_THAT(runtime_.kills(), IsEmpty());
  EXPECT_THAT(IdsOf(Replicas()), UnorderedElementsAreArray(ids));
  EXPECT_EQ(AppStatus()->deployments(0).status(), "HEALTHY");
}

// --- failures ------------------------------------------------------------------------------

TEST_F(ServeControllerTest, ADeadReplicaIsReplaced) {
  Deploy(OneApp(1));
  Settle();
  const std::string dead = IdsOf(Replicas()).at(0);

  clock_.Advance(absl::Seconds(10));  // health_check_period_s
  Loop();
  std::vector<CallMade> checks = runtime_.TakeCalls("check_health");
  ASSERT_THAT(checks, SizeIs(1));
  EXPECT_EQ(checks[0].replica_id, dead);
  EXPECT_EQ(checks[0].timeout, absl::Seconds(30));
  checks[0].done(absl::UnavailableError("the actor died"));
  EXPECT_THAT(Replicas().replicas(), IsEmpty()) << "routers drop it at once";
  EXPECT_EQ(AppStatus()->status(), "UNHEALTHY");

  Loop();
  const std::vector<std::string> replacement = StartAll(runtime_);
  ASSERT_THAT(replacement, SizeIs(1));
  EXPECT_NE(replacement[0], dead);
  Settle();
  EXPECT_THAT(IdsOf(Replicas()), ElementsAre(replacement[0]));
  EXPECT_EQ(AppStatus()->status(), "RUNNING");
}

TEST_F(ServeControllerTest, AReplicaWhoseActorTheClusterSaysIsDeadIsReplacedWithinASecond) {
  Deploy(OneApp(2));
  Settle();
  const std::vector<std::string> ids = IdsOf(Replicas());
  const std::string dead = ids.at(0);

  runtime_.SetDead(dead, "replica " + dead + ": its actor died: SIGKILL");
  clock_.Advance(absl::Seconds(1));  // death_check_period, well before any health check
  Loop();
  EXPECT_THAT(IdsOf(Replicas()), ElementsAre(ids.at(1))) << "routers drop it at once";
  EXPECT_EQ(runtime_.calls_made("check_health"), 0);
  Loop();
  const std::vector<std::string> replacement = StartAll(runtime_);
  ASSERT_THAT(replacement, SizeIs(1));
  EXPECT_NE(replacement[0], dead);
  Settle();
  EXPECT_THAT(IdsOf(Replicas()), UnorderedElementsAre(ids.at(1), replacement[0]));
  EXPECT_EQ(AppStatus()->status(), "RUNNING");
}

TEST_F(ServeControllerTest, ThreeFailedHealthChecksReplaceTheReplica) {
  Deploy(OneApp(1));
  Settle();
  const std::string sick = IdsOf(Replicas()).at(0);

  for (int i = 0; i < 3; ++i) {
    clock_.Advance(absl::Seconds(10));
    Loop();
    EXPECT_EQ(Answer(runtime_, "check_health", absl::InternalError("not today")), 1);
  }
  EXPECT_EQ(AppStatus()->status(), "UNHEALTHY");
  EXPECT_EQ(AppStatus()->deployments(0).status_trigger(), "HEALTH_CHECK_FAILED");

  Loop();
  std::vector<CallMade> drains = runtime_.TakeCalls("prepare_for_shutdown");
  ASSERT_THAT(drains, SizeIs(1));
  EXPECT_EQ(drains[0].replica_id, sick);
  // The replacement starts at once, while the sick one drains.
  const std::vector<std::string> replacement = StartAll(runtime_);
  ASSERT_THAT(replacement, SizeIs(1));
  drains[0].done("");
  Settle();
  EXPECT_THAT(runtime_.kills(), ElementsAre(sick));
  EXPECT_THAT(IdsOf(Replicas()), ElementsAre(replacement[0]));
  EXPECT_EQ(AppStatus()->status(), "RUNNING");
}

// --- delete, shutdown, replace_all ----------------------------------------------------------

TEST_F(ServeControllerTest, DeleteStopsTheReplicasThenForgetsTheApplication) {
  Deploy(Request(
      {App("a", "/a", {DeploymentSpec("d", 1)}), App("b", "/b", {DeploymentSpec("d", 1)})}));
  Settle();
  const absl::StatusOr<RouteTable> routes = controller_->GetRoutes(0, absl::ZeroDuration());
  ASSERT_THAT(routes->routes, SizeIs(2));
  const std::string a_replica = IdsOf(Replicas("a")).at(0);

  ASSERT_TRUE(controller_->Delete({"a", "never-deployed"}).ok());
  EXPECT_EQ(AppStatus("a")->status(), "DELETING");
  const absl::StatusOr<RouteTable> after = controller_->GetRoutes(routes->version, absl::Hours(1));
  ASSERT_THAT(after->routes, SizeIs(1));
  EXPECT_EQ(after->routes[0].application, "b");

  Loop();
  std::vector<CallMade> drains = runtime_.TakeCalls("prepare_for_shutdown");
  ASSERT_THAT(drains, SizeIs(1));
  EXPECT_EQ(drains[0].replica_id, a_replica);
  drains[0].done("");
  Loop();
  EXPECT_FALSE(AppStatus("a").has_value());
  EXPECT_EQ(AppStatus("b")->status(), "RUNNING");
  EXPECT_THAT(StoredKeys(), Not(Contains(ApplicationKey("a"))));
  EXPECT_THAT(StoredKeys(), Not(Contains(DeploymentKey("a", "d"))));
  EXPECT_THAT(StoredKeys(), Contains(DeploymentKey("b", "d")));
  EXPECT_EQ(controller_->GetReplicas("a", "", 0, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(controller_->Delete({""}).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ServeControllerTest, ADeploymentLeftOutOfAnUpdateIsDeleted) {
  Deploy(Request({App("app", "/", {DeploymentSpec("d1", 1), DeploymentSpec("d2", 1)})}));
  Settle();
  const std::string d1_replica = IdsOf(Replicas("app", "d1")).at(0);
  const std::string d2_replica = IdsOf(Replicas("app", "d2")).at(0);

  Deploy(Request({App("app", "/", {DeploymentSpec("d1", 1)})}));
  EXPECT_EQ(controller_->GetReplicas("app", "d2", 0, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_THAT(AppStatus()->deployments(), SizeIs(1));
  Settle();
  EXPECT_THAT(runtime_.kills(), ElementsAre(d2_replica));
  EXPECT_THAT(IdsOf(Replicas("app", "d1")), ElementsAre(d1_replica));
  EXPECT_THAT(StoredKeys(), Not(Contains(DeploymentKey("app", "d2"))));
}

TEST_F(ServeControllerTest, ShutdownDeletesEverythingThenServeIsNotStarted) {
  std::vector<std::optional<v1::ServeStartOptions>> states;
  controller_ = NewController(
      &store_, &runtime_, {.on_serve_state = [&](const std::optional<v1::ServeStartOptions>& s) {
        states.push_back(s);
      }});
  Deploy(OneApp(1));
  ASSERT_THAT(states, SizeIs(1));
  EXPECT_EQ(states[0]->http_port(), 8000);
  Settle();

  ASSERT_TRUE(controller_->Shutdown().ok());
  EXPECT_TRUE(controller_->Status().started()) << "until every replica is stopped";
  EXPECT_EQ(AppStatus()->status(), "DELETING");
  EXPECT_EQ(controller_->Deploy(OneApp(1)).code(), absl::StatusCode::kFailedPrecondition);

  Settle();
  EXPECT_FALSE(controller_->Status().started());
  EXPECT_THAT(controller_->Status().applications(), IsEmpty());
  EXPECT_FALSE(controller_->start_options().has_value());
  ASSERT_THAT(states, SizeIs(2));
  EXPECT_FALSE(states[1].has_value());
  EXPECT_THAT(StoredKeys(), IsEmpty());
  EXPECT_THAT(runtime_.kills(), SizeIs(1));
  EXPECT_TRUE(controller_->Shutdown().ok()) << "nothing runs: a no-op";
  Deploy(OneApp(1));  // Serve starts again
  EXPECT_TRUE(controller_->Status().started());
}

TEST_F(ServeControllerTest, ReplaceAllDeletesTheApplicationsNotNamed) {
  Deploy(Request(
      {App("a", "/a", {DeploymentSpec("d", 1)}), App("b", "/b", {DeploymentSpec("d", 1)})}));
  Settle();

  // c takes the prefix of a, which the same request deletes.
  Deploy(Request({App("c", "/a", {DeploymentSpec("d", 1)})}, /*replace_all=*/true));
  EXPECT_EQ(AppStatus("a")->status(), "DELETING");
  EXPECT_EQ(AppStatus("b")->status(), "DELETING");
  EXPECT_EQ(AppStatus("c")->status(), "DEPLOYING");
  Settle();
  ASSERT_THAT(controller_->Status().applications(), SizeIs(1));
  EXPECT_EQ(AppStatus("c")->status(), "RUNNING");
  EXPECT_THAT(runtime_.kills(), SizeIs(2));
}

// --- refusals -------------------------------------------------------------------------------

TEST_F(ServeControllerTest, AnInvalidRequestChangesNothing) {
  struct Case {
    std::string name;
    std::function<void(v1::DeployServeApplicationsRequest&)> spoil;
    absl::StatusCode code;
    std::string message;
  };
  auto deployment = [](v1::DeployServeApplicationsRequest& r) {
    return r.mutable_applications(0)->mutable_deployments(0);
  };
  const std::vector<Case> cases = {
      {"empty app name", [](auto& r) { r.mutable_applications(0)->set_name(""); },
       absl::StatusCode::kInvalidArgument, "Application name must a non-empty string."},
      {"two apps, one name", [](auto& r) { *r.add_applications() = r.applications(0); },
       absl::StatusCode::kInvalidArgument, "application names must be unique"},
      {"bad prefix", [](auto& r) { r.mutable_applications(0)->set_route_prefix("a"); },
       absl::StatusCode::kInvalidArgument, "Route prefix must start with"},
      {"one prefix twice",
       [](auto& r) {
         *r.add_applications() = r.applications(0);
         r.mutable_applications(1)->set_name("other");
       },
       absl::StatusCode::kAlreadyExists, "Prefix / is being used"},
      {"two deployments, one name",
       [](auto& r) { *r.mutable_applications(0)->add_deployments() = DeploymentSpec("d", 1); },
       absl::StatusCode::kInvalidArgument, "deployment names must be unique"},
      {"no such ingress",
       [](auto& r) { r.mutable_applications(0)->set_ingress_deployment("nope"); },
       absl::StatusCode::kInvalidArgument, "is not one of its deployments"},
      {"no replicas", [&](auto& r) { deployment(r)->set_num_replicas(0); },
       absl::StatusCode::kInvalidArgument, "num_replicas must be at least 1"},
      {"no code version", [&](auto& r) { deployment(r)->set_code_version(""); },
       absl::StatusCode::kInvalidArgument, "code_version must not be empty"},
      {"min above max",
       [&](auto& r) {
         deployment(r)->mutable_autoscaling_config()->set_min_replicas(3);
         deployment(r)->mutable_autoscaling_config()->set_max_replicas(2);
       },
       absl::StatusCode::kInvalidArgument, "autoscaling_config"},
      {"user_config not JSON", [&](auto& r) { deployment(r)->set_user_config_json("{oops"); },
       absl::StatusCode::kInvalidArgument, "user_config_json must be JSON text"},
      {"NaN timeout", [&](auto& r) { deployment(r)->set_health_check_timeout_s(std::nan("")); },
       absl::StatusCode::kInvalidArgument, "health_check_timeout_s must be a finite number"},
      {"negative CPU",
       [&](auto& r) { (*deployment(r)->mutable_resources()->mutable_amounts())["CPU"] = -1; },
       absl::StatusCode::kInvalidArgument, "CPU must be 0 or more"},
      {"bad port", [](auto& r) { r.mutable_start()->set_http_port(70000); },
       absl::StatusCode::kInvalidArgument, "http_port must be between 0 and 65535"},
      {"a slice of no generation",
       [&](auto& r) { deployment(r)->mutable_resources()->mutable_slice(); },
       absl::StatusCode::kInvalidArgument, "slice.shape.generation"},
      {"a slice of a topology v6e has none",
       [&](auto& r) {
         v1::TpuSliceShape* shape =
             deployment(r)->mutable_resources()->mutable_slice()->mutable_shape();
         shape->set_generation(v1::TPU_GENERATION_V6E);
         shape->add_dims(3);
         shape->add_dims(3);
       },
       absl::StatusCode::kInvalidArgument, "slice.shape"},
      {"a slice with bundles",
       [&](auto& r) {
         v1::ServeReplicaResources* resources = deployment(r)->mutable_resources();
         v1::TpuSliceShape* shape = resources->mutable_slice()->mutable_shape();
         shape->set_generation(v1::TPU_GENERATION_V6E);
         shape->add_dims(4);
         shape->add_dims(4);
         (*resources->add_placement_group_bundles()->mutable_amounts())["CPU"] = 1;
       },
       absl::StatusCode::kInvalidArgument, "not allowed with placement_group_bundles"},
      {"a slice of negative per_host",
       [&](auto& r) {
         (*deployment(r)->mutable_resources()->mutable_slice()->mutable_per_host())["CPU"] = -1;
       },
       absl::StatusCode::kInvalidArgument, "slice.per_host: CPU must be 0 or more"},
  };
  for (const Case& c : cases) {
    v1::DeployServeApplicationsRequest request = OneApp(1);
    c.spoil(request);
    const absl::Status status = controller_->Deploy(request);
    EXPECT_EQ(status.code(), c.code) << c.name << ": " << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message)) << c.name;
  }
  Loop();
  EXPECT_FALSE(controller_->Status().started());
  EXPECT_THAT(StoredKeys(), IsEmpty());
  EXPECT_THAT(runtime_.started(), IsEmpty());

  // Against a running application: its prefix is taken.
  Deploy(OneApp(1));
  Settle();
  const absl::Status taken =
      controller_->Deploy(Request({App("other", "/", {DeploymentSpec("e", 1)})}));
  EXPECT_EQ(taken.code(), absl::StatusCode::kAlreadyExists) << taken;
  EXPECT_FALSE(AppStatus("other").has_value());
  EXPECT_THAT(StoredKeys(), Not(Contains(ApplicationKey("other"))));
}

TEST_F(ServeControllerTest, OtherStartOptionsAreRefusedWhileServeRuns) {
  Deploy(OneApp(1));
  v1::DeployServeApplicationsRequest other = Request({App("b", "/b", {DeploymentSpec("d", 1)})});
  other.mutable_start()->set_http_port(8001);
  const absl::Status refused = controller_->Deploy(other);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.message(),
            "Serve is running with http_port 8000 and this deploy asks for 8001: start options "
            "cannot change without serve.shutdown()");
  EXPECT_FALSE(AppStatus("b").has_value());

  // Options a deploy leaves out (0, empty) are not compared.
  other.mutable_start()->set_http_port(0);
  other.mutable_start()->clear_http_host();
  Deploy(other);
  EXPECT_TRUE(AppStatus("b").has_value());
}

TEST_F(ServeControllerTest, AGoalTheStoreRefusesChangesNothing) {
  FailingStateStore failing;
  failing.fail = true;
  controller_ = NewController(&failing, &runtime_);
  const absl::Status refused = controller_->Deploy(OneApp(1));
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(refused.message()), StartsWith("state store unavailable: "));
  Loop();
  EXPECT_FALSE(controller_->Status().started());
  EXPECT_THAT(runtime_.started(), IsEmpty());

  failing.fail = false;
  Deploy(OneApp(1));
  EXPECT_TRUE(controller_->Status().started());
}

// --- recovery -------------------------------------------------------------------------------

TEST_F(ServeControllerTest, ARestartedControllerAdoptsFoundReplicasAndReplacesGoneOnes) {
  Deploy(OneApp(2));
  Settle();
  const std::vector<std::string> ids = IdsOf(Replicas());
  const double deployed_at = AppStatus()->last_deployed_time_s();
  controller_.reset();  // the head goes; the replicas stay

  clock_.Advance(absl::Minutes(1));
  FakeRuntime runtime;
  std::unique_ptr<ServeController> controller = NewController(&store_, &runtime);
  ASSERT_TRUE(controller->Recover().ok());
  EXPECT_TRUE(controller->Status().started());
  const v1::ServeApplicationStatus recovering = *AppStatus(*controller, "app");
  EXPECT_DOUBLE_EQ(recovering.last_deployed_time_s(), deployed_at);
  EXPECT_THAT(recovering.deployments(0).replica_states(), ElementsAre(Pair("RECOVERING", 2)));

  std::vector<FindCall> finds = runtime.TakeFinds();
  ASSERT_THAT(finds, SizeIs(2));
  EXPECT_THAT((std::vector<std::string>{finds[0].replica_id, finds[1].replica_id}),
              UnorderedElementsAreArray(ids));
  finds[0].done(AddressOf(finds[0].replica_id));
  finds[1].done(absl::NotFoundError("no actor by that name"));
  const std::string found = finds[0].replica_id;

  controller->RunControlLoopOnce();
  // The found one is checked at once; the gone one is replaced.
  std::vector<CallMade> checks = runtime.TakeCalls("check_health");
  ASSERT_THAT(checks, SizeIs(1));
  EXPECT_EQ(checks[0].replica_id, found);
  std::vector<StartCall> starts = runtime.TakeStarts();
  ASSERT_THAT(starts, SizeIs(1));
  EXPECT_THAT(ids, Not(Contains(starts[0].launch.replica_id)));
  checks[0].done("");
  absl::StatusOr<v1::GetServeReplicasResponse> replicas =
      controller->GetReplicas("app", "", 0, absl::ZeroDuration());
  EXPECT_THAT(IdsOf(*replicas), ElementsAre(found));
  EXPECT_EQ(replicas->replicas(0).actor_id(), "actor-" + found);

  starts[0].done(AddressOf(starts[0].launch.replica_id));
  Settle(*controller, runtime);
  replicas = controller->GetReplicas("app", "", 0, absl::ZeroDuration());
  EXPECT_THAT(IdsOf(*replicas), UnorderedElementsAre(found, starts[0].launch.replica_id));
  EXPECT_THAT(runtime.kills(), IsEmpty());
  EXPECT_EQ(AppStatus(*controller, "app")->status(), "RUNNING");
}

TEST_F(ServeControllerTest, AReplicaWhoseLookupFailedIsLookedUpAgainOnceItAnswers) {
  Deploy(OneApp(1));
  Settle();
  const std::string id = IdsOf(Replicas()).at(0);
  controller_.reset();

  FakeRuntime runtime;
  std::unique_ptr<ServeController> controller = NewController(&store_, &runtime);
  ASSERT_TRUE(controller->Recover().ok());
  std::vector<FindCall> finds = runtime.TakeFinds();
  ASSERT_THAT(finds, SizeIs(1));
  finds[0].done(absl::UnavailableError("the head's actor table is not up yet"));
  controller->RunControlLoopOnce();
  EXPECT_EQ(Answer(runtime, "check_health", ""), 1);
  absl::StatusOr<v1::GetServeReplicasResponse> replicas =
      controller->GetReplicas("app", "", 0, absl::ZeroDuration());
  EXPECT_THAT(replicas->replicas(), IsEmpty()) << "running, but where is not known";

  finds = runtime.TakeFinds();
  ASSERT_THAT(finds, SizeIs(1));
  EXPECT_EQ(finds[0].replica_id, id);
  finds[0].done(AddressOf(id));
  replicas = controller->GetReplicas("app", "", 0, absl::ZeroDuration());
  EXPECT_THAT(IdsOf(*replicas), ElementsAre(id));
  EXPECT_THAT(runtime.started(), IsEmpty());
}

TEST_F(ServeControllerTest, RecoverySkipsCorruptRecordsAndStopsOrphans) {
  Deploy(OneApp(1));
  Settle();
  controller_.reset();
  ASSERT_TRUE(store_.Put(kServeTable, ApplicationKey("broken"), "{not json").ok());
  ASSERT_TRUE(store_.Put(kServeTable, "stray", "x").ok());
  // A deployment whose application's record is gone: its replica is stopped.
  StoredDeployment orphan{"orphan", "d", 7, {}};
  orphan.records.target.code_version = "v1";
  orphan.records.target_num_replicas = 1;
  orphan.records.replicas.push_back(ReplicaRecord{"orphan#d#aaaaaaaa", "v1", {}, "node-1", false});
  ASSERT_TRUE(store_.Put(kServeTable, DeploymentKey("orphan", "d"), EncodeDeployment(orphan)).ok());

  FakeRuntime runtime;
  std::unique_ptr<ServeController> controller = NewController(&store_, &runtime);
  ASSERT_TRUE(controller->Recover().ok());
  EXPECT_TRUE(AppStatus(*controller, "app").has_value());
  EXPECT_FALSE(AppStatus(*controller, "broken").has_value());
  EXPECT_EQ(AppStatus(*controller, "orphan")->status(), "DELETING");
  for (FindCall& find : runtime.TakeFinds()) find.done(AddressOf(find.replica_id));

  Settle(*controller, runtime);
  EXPECT_THAT(runtime.kills(), ElementsAre("orphan#d#aaaaaaaa"));
  EXPECT_FALSE(AppStatus(*controller, "orphan").has_value());
  EXPECT_EQ(AppStatus(*controller, "app")->status(), "RUNNING");
}

// --- autoscaling, multiplexing, metrics -----------------------------------------------------

v1::DeployServeApplicationsRequest Autoscaling(int min_replicas) {
  v1::DeployServeApplicationsRequest request = OneApp(0);
  v1::ServeAutoscalingConfig* config =
      request.mutable_applications(0)->mutable_deployments(0)->mutable_autoscaling_config();
  config->set_min_replicas(min_replicas);
  config->set_max_replicas(5);
  config->set_target_ongoing_requests(1);
  config->set_upscale_delay_s(0);
  config->set_downscale_delay_s(600);
  return request;
}

v1::ServeAutoscalingSample Sample(double ongoing, double queued) {
  v1::ServeAutoscalingSample sample;
  sample.set_application("app");  // deployment "": the ingress
  sample.set_source("handle-1");
  sample.set_ongoing_requests(ongoing);
  sample.set_queued_requests(queued);
  return sample;
}

TEST_F(ServeControllerTest, AutoscalingSamplesRaiseTheTarget) {
  Deploy(Autoscaling(1));
  Settle();
  ASSERT_THAT(Replicas().replicas(), SizeIs(1));

  controller_->Report(Sample(4, 0));
  Loop();
  EXPECT_THAT(runtime_.TakeStarts(), SizeIs(3));
  EXPECT_EQ(AppStatus()->deployments(0).target_num_replicas(), 4);
  EXPECT_EQ(AppStatus()->deployments(0).status(), "UPSCALING");
  EXPECT_EQ(AppStatus()->deployments(0).status_trigger(), "AUTOSCALING");
}

TEST_F(ServeControllerTest, RequestsQueuedWithNoReplicaStartOneAtOnce) {
  Deploy(Autoscaling(0));
  Settle();
  EXPECT_THAT(runtime_.started(), IsEmpty());

  controller_->Report(Sample(0, 2));
  Loop();
  EXPECT_THAT(runtime_.TakeStarts(), SizeIs(1));
}

TEST_F(ServeControllerTest, MultiplexedModelIdsMoveTheReplicaSet) {
  Deploy(OneApp(1));
  Settle();
  const v1::GetServeReplicasResponse before = Replicas();
  controller_->SetMultiplexedModelIds(before.replicas(0).replica_id(), {"m2", "m1"});
  absl::StatusOr<v1::GetServeReplicasResponse> after =
      controller_->GetReplicas("app", "", before.version(), absl::Hours(1));
  ASSERT_TRUE(after.ok());
  EXPECT_NE(after->version(), before.version());
  EXPECT_THAT(after->replicas(0).multiplexed_model_ids(), ElementsAre("m1", "m2"));
}

TEST_F(ServeControllerTest, ExportsTheControllerMetrics) {
  metrics::MetricRegistry registry;
  controller_ = NewController(&store_, &runtime_, {.registry = &registry});
  ASSERT_TRUE(controller_->RegisterMetrics().ok());
  Deploy(OneApp(2));
  Settle();

  std::map<std::string, metrics::FamilySnapshot> families;
  for (metrics::FamilySnapshot& family : registry.Collect()) {
    families.emplace(family.name, std::move(family));
  }
  const metrics::FamilySnapshot& healthy = families.at(std::string(kReplicaHealthyMetric));
  ASSERT_THAT(healthy.series, SizeIs(2));
  EXPECT_EQ(healthy.series[0].label_values[0], "d");
  EXPECT_EQ(healthy.series[0].label_values[2], "app");
  EXPECT_EQ(healthy.series[0].value, 1);
  EXPECT_EQ(families.at(std::string(kReplicaStartsMetric)).series.at(0).value, 2);
  const metrics::FamilySnapshot& states = families.at(std::string(kReplicaStatesMetric));
  ASSERT_THAT(states.series, SizeIs(1));
  EXPECT_THAT(states.series[0].label_values, ElementsAre("d", "app", "RUNNING"));
  EXPECT_EQ(states.series[0].value, 2);
  EXPECT_GT(families.at(std::string(kControlLoopsMetric)).series.at(0).value, 0);
  EXPECT_FALSE(families.contains(std::string(kAutoscalingTargetReplicasMetric)))
      << "no deployment autoscales";
}

TEST_F(ServeControllerTest, RelaysTheRunningReplicasOwnMetricsOnAPeriod) {
  metrics::MetricRegistry registry;
  controller_ = NewController(&store_, &runtime_, {.registry = &registry});
  ASSERT_TRUE(controller_->RegisterMetrics().ok());
  Deploy(OneApp(2));
  Settle();
  const std::vector<std::string> ids = IdsOf(Replicas());
  ASSERT_THAT(ids, SizeIs(2));
  Answer(runtime_, kMetricsMethod, "");  // the first loop's collection, before any ran

  clock_.Advance(absl::Seconds(10));  // metrics_collect_period
  Loop();
  std::vector<CallMade> calls = runtime_.TakeCalls(kMetricsMethod);
  ASSERT_THAT(calls, SizeIs(2));
  for (CallMade& call : calls) {
    call.done(absl::StrCat("# TYPE ray_vllm_num_requests_running gauge\n",
                           "ray_vllm_num_requests_running{model_name=\"m\"} ",
                           call.replica_id == ids[0] ? 1 : 2, "\n"));
  }
  Loop();
  EXPECT_EQ(runtime_.calls_made(kMetricsMethod), 2) << "asked again only after the period";
  auto relayed = [&registry]() {
    std::map<std::string, double> by_replica;
    for (const metrics::FamilySnapshot& family : registry.Collect()) {
      if (family.name != "ray_vllm_num_requests_running") continue;
      for (const metrics::SeriesSnapshot& series : family.series) {
        by_replica[series.label_values[0]] = series.value;  // ReplicaId, model_name
      }
    }
    return by_replica;
  };
  EXPECT_THAT(relayed(), UnorderedElementsAre(Pair(ids[0], 1), Pair(ids[1], 2)));

  // Deleted, the replicas stop running: their series go with them.
  ASSERT_TRUE(controller_->Delete({"app"}).ok());
  Settle();
  EXPECT_THAT(relayed(), IsEmpty());
}

// --- the loop's thread and the service ------------------------------------------------------

TEST_F(ServeControllerTest, StopEndsTheLoopAndWakesLongPolls) {
  ASSERT_TRUE(controller_->Start().ok());
  const absl::StatusOr<RouteTable> routes = controller_->GetRoutes(0, absl::ZeroDuration());
  ASSERT_TRUE(routes.ok());
  absl::StatusOr<RouteTable> woken;
  std::thread watcher(
      [&] { woken = controller_->GetRoutes(routes->version, absl::InfiniteDuration()); });
  controller_->Stop();
  watcher.join();
  ASSERT_TRUE(woken.ok());
  EXPECT_EQ(woken->version, routes->version);
}

TEST_F(ServeControllerTest, TheServiceChecksRequestsAndMapsErrors) {
  ServeControllerService service(*controller_);
  v1::DeployServeApplicationsRequest too_many = OneApp(1);
  for (int i = 0; i < 1000; ++i) *too_many.add_applications() = too_many.applications(0);
  v1::DeployServeApplicationsResponse deployed;
  grpc::Status status = service.DeployApplications(nullptr, &too_many, &deployed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "the request has 1001 applications; at most 1000 are allowed");

  const v1::DeployServeApplicationsRequest request = OneApp(1);
  EXPECT_TRUE(service.DeployApplications(nullptr, &request, &deployed).ok());
  v1::DeployServeApplicationsRequest other_port = request;
  other_port.mutable_start()->set_http_port(9);
  EXPECT_EQ(service.DeployApplications(nullptr, &other_port, &deployed).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);

  v1::GetServeReplicasRequest get;
  get.set_application("app");
  get.set_wait_s(-1);
  v1::GetServeReplicasResponse replicas;
  EXPECT_EQ(service.GetReplicas(nullptr, &get, &replicas).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  get.set_wait_s(0);
  get.set_application("nope");
  EXPECT_EQ(service.GetReplicas(nullptr, &get, &replicas).error_code(),
            grpc::StatusCode::NOT_FOUND);
  get.set_application("app");
  EXPECT_TRUE(service.GetReplicas(nullptr, &get, &replicas).ok());
  EXPECT_EQ(replicas.deployment(), "d");

  v1::ReportServeMetricsRequest report;
  *report.add_samples() = Sample(1, 0);
  *report.add_samples() = Sample(std::nan(""), 0);
  v1::ReportServeMetricsResponse reported;
  EXPECT_EQ(service.ReportMetrics(nullptr, &report, &reported).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  nlohmann::ordered_json json = service.StatusJson();
  // Compared as values: gtest would print a JSON value as a container of itself.
  EXPECT_TRUE(json["started"].get<bool>());
  EXPECT_EQ(json["applications"][0]["name"].get<std::string>(), "app");
  EXPECT_EQ(json["applications"][0]["deployments"][0]["status"].get<std::string>(), "UPDATING");
}

TEST_F(ServeControllerTest, TheServiceAnswersTheRouteTableAsTheProxiesReadIt) {
  Deploy(OneApp(1));
  ServeControllerService service(*controller_);
  v1::GetServeRoutesRequest request;
  request.set_wait_s(-1);
  v1::GetServeRoutesResponse response;
  EXPECT_EQ(service.GetRoutes(nullptr, &request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  request.set_wait_s(0);
  ASSERT_TRUE(service.GetRoutes(nullptr, &request, &response).ok());
  const RouteTable table = RouteTableFromProto(response);
  const absl::StatusOr<RouteTable> direct = controller_->GetRoutes(0, absl::ZeroDuration());
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(table.version, direct->version);
  ASSERT_THAT(table.routes, SizeIs(1));
  EXPECT_EQ(table.routes[0].route_prefix, "/");
  EXPECT_EQ(table.routes[0].application, "app");
  EXPECT_EQ(table.routes[0].ingress_deployment, "d");
  EXPECT_TRUE(table.routes[0].takes_http);
  EXPECT_EQ(table.routes[0].request_timeout_s, 5);
}

// --- the nodes' proxies ---------------------------------------------------------------------

TEST_F(ServeControllerTest, TheNodesOfTheReplicasGetProxiesUntilServeStops) {
  fakes::FakeProxyRuntime proxies;
  ServeControllerOptions options;
  options.proxies.runtime = &proxies;
  options.proxies.list_nodes = [] {
    return absl::StatusOr<std::vector<ServeNode>>(
        std::vector<ServeNode>{{"node-1", "10.0.0.1"}, {"node-2", "10.0.0.2"}});
  };
  InMemoryStateStore store;
  FakeRuntime runtime;
  std::unique_ptr<ServeController> controller = NewController(&store, &runtime, std::move(options));
  ASSERT_TRUE(controller->Deploy(OneApp(2)).ok());
  Settle(*controller, runtime);
  // Every replica runs on node-1 (the fake runtime's): node-2 gets none.
  std::vector<fakes::FakeProxyRuntime::StartRequest> starts = proxies.TakeStarts();
  ASSERT_THAT(starts, SizeIs(1));
  EXPECT_EQ(starts[0].launch.node_id, "node-1");
  EXPECT_EQ(starts[0].launch.http_host, "127.0.0.1");
  EXPECT_EQ(starts[0].launch.http_port, 8000);
  starts[0].done(std::string("127.0.0.1:8000"));

  controller->SetProxyStatus("head", ProxyStatus::kHealthy, "127.0.0.1:8001");
  const v1::ServeStatus status = controller->Status();
  ASSERT_THAT(status.proxies(), SizeIs(2));
  EXPECT_EQ(status.proxies(0).node_id(), "head");
  EXPECT_EQ(status.proxies(1).node_id(), "node-1");
  EXPECT_EQ(status.proxies(1).status(), "HEALTHY");
  EXPECT_EQ(status.proxies(1).address(), "127.0.0.1:8000");

  ASSERT_TRUE(controller->Shutdown().ok());
  Settle(*controller, runtime);
  EXPECT_FALSE(controller->Status().started());
  EXPECT_THAT(proxies.kills(), ElementsAre("node-1"));
}

// --- records --------------------------------------------------------------------------------

TEST(ServeRecordsTest, RecordsReadBackAsWritten) {
  StoredDeployment deployment{"a/b", "d", 42, {}};
  DeploymentRecords& records = deployment.records;
  records.target.code_version = "v3";
  records.target.replica_config.user_config = "{\"k\":[1,2]}";
  records.target.num_replicas = 0;
  AutoscalingConfig autoscaling;
  autoscaling.min_replicas = 0;
  autoscaling.initial_replicas = 2;
  autoscaling.downscale_to_zero_delay_s = 30;
  records.target.autoscaling_config = autoscaling;
  records.target.target_capacity = {50.0, TargetCapacityDirection::kDown};
  records.target_num_replicas = 2;
  records.replica_ids_drawn = 9;
  records.startup_failures = 1;
  records.last_startup_error = "boom\n\xff";  // not UTF-8: mended, not thrown on
  records.replicas.push_back(ReplicaRecord{"a/b#d#x", "v3", {}, "node-2", true});
  const std::string key = DeploymentKey("a/b", "d");
  EXPECT_EQ(key, "deployment/3:a/b/d");
  absl::StatusOr<StoredDeployment> read = DecodeDeployment(key, EncodeDeployment(deployment));
  ASSERT_TRUE(read.ok()) << read.status();
  records.last_startup_error = read->records.last_startup_error;  // the mended text
  EXPECT_EQ(read->records, records);
  EXPECT_EQ(read->replica_id_seed, 42u);

  StoredApplication app{App("a/b", "/x", {DeploymentSpec("d", 1)}), 12.5, true};
  absl::StatusOr<StoredApplication> app_read =
      DecodeApplication(ApplicationKey("a/b"), EncodeApplication(app));
  ASSERT_TRUE(app_read.ok()) << app_read.status();
  EXPECT_EQ(app_read->spec.SerializeAsString(), app.spec.SerializeAsString());
  EXPECT_EQ(app_read->last_deployed_time_s, 12.5);
  EXPECT_TRUE(app_read->deleting);

  StoredStart start;
  start.options.set_http_port(8123);
  start.shutting_down = true;
  absl::StatusOr<StoredStart> start_read = DecodeStart(kStartKey, EncodeStart(start));
  ASSERT_TRUE(start_read.ok());
  EXPECT_EQ(start_read->options.http_port(), 8123);
  EXPECT_TRUE(start_read->shutting_down);
}

TEST(ServeRecordsTest, ACorruptRecordIsOneLineNamingItsKey) {
  EXPECT_EQ(DecodeApplication("application/x", "nope").status().message(),
            "state store table serve, key \"application/x\": not a JSON object");
  const absl::Status moved =
      DecodeApplication("application/x",
                        EncodeApplication({App("y", "/", {DeploymentSpec("d", 1)}), 0, false}))
          .status();
  EXPECT_EQ(moved.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(moved.message()), HasSubstr("holds application \"y\""));
  EXPECT_THAT(
      std::string(DecodeDeployment("deployment/1:a/d", "{\"format\": 2}").status().message()),
      HasSubstr("format is not 1"));
  const absl::Status missing =
      DecodeDeployment("deployment/1:a/d",
                       "{\"format\": 1, \"application\": \"a\", \"deployment\": \"d\", "
                       "\"replica_id_seed\": 1, \"records\": {\"target\": {}}}")
          .status();
  EXPECT_THAT(std::string(missing.message()),
              HasSubstr("records.target.code_version must be a string"));

  const ServeRecords all =
      DecodeServeRecords({{"application/x", "nope"}, {"start", EncodeStart({})}, {"other", "{}"}});
  EXPECT_TRUE(all.start.has_value());
  EXPECT_THAT(all.applications, IsEmpty());
  EXPECT_THAT(all.errors, SizeIs(2));
}

}  // namespace
}  // namespace tessera::serve

// Unit tests of the head's state and service with a FakeClock and fake node agents: registration,
// heartbeats, death after the timeout with bundles re-placed, two-phase commit rollback,
// request-id deduplication, malformed and oversized requests, head-restart registration, job
// retention and paged listings.
#include "head/head_service.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "base/string_util.h"
#include "gtest/gtest.h"
#include "hardware/node_label_keys.h"
#include "head/failing_state_store.h"
#include "head/head_service_test_util.h"
#include "head/request_limits.h"
#include "rpc/state_names.h"
#include "scheduling/scheduling_test_util.h"
#include "wire/proto_convert.h"

namespace tessera {
namespace {

using head_testing::FakeAgent;
using head_testing::SetV6e4x4;
using testing_util::Res;
using testing_util::Spec;

class HeadServiceTest : public ::testing::Test {
 protected:
  HeadServiceTest() { head_ = std::make_unique<HeadService>(Options()); }

  // The options every test's head runs with; a test that needs others starts its own head.
  HeadServiceOptions Options() {
    HeadServiceOptions options;
    options.heartbeat_interval = absl::Milliseconds(500);
    options.node_timeout = absl::Seconds(5);
    options.clock = &clock_;
    options.store = &store_;
    options.agent_clients = [this](const std::string& node, const std::string&) {
      auto& agent = agents_[node];
      if (agent == nullptr) agent = std::make_shared<FakeAgent>();
      return agent;
    };
    return options;
  }

  v1::RegisterNodeRequest NodeRequest(const std::string& id, std::string_view resources,
                                      LabelSet labels = {}, std::string incarnation = "i1") {
    v1::RegisterNodeRequest request;
    NodeSpec spec = Spec(id, resources, std::move(labels));
    wire::NodeToProto(spec, "127.0.0.1:1", incarnation, request.mutable_node());
    return request;
  }

  void Register(const std::string& id, std::string_view resources = "CPU=4", LabelSet labels = {}) {
    v1::RegisterNodeResponse response;
    grpc::Status status = head_->nodes().RegisterNode(
        nullptr, &(*requests_.emplace(id, NodeRequest(id, resources, labels)).first).second,
        &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.heartbeat_interval_ms(), 500);
    EXPECT_EQ(response.dead_after_ms(), 5000);
    EXPECT_EQ(response.release_size(), 0);
  }

  bool Beat(const std::string& id, std::string incarnation = "i1") {
    v1::HeartbeatRequest request;
    request.set_node_id(id);
    request.set_incarnation(incarnation);
    v1::HeartbeatResponse response;
    EXPECT_TRUE(head_->nodes().Heartbeat(nullptr, &request, &response).ok());
    return response.known();
  }

  v1::PlacementGroupInfo Create(const std::string& name, v1::PlacementStrategy strategy,
                                const std::vector<std::string>& bundles,
                                grpc::Status* status_out = nullptr,
                                const std::string& request_id = "") {
    v1::CreatePlacementGroupRequest request;
    request.set_name(name);
    request.set_strategy(strategy);
    request.set_request_id(request_id);
    for (const std::string& b : bundles) {
      wire::ResourcesToProto(Res(b), request.mutable_primary()->add_bundles()->mutable_resources());
    }
    v1::PlacementGroupInfo info;
    grpc::Status status = head_->reservations().CreatePlacementGroup(nullptr, &request, &info);
    if (status_out != nullptr) {
      *status_out = status;
    } else {
      EXPECT_TRUE(status.ok()) << status.error_message();
    }
    return info;
  }

  v1::PlacementGroupInfo Find(const std::string& name) {
    v1::ListPlacementGroupsResponse list;
    v1::ListRequest request;
    EXPECT_TRUE(head_->reservations().ListPlacementGroups(nullptr, &request, &list).ok());
    for (const auto& g : list.groups()) {
      if (g.name() == name) return g;
    }
    return v1::PlacementGroupInfo();
  }

  v1::ClusterStatus Status() {
    v1::ClusterStatus status;
    v1::ListRequest request;
    EXPECT_TRUE(head_->admin().GetClusterStatus(nullptr, &request, &status).ok());
    return status;
  }

  int64_t Used(const std::string& resource) {
    v1::ClusterStatus status = Status();
    for (const auto& u : status.usage()) {
      if (u.resource() == resource) return u.used_raw();
    }
    return 0;
  }

  // Every bundle every fake agent holds, as "group[index]@node" (committed ones only).
  std::set<std::string> Held(bool committed_only = false) {
    std::set<std::string> out;
    for (const auto& [node, agent] : agents_) {
      for (const auto& [key, held] : agent->held()) {
        if (committed_only && !held.committed) continue;
        out.insert(absl::StrCat(key.first, "[", key.second, "]@", node));
      }
    }
    return out;
  }

  FakeClock clock_;
  InMemoryStateStore store_;
  std::map<std::string, std::shared_ptr<FakeAgent>> agents_;
  std::map<std::string, v1::RegisterNodeRequest> requests_;
  std::unique_ptr<HeadService> head_;
};

TEST_F(HeadServiceTest, RegisterAndHeartbeat) {
  Register("n1", "CPU=4,memory=8GiB");
  EXPECT_TRUE(Beat("n1"));
  EXPECT_FALSE(Beat("n1", "other-incarnation"));
  EXPECT_FALSE(Beat("nobody"));
  v1::ListNodesResponse nodes;
  v1::ListRequest list;
  ASSERT_TRUE(head_->nodes().ListNodes(nullptr, &list, &nodes).ok());
  ASSERT_EQ(nodes.nodes_size(), 1);
  EXPECT_EQ(nodes.nodes(0).state(), v1::NODE_STATE_ALIVE);
  EXPECT_EQ(nodes.nodes(0).available().raw().at("CPU"), 40000);
  EXPECT_TRUE(store_.Get(kNodesTable, "n1")->has_value());
}

TEST_F(HeadServiceTest, HeartbeatLeasesAreMirroredAndReleased) {
  Register("n1", "CPU=4");
  v1::HeartbeatRequest beat;
  beat.set_node_id("n1");
  beat.set_incarnation("i1");
  v1::LeaseInfo* lease = beat.add_leases();
  lease->set_lease_id("l1");
  wire::ResourcesToProto(Res("CPU=3"), lease->mutable_allocation()->mutable_resources());
  v1::HeartbeatResponse response;
  ASSERT_TRUE(head_->nodes().Heartbeat(nullptr, &beat, &response).ok());
  EXPECT_EQ(Used("CPU"), 30000);
  // The same lease again is not counted twice.
  ASSERT_TRUE(head_->nodes().Heartbeat(nullptr, &beat, &response).ok());
  EXPECT_EQ(Used("CPU"), 30000);
  // A group that needs more than is left waits.
  v1::PlacementGroupInfo info = Create("big", v1::PLACEMENT_STRATEGY_PACK, {"CPU=2"});
  EXPECT_EQ(info.state(), v1::PLACEMENT_GROUP_STATE_PENDING);
  // The lease ends: the next heartbeat leaves it out, and the waiting group is placed.
  beat.clear_leases();
  ASSERT_TRUE(head_->nodes().Heartbeat(nullptr, &beat, &response).ok());
  EXPECT_EQ(Used("CPU"), 0);
  head_->Tick();
  EXPECT_EQ(Find("big").state(), v1::PLACEMENT_GROUP_STATE_CREATED);
}

TEST_F(HeadServiceTest, PendingPicksNameTheHoldersAndADeadNodeItsLostLeases) {
  Register("n1", "CPU=4");
  v1::HeartbeatRequest beat;
  beat.set_node_id("n1");
  beat.set_incarnation("i1");
  v1::LeaseInfo* lease = beat.add_leases();
  lease->set_lease_id("l-n1-7");
  wire::ResourcesToProto(Res("CPU=2"), lease->mutable_allocation()->mutable_resources());
  v1::HeartbeatResponse response;
  ASSERT_TRUE(head_->nodes().Heartbeat(nullptr, &beat, &response).ok());
  ASSERT_EQ(Create("pg", v1::PLACEMENT_STRATEGY_PACK, {"CPU=1"}).state(),
            v1::PLACEMENT_GROUP_STATE_CREATED);
  v1::PickNodeRequest pick;
  wire::ResourcesToProto(Res("CPU=2"), pick.mutable_request()->mutable_resources());
  v1::PickNodeResponse picked;
  ASSERT_TRUE(head_->nodes().PickNode(nullptr, &pick, &picked).ok());
  EXPECT_EQ(picked.status(), v1::PICK_STATUS_PENDING);
  EXPECT_EQ(picked.explanation(),
            "1 node could fit CPU=2; it is busy (available CPU: 1; held by lease l-n1-7, "
            "placement group pg)");
  // n1 goes silent: the event says which work was lost with it.
  for (int i = 0; i < 12; ++i) {
    clock_.Advance(absl::Milliseconds(500));
    head_->Tick();
  }
  bool named = false;
  for (const std::string& e : head_->events()) {
    named = named || (absl::StrContains(e, "node n1 declared dead") &&
                      absl::StrContains(e, "work lost: lease l-n1-7"));
  }
  EXPECT_TRUE(named);
}

TEST_F(HeadServiceTest, CreateCommitsOnTheAgentsAndRemoveCancels) {
  Register("n1");
  Register("n2");
  v1::PlacementGroupInfo info =
      Create("pg", v1::PLACEMENT_STRATEGY_STRICT_SPREAD, {"CPU=1", "CPU=1"});
  EXPECT_EQ(info.state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  ASSERT_EQ(info.bundles_size(), 2);
  std::set<std::string> nodes = {info.bundles(0).node_id(), info.bundles(1).node_id()};
  EXPECT_EQ(nodes, (std::set<std::string>{"n1", "n2"}));
  EXPECT_EQ(Held(true), (std::set<std::string>{absl::StrCat("pg[0]@", info.bundles(0).node_id()),
                                               absl::StrCat("pg[1]@", info.bundles(1).node_id())}));
  EXPECT_EQ(Used("CPU"), 20000);

  v1::RemovePlacementGroupRequest remove;
  remove.set_name("pg");
  v1::RemovePlacementGroupResponse removed;
  ASSERT_TRUE(head_->reservations().RemovePlacementGroup(nullptr, &remove, &removed).ok());
  EXPECT_EQ(removed.released_size(), 2);
  EXPECT_TRUE(Held().empty());
  EXPECT_EQ(Used("CPU"), 0);
  EXPECT_EQ(head_->reservations().RemovePlacementGroup(nullptr, &remove, &removed).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(HeadServiceTest, AGroupShowsWhatEachBundleReservesPlacedOrWaiting) {
  Register("n1");
  Create("placed", v1::PLACEMENT_STRATEGY_PACK, {"CPU=1", "CPU=2"});
  Create("waiting", v1::PLACEMENT_STRATEGY_PACK, {"CPU=64"});
  for (const auto& [name, shapes] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"placed", {10000, 20000}}, {"waiting", {640000}}}) {
    const v1::PlacementGroupInfo info = Find(name);
    ASSERT_EQ(info.bundle_shapes_size(), static_cast<int>(shapes.size())) << name;
    for (size_t i = 0; i < shapes.size(); ++i) {
      EXPECT_EQ(info.bundle_shapes(i).raw().at("CPU"), shapes[i]) << name << " bundle " << i;
    }
  }
  EXPECT_EQ(Find("waiting").state(), v1::PLACEMENT_GROUP_STATE_INFEASIBLE);
}

TEST_F(HeadServiceTest, OneFailingPrepareRollsBackEverythingAndRetriesLater) {
  Register("n1");
  Register("n2");
  Register("n3");
  agents_["n2"]->FailPrepare(absl::UnavailableError("agent n2 is restarting"));
  v1::PlacementGroupInfo info =
      Create("pg", v1::PLACEMENT_STRATEGY_STRICT_SPREAD, {"CPU=1", "CPU=1", "CPU=1"});
  EXPECT_EQ(info.state(), v1::PLACEMENT_GROUP_STATE_PENDING);
  EXPECT_TRUE(absl::StrContains(info.explanation(), "prepare on n2 failed")) << info.explanation();
  // Nothing is held anywhere: not on any agent, not in the head's view.
  EXPECT_TRUE(Held().empty());
  EXPECT_EQ(Used("CPU"), 0);
  EXPECT_GT(agents_["n1"]->cancels() + agents_["n3"]->cancels(), 0);

  // The agent recovers; the group is placed at a later tick.
  agents_["n2"]->FailPrepare(absl::OkStatus());
  clock_.Advance(absl::Seconds(2));
  for (const char* n : {"n1", "n2", "n3"}) Beat(n);
  head_->Tick();
  EXPECT_EQ(Find("pg").state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(Held(true).size(), 3u);
  EXPECT_EQ(Used("CPU"), 30000);
}

TEST_F(HeadServiceTest, FailingCommitRollsBackToo) {
  Register("n1");
  Register("n2");
  agents_["n1"]->FailCommit(absl::DeadlineExceededError("commit timed out"));
  v1::PlacementGroupInfo info =
      Create("pg", v1::PLACEMENT_STRATEGY_STRICT_SPREAD, {"CPU=1", "CPU=1"});
  EXPECT_EQ(info.state(), v1::PLACEMENT_GROUP_STATE_PENDING);
  EXPECT_TRUE(Held().empty());
  EXPECT_EQ(Used("CPU"), 0);
}

TEST_F(HeadServiceTest, DeadNodeBundlesAreReplacedAndNothingElseIsDisturbed) {
  Register("n1");
  Register("n2");
  Register("n3");
  v1::PlacementGroupInfo spread =
      Create("spread", v1::PLACEMENT_STRATEGY_STRICT_SPREAD, {"CPU=1", "CPU=1"});
  ASSERT_EQ(spread.state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  const std::string victim = spread.bundles(0).node_id();
  const std::string survivor = spread.bundles(1).node_id();
  // Another group, on the survivor only.
  v1::PlacementGroupInfo pinned = Create("pinned", v1::PLACEMENT_STRATEGY_PACK, {"CPU=3"});
  ASSERT_EQ(pinned.state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  // A job running on the victim.
  v1::RecordJobRequest job;
  job.mutable_job()->set_job_id("job-1");
  job.mutable_job()->set_node_id(victim);
  job.mutable_job()->set_state(v1::JOB_STATE_RUNNING);
  v1::JobInfo recorded;
  ASSERT_TRUE(head_->jobs().RecordJob(nullptr, &job, &recorded).ok());
  std::set<std::string> before = Held(true);
  int survivor_prepares = agents_[survivor]->prepares();

  // Everyone but the victim keeps beating past the timeout.
  for (int i = 0; i < 12; ++i) {
    clock_.Advance(absl::Milliseconds(500));
    for (const char* n : {"n1", "n2", "n3"}) {
      if (n != victim) Beat(n);
    }
    head_->Tick();
  }
  v1::ListNodesResponse nodes;
  v1::ListRequest list;
  ASSERT_TRUE(head_->nodes().ListNodes(nullptr, &list, &nodes).ok());
  for (const auto& node : nodes.nodes()) {
    EXPECT_EQ(node.state(),
              node.node().node_id() == victim ? v1::NODE_STATE_DEAD : v1::NODE_STATE_ALIVE);
  }
  v1::PlacementGroupInfo replaced = Find("spread");
  EXPECT_EQ(replaced.state(), v1::PLACEMENT_GROUP_STATE_CREATED) << replaced.explanation();
  EXPECT_NE(replaced.bundles(0).node_id(), victim);
  EXPECT_NE(replaced.bundles(0).node_id(), survivor);  // still strictly spread
  EXPECT_EQ(replaced.bundles(1).node_id(), survivor);  // the surviving bundle did not move
  // The survivor saw no new prepare; the other group is untouched.
  EXPECT_EQ(agents_[survivor]->prepares(), survivor_prepares);
  EXPECT_EQ(Find("pinned").bundles(0).node_id(), pinned.bundles(0).node_id());
  std::set<std::string> after = Held(true);
  EXPECT_TRUE(after.count(absl::StrCat("spread[0]@", replaced.bundles(0).node_id())));
  EXPECT_TRUE(after.count(absl::StrCat("spread[1]@", survivor)));
  EXPECT_TRUE(after.count(absl::StrCat("pinned[0]@", pinned.bundles(0).node_id())));

  v1::ListJobsResponse jobs;
  ASSERT_TRUE(head_->jobs().ListJobs(nullptr, &list, &jobs).ok());
  ASSERT_EQ(jobs.jobs_size(), 1);
  EXPECT_EQ(jobs.jobs(0).state(), v1::JOB_STATE_FAILED);
  EXPECT_TRUE(absl::StrContains(jobs.jobs(0).exit_reason(), victim));
  bool event = false;
  for (const std::string& e : head_->events()) {
    event = event || absl::StrContains(e, absl::StrCat("node ", victim, " declared dead"));
  }
  EXPECT_TRUE(event);
}

TEST_F(HeadServiceTest, MissingHeartbeatsWithinTimeoutKeepTheNodeAlive) {
  // The head ticks on time throughout (a late tick does not count its gap: see the
  // reconciliation tests at the end).
  auto advance_ticking = [&](absl::Duration d) {
    for (absl::Duration done; done < d; done += absl::Milliseconds(500)) {
      clock_.Advance(absl::Milliseconds(500));
      head_->Tick();
    }
  };
  Register("n1");
  advance_ticking(absl::Seconds(4));
  EXPECT_TRUE(Beat("n1"));
  advance_ticking(absl::Seconds(4));
  EXPECT_TRUE(Beat("n1"));
  advance_ticking(absl::Seconds(6));
  EXPECT_FALSE(Beat("n1"));  // dead: the agent must register again
}

TEST_F(HeadServiceTest, RequestIdDeduplicatesCreateAndRemove) {
  Register("n1");
  grpc::Status status;
  v1::PlacementGroupInfo first =
      Create("pg", v1::PLACEMENT_STRATEGY_PACK, {"CPU=1"}, &status, "req-1");
  ASSERT_TRUE(status.ok());
  v1::PlacementGroupInfo second =
      Create("pg", v1::PLACEMENT_STRATEGY_PACK, {"CPU=1"}, &status, "req-1");
  ASSERT_TRUE(status.ok()) << status.error_message();  // not ALREADY_EXISTS: same request
  EXPECT_EQ(first.SerializeAsString(), second.SerializeAsString());
  EXPECT_EQ(agents_["n1"]->prepares(), 1);
  EXPECT_EQ(Used("CPU"), 10000);
  // A different request id with the same name is a second create.
  Create("pg", v1::PLACEMENT_STRATEGY_PACK, {"CPU=1"}, &status, "req-2");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ALREADY_EXISTS);

  v1::RemovePlacementGroupRequest remove;
  remove.set_name("pg");
  remove.set_request_id("rm-1");
  v1::RemovePlacementGroupResponse r1, r2;
  ASSERT_TRUE(head_->reservations().RemovePlacementGroup(nullptr, &remove, &r1).ok());
  ASSERT_TRUE(head_->reservations().RemovePlacementGroup(nullptr, &remove, &r2).ok());
  EXPECT_EQ(r1.SerializeAsString(), r2.SerializeAsString());
  EXPECT_EQ(Used("CPU"), 0);
}

TEST_F(HeadServiceTest, MalformedRequestsAreInvalidArgumentAndChangeNothing) {
  Register("n1");
  grpc::Status status;
  Create("bad", static_cast<v1::PlacementStrategy>(42), {"CPU=1"}, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  Create("bad", v1::PLACEMENT_STRATEGY_PACK, {}, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::CreatePlacementGroupRequest negative;
  negative.set_name("neg");
  (*negative.mutable_primary()->add_bundles()->mutable_resources()->mutable_raw())["CPU"] = -5;
  v1::PlacementGroupInfo info;
  status = head_->reservations().CreatePlacementGroup(nullptr, &negative, &info);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "negative")) << status.error_message();
  EXPECT_EQ(status.error_message().find('\n'), std::string::npos);

  v1::RegisterNodeRequest bad_node = NodeRequest("n2", "CPU=1");
  (*bad_node.mutable_node()->mutable_resources()->mutable_raw())["GPU"] = -1;
  v1::RegisterNodeResponse registered;
  EXPECT_EQ(head_->nodes().RegisterNode(nullptr, &bad_node, &registered).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  v1::RegisterNodeRequest no_address = NodeRequest("n3", "CPU=1");
  no_address.mutable_node()->clear_address();
  EXPECT_EQ(head_->nodes().RegisterNode(nullptr, &no_address, &registered).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  v1::PickNodeRequest pick;
  pick.mutable_request()->set_strategy(static_cast<v1::Strategy>(9));
  v1::PickNodeResponse picked;
  EXPECT_EQ(head_->nodes().PickNode(nullptr, &pick, &picked).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  v1::ReserveSlicesRequest slices;
  slices.set_name("s");
  v1::SliceGroupInfo slice_info;
  EXPECT_EQ(head_->reservations().ReserveSlices(nullptr, &slices, &slice_info).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  v1::RecordJobRequest job;
  v1::JobInfo job_info;
  EXPECT_EQ(head_->jobs().RecordJob(nullptr, &job, &job_info).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  // Nothing changed: one node, no groups, nothing held.
  v1::ClusterStatus s = Status();
  EXPECT_EQ(s.nodes_size(), 1);
  EXPECT_EQ(s.placement_groups_size(), 0);
  EXPECT_EQ(Used("CPU"), 0);
  EXPECT_TRUE(Held().empty());
}

TEST_F(HeadServiceTest, RegisterAfterHeadRestartReleasesUnknownBundlesWithAnEvent) {
  v1::RegisterNodeRequest request = NodeRequest("n1", "CPU=4");
  v1::HeldBundle* held = request.add_bundles();
  held->set_placement_group("pg-3");
  held->set_bundle_index(0);
  held->set_committed(true);
  wire::ResourcesToProto(Res("CPU=1"), held->mutable_allocation()->mutable_resources());
  v1::LeaseInfo* lease = request.add_leases();
  lease->set_lease_id("l1");
  wire::ResourcesToProto(Res("CPU=2"), lease->mutable_allocation()->mutable_resources());
  v1::RegisterNodeResponse response;
  ASSERT_TRUE(head_->nodes().RegisterNode(nullptr, &request, &response).ok());
  ASSERT_EQ(response.release_size(), 1);
  EXPECT_EQ(response.release(0).placement_group(), "pg-3");
  // The lease survives (mirrored); the released bundle is not counted.
  EXPECT_EQ(Used("CPU"), 20000);
  std::vector<std::string> events = head_->events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0],
            "placement group pg-3 was lost with the head restart; its bundles on n1 were released");
  EXPECT_EQ(Status().events_size(), 1);
}

TEST_F(HeadServiceTest, KnownBundlesAreKeptOnReRegistration) {
  Register("n1");
  v1::PlacementGroupInfo info = Create("pg", v1::PLACEMENT_STRATEGY_PACK, {"CPU=1"});
  ASSERT_EQ(info.state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  v1::RegisterNodeRequest again = requests_["n1"];
  v1::HeldBundle* held = again.add_bundles();
  held->set_placement_group("pg");
  held->set_bundle_index(0);
  *held->mutable_allocation() = info.bundles(0).allocation();
  v1::RegisterNodeResponse response;
  ASSERT_TRUE(head_->nodes().RegisterNode(nullptr, &again, &response).ok());
  EXPECT_EQ(response.release_size(), 0);
  EXPECT_EQ(Find("pg").state(), v1::PLACEMENT_GROUP_STATE_CREATED);
}

TEST_F(HeadServiceTest, AgentRestartDropsWhatTheOldIncarnationHeld) {
  Register("n1");
  Register("n2");
  v1::PlacementGroupInfo info = Create("pg", v1::PLACEMENT_STRATEGY_PACK, {"CPU=4"});
  ASSERT_EQ(info.state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  const std::string node = info.bundles(0).node_id();
  v1::RegisterNodeRequest restarted = NodeRequest(node, "CPU=4", {}, "i2");
  v1::RegisterNodeResponse response;
  ASSERT_TRUE(head_->nodes().RegisterNode(nullptr, &restarted, &response).ok());
  head_->Tick();
  v1::PlacementGroupInfo moved = Find("pg");
  EXPECT_EQ(moved.state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(Used("CPU"), 40000);  // held once, not twice
}

TEST_F(HeadServiceTest, PickNodeKeepsCpuWorkOffAcceleratorNodesUnlessTurnedOff) {
  auto pick_cpu = [&] {
    v1::PickNodeRequest pick;
    wire::ResourcesToProto(Res("CPU=1"), pick.mutable_request()->mutable_resources());
    v1::PickNodeResponse picked;
    EXPECT_TRUE(head_->nodes().PickNode(nullptr, &pick, &picked).ok());
    return picked.node_id();
  };
  // The GPU node registers last, so it would win the pack order's tie among empty nodes.
  Register("cpu", "CPU=4");
  Register("gpu", "CPU=4,GPU=2");
  EXPECT_EQ(pick_cpu(), "cpu");
  HeadServiceOptions options = Options();
  options.scheduling.avoid_accelerator_nodes = false;
  head_ = std::make_unique<HeadService>(std::move(options));
  requests_.clear();
  Register("cpu", "CPU=4");
  Register("gpu", "CPU=4,GPU=2");
  EXPECT_EQ(pick_cpu(), "gpu");
}

TEST_F(HeadServiceTest, PickNodeHonoursExcludeAndBundles) {
  Register("n1");
  Register("n2");
  v1::PickNodeRequest pick;
  wire::ResourcesToProto(Res("CPU=1"), pick.mutable_request()->mutable_resources());
  v1::PickNodeResponse picked;
  ASSERT_TRUE(head_->nodes().PickNode(nullptr, &pick, &picked).ok());
  EXPECT_EQ(picked.status(), v1::PICK_STATUS_PLACED);
  std::string first = picked.node_id();
  EXPECT_EQ(picked.address(), "127.0.0.1:1");
  pick.add_exclude_node_ids(first);
  ASSERT_TRUE(head_->nodes().PickNode(nullptr, &pick, &picked).ok());
  EXPECT_EQ(picked.status(), v1::PICK_STATUS_PLACED);
  EXPECT_NE(picked.node_id(), first);
  pick.add_exclude_node_ids(picked.node_id());
  ASSERT_TRUE(head_->nodes().PickNode(nullptr, &pick, &picked).ok());
  EXPECT_NE(picked.status(), v1::PICK_STATUS_PLACED);
  EXPECT_EQ(Used("CPU"), 0);  // advice only: nothing is held by PickNode

  v1::PlacementGroupInfo info = Create("pg", v1::PLACEMENT_STRATEGY_PACK, {"CPU=1"});
  v1::PickNodeRequest inside;
  inside.mutable_request()->set_placement_group("pg");
  inside.mutable_request()->set_bundle_index(0);
  ASSERT_TRUE(head_->nodes().PickNode(nullptr, &inside, &picked).ok());
  EXPECT_EQ(picked.node_id(), info.bundles(0).node_id());
  inside.mutable_request()->set_placement_group("nope");
  ASSERT_TRUE(head_->nodes().PickNode(nullptr, &inside, &picked).ok());
  EXPECT_EQ(picked.status(), v1::PICK_STATUS_INFEASIBLE);
}

TEST_F(HeadServiceTest, SlicesAreReservedWholeAndBrokenWhenAHostDies) {
  for (std::string slice : {"s1", "s2"}) {
    for (int w = 0; w < 4; ++w) {
      Register(absl::StrCat(slice, "-w", w), "CPU=8,TPU=4",
               head_testing::V6e4x4HostLabels(slice, w));
    }
  }
  v1::ReserveSlicesRequest request;
  request.set_name("train");
  auto* alt = request.add_alternatives();
  SetV6e4x4(alt);
  alt->set_num_slices(2);
  v1::SliceGroupInfo info;
  ASSERT_TRUE(head_->reservations().ReserveSlices(nullptr, &request, &info).ok());
  EXPECT_EQ(info.state(), v1::SLICE_GROUP_STATE_RESERVED) << info.explanation();
  EXPECT_EQ(info.hosts_size(), 8);
  EXPECT_EQ(Held(true).size(), 8u);
  std::set<std::string> hosts;
  for (const auto& h : info.hosts()) hosts.insert(h.node_id());
  EXPECT_EQ(hosts.size(), 8u);  // two slices never share a host

  v1::ReserveSlicesRequest more = request;
  more.set_name("more");
  more.mutable_alternatives(0)->set_num_slices(1);
  v1::SliceGroupInfo waiting;
  ASSERT_TRUE(head_->reservations().ReserveSlices(nullptr, &more, &waiting).ok());
  EXPECT_EQ(waiting.state(), v1::SLICE_GROUP_STATE_PENDING);
  EXPECT_FALSE(waiting.explanation().empty());

  // s1-w2 stops beating: the group is BROKEN.
  for (int i = 0; i < 12; ++i) {
    clock_.Advance(absl::Milliseconds(500));
    for (const auto& [id, request] : requests_) {
      if (id != "s1-w2") Beat(id);
    }
    head_->Tick();
  }
  v1::ListSlicesResponse slices;
  v1::ListRequest list;
  ASSERT_TRUE(head_->reservations().ListSlices(nullptr, &list, &slices).ok());
  ASSERT_EQ(slices.slices_size(), 2);
  EXPECT_FALSE(slices.slices(0).intact());
  EXPECT_EQ(slices.slices(0).hosts(), 4);
  EXPECT_EQ(slices.slices(0).hosts_alive(), 3);
  EXPECT_EQ(slices.slices(0).held_by(), "train");
  bool broken = false;
  for (const auto& g : slices.groups()) {
    broken = broken || (g.name() == "train" && g.state() == v1::SLICE_GROUP_STATE_BROKEN);
  }
  EXPECT_TRUE(broken);

  v1::ReleaseSlicesRequest release;
  release.set_name("train");
  v1::ReleaseSlicesResponse released;
  ASSERT_TRUE(head_->reservations().ReleaseSlices(nullptr, &release, &released).ok());
  EXPECT_EQ(released.released_size(), 8);
  // Only the dead host's agent still "holds" its bundle (it is gone); the live ones released.
  for (const std::string& held : Held()) EXPECT_TRUE(absl::StrContains(held, "s1-w2")) << held;
}

TEST_F(HeadServiceTest, ABrokenSliceGroupWhoseHostReturnsIsReservedAgain) {
  auto labels = [](int w) { return head_testing::V6e4x4HostLabels("s1", w); };
  for (int w = 0; w < 4; ++w) Register(absl::StrCat("s1-w", w), "CPU=8,TPU=4", labels(w));
  v1::ReserveSlicesRequest request;
  request.set_name("train");
  auto* alt = request.add_alternatives();
  SetV6e4x4(alt);
  v1::SliceGroupInfo info;
  ASSERT_TRUE(head_->reservations().ReserveSlices(nullptr, &request, &info).ok());
  ASSERT_EQ(info.state(), v1::SLICE_GROUP_STATE_RESERVED) << info.explanation();

  // s1-w2's agent restarts: a new incarnation drops what the old one held; the group breaks.
  v1::RegisterNodeRequest again = NodeRequest("s1-w2", "CPU=8,TPU=4", labels(2), "i2");
  v1::RegisterNodeResponse response;
  ASSERT_TRUE(head_->nodes().RegisterNode(nullptr, &again, &response).ok());
  auto group_state = [&] {
    v1::ListSlicesResponse slices;
    v1::ListRequest list;
    EXPECT_TRUE(head_->reservations().ListSlices(nullptr, &list, &slices).ok());
    for (const auto& g : slices.groups()) {
      if (g.name() == "train") return g;
    }
    return v1::SliceGroupInfo();
  };
  EXPECT_EQ(group_state().state(), v1::SLICE_GROUP_STATE_BROKEN);

  // Every host is back: the next ticks reserve it again, whole, on its agents.
  for (int i = 0; i < 4; ++i) {
    clock_.Advance(absl::Milliseconds(500));
    for (int w = 0; w < 4; ++w) Beat(absl::StrCat("s1-w", w), w == 2 ? "i2" : "i1");
    head_->Tick();
  }
  v1::SliceGroupInfo healed = group_state();
  EXPECT_EQ(healed.state(), v1::SLICE_GROUP_STATE_RESERVED) << healed.explanation();
  EXPECT_EQ(healed.hosts_size(), 4);
  EXPECT_EQ(Held(true).size(), 4u);
  bool said = false;
  for (const std::string& event : head_->events()) {
    said = said || absl::StrContains(event, "slice group train: its hosts are back");
  }
  EXPECT_TRUE(said);
}

// WaitSliceGroup: the head's wait for a slice group, on its (fake) clock.
class SliceWaitTest : public HeadServiceTest {
 protected:
  // The 4 hosts of one TPU v6e 4x4 slice, s1.
  void SetUp() override {
    for (int w = 0; w < 4; ++w) {
      Register(absl::StrCat("s1-w", w), "CPU=8,TPU=4", head_testing::V6e4x4HostLabels("s1", w));
    }
  }

  v1::SliceGroupInfo Reserve(const std::string& name, std::vector<int> dims = {4, 4}) {
    v1::ReserveSlicesRequest request;
    request.set_name(name);
    v1::SliceAlternative* alt = request.add_alternatives();
    wire::SliceShapeToProto(*MakeSliceShape(TpuGeneration::kV6e, TpuTopology{std::move(dims)}),
                            alt->mutable_shape());
    alt->set_num_slices(1);
    v1::SliceGroupInfo info;
    grpc::Status status = head_->reservations().ReserveSlices(nullptr, &request, &info);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return info;
  }
  grpc::Status Wait(const std::string& name, int64_t timeout_ms, v1::SliceGroupInfo* info) {
    v1::WaitSliceGroupRequest request;
    request.set_name(name);
    request.set_timeout_ms(timeout_ms);
    return head_->reservations().WaitSliceGroup(nullptr, &request, info);
  }
  void Release(const std::string& name) {
    v1::ReleaseSlicesRequest request;
    request.set_name(name);
    v1::ReleaseSlicesResponse response;
    grpc::Status status = head_->reservations().ReleaseSlices(nullptr, &request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
  }
};

TEST_F(SliceWaitTest, ReturnsWhenTheGroupIsReservedWhileItWaits) {
  ASSERT_EQ(Reserve("first").state(), v1::SLICE_GROUP_STATE_RESERVED);
  ASSERT_EQ(Reserve("second").state(), v1::SLICE_GROUP_STATE_PENDING);
  v1::SliceGroupInfo now;
  ASSERT_TRUE(Wait("second", 0, &now).ok());
  EXPECT_EQ(now.state(), v1::SLICE_GROUP_STATE_PENDING);  // no wait: where it stands

  grpc::Status waited;
  v1::SliceGroupInfo info;
  std::thread waiter([&] { waited = Wait("second", 60'000, &info); });
  // "first" goes; the next tick places "second" and commits it on the agents while the call
  // waits. The fake clock never moves: only the reservation's change ends the wait.
  Release("first");
  head_->Tick();
  waiter.join();
  ASSERT_TRUE(waited.ok()) << waited.error_message();
  EXPECT_EQ(info.state(), v1::SLICE_GROUP_STATE_RESERVED) << info.explanation();
  EXPECT_EQ(info.hosts_size(), 4);
}

TEST_F(SliceWaitTest, EndsAtItsTimeoutOnTheHeadsClock) {
  ASSERT_EQ(Reserve("first").state(), v1::SLICE_GROUP_STATE_RESERVED);
  ASSERT_EQ(Reserve("second").state(), v1::SLICE_GROUP_STATE_PENDING);
  const absl::Time start = clock_.Now();
  std::atomic<bool> done{false};
  absl::Time ended;
  grpc::Status waited;
  v1::SliceGroupInfo info;
  std::thread waiter([&] {
    waited = Wait("second", 5'000, &info);
    ended = clock_.Now();
    done = true;
  });
  // Only the fake clock, moved by hand, ends it: no real time is waited for.
  while (!done) {
    clock_.Advance(absl::Milliseconds(100));
    std::this_thread::yield();
  }
  waiter.join();
  ASSERT_TRUE(waited.ok()) << waited.error_message();
  EXPECT_EQ(info.state(), v1::SLICE_GROUP_STATE_PENDING);
  EXPECT_FALSE(info.explanation().empty());
  EXPECT_GE(ended - start, absl::Seconds(5));  // not a moment before its timeout
}

TEST_F(SliceWaitTest, AnswersNotFoundWhenTheGroupIsReleasedWhileItWaits) {
  ASSERT_EQ(Reserve("first").state(), v1::SLICE_GROUP_STATE_RESERVED);
  ASSERT_EQ(Reserve("second").state(), v1::SLICE_GROUP_STATE_PENDING);
  grpc::Status waited;
  v1::SliceGroupInfo info;
  std::thread waiter([&] { waited = Wait("second", 60'000, &info); });
  Release("second");
  waiter.join();
  EXPECT_EQ(waited.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(waited.error_message(), "no slice group named second");
}

TEST_F(SliceWaitTest, EveryWaitEndsWhenTheHeadShutsDown) {
  ASSERT_EQ(Reserve("first").state(), v1::SLICE_GROUP_STATE_RESERVED);
  ASSERT_EQ(Reserve("second").state(), v1::SLICE_GROUP_STATE_PENDING);
  // No host has 100 CPUs: a placement group's wait waits through INFEASIBLE.
  ASSERT_EQ(Create("big", v1::PLACEMENT_STRATEGY_PACK, {"CPU=100"}).state(),
            v1::PLACEMENT_GROUP_STATE_INFEASIBLE);
  grpc::Status slice_waited;
  v1::SliceGroupInfo slice;
  std::thread slice_waiter([&] { slice_waited = Wait("second", 60'000, &slice); });
  grpc::Status group_waited;
  v1::PlacementGroupInfo group;
  std::thread group_waiter([&] {
    v1::WaitPlacementGroupRequest request;
    request.set_name("big");
    request.set_timeout_ms(60'000);
    group_waited = head_->reservations().WaitPlacementGroup(nullptr, &request, &group);
  });
  // The fake clock never moves: only the shutdown ends the waits.
  head_->EndWaits();
  slice_waiter.join();
  group_waiter.join();
  ASSERT_TRUE(slice_waited.ok()) << slice_waited.error_message();
  EXPECT_EQ(slice.state(), v1::SLICE_GROUP_STATE_PENDING);
  ASSERT_TRUE(group_waited.ok()) << group_waited.error_message();
  EXPECT_EQ(group.state(), v1::PLACEMENT_GROUP_STATE_INFEASIBLE);
  // A wait asked for afterwards is answered at once.
  ASSERT_TRUE(Wait("second", 60'000, &slice).ok());
  EXPECT_EQ(slice.state(), v1::SLICE_GROUP_STATE_PENDING);
}

TEST_F(SliceWaitTest, ARefusedGroupIsAnsweredAtOnceAndBadRequestsAreRefused) {
  // No 8x8 slice in the cluster: refused, and the wait does not wait for the clock.
  ASSERT_EQ(Reserve("big", {8, 8}).state(), v1::SLICE_GROUP_STATE_INFEASIBLE);
  v1::SliceGroupInfo info;
  ASSERT_TRUE(Wait("big", 60'000, &info).ok());
  EXPECT_EQ(info.state(), v1::SLICE_GROUP_STATE_INFEASIBLE);
  EXPECT_FALSE(info.explanation().empty());

  grpc::Status negative = Wait("big", -1, &info);
  EXPECT_EQ(negative.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(negative.error_message(), "timeout_ms: is negative");
  EXPECT_EQ(Wait("nobody", 0, &info).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(HeadServiceTest, KvAndJobs) {
  v1::KvPutRequest put;
  put.set_key("a/1");
  put.set_value("one");
  v1::KvPutResponse added;
  ASSERT_TRUE(head_->kv().KvPut(nullptr, &put, &added).ok());
  EXPECT_TRUE(added.added());
  put.set_value("uno");
  ASSERT_TRUE(head_->kv().KvPut(nullptr, &put, &added).ok());
  EXPECT_FALSE(added.added());
  v1::KvGetRequest get;
  get.set_key("a/1");
  v1::KvGetResponse got;
  ASSERT_TRUE(head_->kv().KvGet(nullptr, &get, &got).ok());
  EXPECT_EQ(got.value(), "one");  // no overwrite
  put.set_overwrite(true);
  ASSERT_TRUE(head_->kv().KvPut(nullptr, &put, &added).ok());
  ASSERT_TRUE(head_->kv().KvGet(nullptr, &get, &got).ok());
  EXPECT_EQ(got.value(), "uno");
  v1::KvListRequest list;
  list.set_prefix("a/");
  v1::KvListResponse keys;
  ASSERT_TRUE(head_->kv().KvList(nullptr, &list, &keys).ok());
  ASSERT_EQ(keys.keys_size(), 1);
  v1::KvDeleteRequest del;
  del.set_key("a/1");
  v1::KvDeleteResponse deleted;
  ASSERT_TRUE(head_->kv().KvDelete(nullptr, &del, &deleted).ok());
  EXPECT_TRUE(deleted.deleted());

  v1::RecordJobRequest job;
  job.mutable_job()->set_job_id("j1");
  job.mutable_job()->add_argv("env");
  v1::JobInfo recorded;
  ASSERT_TRUE(head_->jobs().RecordJob(nullptr, &job, &recorded).ok());
  EXPECT_EQ(recorded.state(), v1::JOB_STATE_RUNNING);
  job.mutable_job()->set_state(v1::JOB_STATE_SUCCEEDED);
  ASSERT_TRUE(head_->jobs().RecordJob(nullptr, &job, &recorded).ok());
  EXPECT_EQ(recorded.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_GT(recorded.end_time_ms(), 0);
  EXPECT_TRUE(store_.Get(kJobsTable, "j1")->has_value());
}

// --- request limits ---

namespace limits = request_limits;

// A one-line INVALID_ARGUMENT carrying exactly `message`.
void ExpectRefused(const grpc::Status& status, const std::string& message) {
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << message;
  EXPECT_EQ(status.error_message(), message);
  EXPECT_EQ(status.error_message().find('\n'), std::string::npos);
}

v1::CreatePlacementGroupRequest GroupOf(size_t bundles, const std::string& name = "big") {
  v1::CreatePlacementGroupRequest request;
  request.set_name(name);
  request.set_strategy(v1::PLACEMENT_STRATEGY_PACK);
  for (size_t i = 0; i < bundles; ++i) {
    (*request.mutable_primary()->add_bundles()->mutable_resources()->mutable_raw())["CPU"] = 10000;
  }
  return request;
}

TEST_F(HeadServiceTest, APlacementGroupOf200000BundlesIsRefusedAtOnceAndChangesNothing) {
  Register("n1", "CPU=2048");
  v1::CreatePlacementGroupRequest huge = GroupOf(200000);
  huge.set_request_id("req-huge");
  ASSERT_LT(huge.ByteSizeLong(), 4u * 1024 * 1024);  // it fits in one gRPC message
  v1::PlacementGroupInfo info;
  const absl::Time start = absl::Now();
  grpc::Status status = head_->reservations().CreatePlacementGroup(nullptr, &huge, &info);
  // The scheduler took 10-20 s over this under the head's mutex; the count check is O(1).
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  ExpectRefused(status, "placement group has 200000 bundles; at most 1024 are allowed");

  // Nothing changed: no group, nothing asked of the agent, nothing stored, and the request id
  // was not taken (the refusal came before the request-id cache).
  EXPECT_EQ(Status().placement_groups_size(), 0);
  EXPECT_EQ(agents_["n1"]->prepares(), 0);
  EXPECT_FALSE(store_.Get(kPlacementGroupsTable, "big")->has_value());
  v1::CreatePlacementGroupRequest fits = GroupOf(limits::kMaxBundlesPerPlacementGroup);
  fits.set_request_id("req-huge");
  ASSERT_TRUE(head_->reservations().CreatePlacementGroup(nullptr, &fits, &info).ok());
  EXPECT_EQ(info.state(), v1::PLACEMENT_GROUP_STATE_CREATED) << info.explanation();
  EXPECT_EQ(info.bundles_size(), 1024);
}

TEST_F(HeadServiceTest, EachRequestLimitIsRefusedWithOneLineNamingItAndChangesNothing) {
  Register("n1");
  const std::string long_name(limits::kMaxNameLength + 1, 'n');
  struct Case {
    std::string message;
    std::function<grpc::Status()> call;
  };
  std::vector<Case> cases;
  auto create = [this](v1::CreatePlacementGroupRequest request) {
    return [this, request] {
      v1::PlacementGroupInfo info;
      return head_->reservations().CreatePlacementGroup(nullptr, &request, &info);
    };
  };
  auto reserve = [this](v1::ReserveSlicesRequest request) {
    return [this, request] {
      v1::SliceGroupInfo info;
      return head_->reservations().ReserveSlices(nullptr, &request, &info);
    };
  };
  auto pick = [this](v1::PickNodeRequest request) {
    return [this, request] {
      v1::PickNodeResponse response;
      return head_->nodes().PickNode(nullptr, &request, &response);
    };
  };
  auto record = [this](v1::JobInfo job) {
    return [this, job] {
      v1::RecordJobRequest request;
      *request.mutable_job() = job;
      v1::JobInfo response;
      return head_->jobs().RecordJob(nullptr, &request, &response);
    };
  };
  auto resources = [](size_t count, v1::Resources* out) {
    for (size_t i = 0; i < count; ++i) (*out->mutable_raw())[absl::StrCat("r", i)] = 10000;
  };
  // Adds the constraint "`key` in `values`" to `out`.
  auto constrain = [](v1::LabelSelector* out, const std::string& key,
                      const std::vector<std::string>& values) {
    v1::LabelSelectorConstraint* constraint = out->add_label_constraints();
    constraint->set_label_key(key);
    constraint->set_operator_(v1::LABEL_OPERATOR_IN);
    for (const std::string& value : values) constraint->add_label_values(value);
  };
  auto selector_constraints = [&](size_t count, v1::LabelSelector* out) {
    for (size_t i = 0; i < count; ++i) constrain(out, absl::StrCat("k", i), {"v"});
  };

  // Placement groups.
  {
    v1::CreatePlacementGroupRequest r = GroupOf(1);
    for (size_t i = 0; i <= limits::kMaxPlacementGroupFallbacks; ++i) {
      *r.add_fallbacks() = GroupOf(1).primary();
    }
    cases.push_back({"placement group has 17 fallbacks; at most 16 are allowed", create(r)});
  }
  {
    v1::CreatePlacementGroupRequest r = GroupOf(1);
    *r.add_fallbacks() = GroupOf(limits::kMaxBundlesPerPlacementGroup + 1).primary();
    cases.push_back(
        {"placement group fallbacks[0] has 1025 bundles; at most 1024 are allowed", create(r)});
  }
  {
    v1::CreatePlacementGroupRequest r = GroupOf(1);  // CPU, and 64 more
    resources(limits::kMaxResourcesPerBundle,
              r.mutable_primary()->mutable_bundles(0)->mutable_resources());
    cases.push_back(
        {"primary.bundles[0].resources has 65 resources; at most 64 are allowed", create(r)});
  }
  {
    v1::CreatePlacementGroupRequest r = GroupOf(1);
    (*r.mutable_primary()->mutable_bundles(0)->mutable_resources()->mutable_raw())[std::string(
        limits::kMaxResourceNameLength + 1, 'r')] = 1;
    cases.push_back(
        {"primary.bundles[0].resources: a resource name has 254 characters; at most "
         "253 are allowed",
         create(r)});
  }
  {
    v1::CreatePlacementGroupRequest r = GroupOf(1);
    selector_constraints(limits::kMaxSelectorConstraints + 1,
                         r.mutable_primary()->mutable_bundles(0)->mutable_label_selector());
    cases.push_back({"primary.bundles[0].label_selector has 65 constraints; at most 64 are allowed",
                     create(r)});
  }
  {
    v1::CreatePlacementGroupRequest r = GroupOf(1);
    constrain(r.mutable_primary()->mutable_bundles(0)->mutable_label_selector(),
              std::string(limits::kMaxLabelKeyLength + 1, 'k'), {"v"});
    cases.push_back(
        {"primary.bundles[0].label_selector.label_constraints[0].label_key has 318 characters; "
         "at most 317 are allowed",
         create(r)});
  }
  {
    v1::CreatePlacementGroupRequest r = GroupOf(1);
    constrain(r.mutable_primary()->mutable_bundles(0)->mutable_label_selector(), "zone",
              std::vector<std::string>(limits::kMaxSelectorValues + 1, "a"));
    cases.push_back(
        {"primary.bundles[0].label_selector.label_constraints[0] has 1025 values; at most 1024 "
         "are allowed",
         create(r)});
  }
  {
    v1::CreatePlacementGroupRequest r = GroupOf(1, long_name);
    cases.push_back({"name has 254 characters; at most 253 are allowed", create(r)});
    r = GroupOf(1);
    r.set_request_id(long_name);
    cases.push_back({"request_id has 254 characters; at most 253 are allowed", create(r)});
  }
  cases.push_back({"name has 254 characters; at most 253 are allowed", [&] {
                     v1::RemovePlacementGroupRequest r;
                     r.set_name(long_name);
                     v1::RemovePlacementGroupResponse response;
                     return head_->reservations().RemovePlacementGroup(nullptr, &r, &response);
                   }});
  cases.push_back({"name has 254 characters; at most 253 are allowed", [&] {
                     v1::WaitPlacementGroupRequest r;
                     r.set_name(long_name);
                     v1::PlacementGroupInfo response;
                     return head_->reservations().WaitPlacementGroup(nullptr, &r, &response);
                   }});

  // Slice groups.
  auto slices = [](int num_slices) {
    v1::ReserveSlicesRequest r;
    r.set_name("s");
    v1::SliceAlternative* alt = r.add_alternatives();
    SetV6e4x4(alt);
    alt->set_num_slices(num_slices);
    return r;
  };
  cases.push_back({"alternatives[0] asks for 65 slices; at most 64 are allowed",
                   reserve(slices(limits::kMaxSlicesPerRequest + 1))});
  {
    v1::ReserveSlicesRequest r = slices(1);
    for (size_t i = 0; i < limits::kMaxSliceAlternatives; ++i)
      *r.add_alternatives() = r.alternatives(0);
    cases.push_back({"slice request has 17 alternatives; at most 16 are allowed", reserve(r)});
  }
  {
    v1::ReserveSlicesRequest r;
    v1::SliceAlternative* alt = r.add_alternatives();
    alt->set_nvlink_hosts(static_cast<int>(limits::kMaxNvlinkHostsPerRequest) + 1);
    resources(1, alt->mutable_per_host());
    cases.push_back(
        {"alternatives[0] asks for 1025 NVLink hosts; at most 1024 are allowed", reserve(r)});
    alt->set_nvlink_hosts(2);
    resources(limits::kMaxResourcesPerBundle + 1, alt->mutable_per_host());
    cases.push_back(
        {"alternatives[0].per_host has 65 resources; at most 64 are allowed", reserve(r)});
  }
  {
    v1::ReserveSlicesRequest r = slices(1);
    for (int i = 0; i < 3; ++i) r.mutable_alternatives(0)->mutable_shape()->add_dims(4);
    cases.push_back({"alternatives[0].shape has 5 dims; at most 3 are allowed", reserve(r)});
    r = slices(1);
    r.set_name(long_name);
    cases.push_back({"name has 254 characters; at most 253 are allowed", reserve(r)});
  }
  cases.push_back({"name has 254 characters; at most 253 are allowed", [&] {
                     v1::ReleaseSlicesRequest r;
                     r.set_name(long_name);
                     v1::ReleaseSlicesResponse response;
                     return head_->reservations().ReleaseSlices(nullptr, &r, &response);
                   }});
  cases.push_back({"name has 254 characters; at most 253 are allowed", [&] {
                     v1::WaitSliceGroupRequest r;
                     r.set_name(long_name);
                     v1::SliceGroupInfo response;
                     return head_->reservations().WaitSliceGroup(nullptr, &r, &response);
                   }});

  // PickNode: label selectors and fallbacks, resources, excluded nodes.
  {
    v1::PickNodeRequest r;
    resources(1, r.mutable_request()->mutable_resources());
    for (size_t i = 0; i <= limits::kMaxLabelFallbacks; ++i)
      selector_constraints(1, r.mutable_request()->add_fallbacks());
    cases.push_back({"request has 17 fallbacks; at most 16 are allowed", pick(r)});
  }
  {
    v1::PickNodeRequest r;
    selector_constraints(1, r.mutable_request()->add_fallbacks());
    selector_constraints(limits::kMaxSelectorConstraints + 1, r.mutable_request()->add_fallbacks());
    cases.push_back({"request.fallbacks[1] has 65 constraints; at most 64 are allowed", pick(r)});
  }
  {
    v1::PickNodeRequest r;
    constrain(r.mutable_request()->mutable_label_selector(), "zone",
              {"a", std::string(limits::kMaxLabelValueLength + 1, 'v')});
    cases.push_back(
        {"request.label_selector.label_constraints[0].label_values[1] has 64 characters; at "
         "most 63 are allowed",
         pick(r)});
  }
  {
    v1::PickNodeRequest r;
    resources(limits::kMaxResourcesPerBundle + 1, r.mutable_request()->mutable_resources());
    cases.push_back({"request.resources has 65 resources; at most 64 are allowed", pick(r)});
  }
  {
    v1::PickNodeRequest r;
    for (size_t i = 0; i <= limits::kMaxExcludedNodes; ++i)
      r.add_exclude_node_ids(absl::StrCat("n", i));
    cases.push_back({"pick request has 1025 excluded nodes; at most 1024 are allowed", pick(r)});
  }
  {
    v1::PickNodeRequest r;
    r.mutable_request()->set_affinity_node_id(long_name);
    cases.push_back(
        {"request.affinity_node_id has 254 characters; at most 253 are allowed", pick(r)});
  }

  // Jobs.
  {
    v1::JobInfo job;
    job.set_job_id(long_name);
    cases.push_back({"job.job_id has 254 characters; at most 253 are allowed", record(job)});
    job.set_job_id("j");
    for (size_t i = 0; i <= limits::kMaxJobArgvEntries; ++i) job.add_argv("a");
    cases.push_back({"job.argv has 4097 entries; at most 4096 are allowed", record(job)});
    job.clear_argv();
    job.add_argv(std::string(limits::kMaxJobArgvBytes, 'a'));
    job.add_argv("b");
    cases.push_back({"job.argv has 131073 bytes; at most 131072 are allowed", record(job)});
    job.clear_argv();
    job.set_exit_reason(std::string(limits::kMaxExitReasonBytes + 1, 'x'));
    cases.push_back({"job.exit_reason has 16385 bytes; at most 16384 are allowed", record(job)});
  }

  // KV.
  const std::string long_key(limits::kMaxKvKeyBytes + 1, 'k');
  cases.push_back({"key has 4097 bytes; at most 4096 are allowed", [&] {
                     v1::KvPutRequest r;
                     r.set_key(long_key);
                     v1::KvPutResponse response;
                     return head_->kv().KvPut(nullptr, &r, &response);
                   }});
  cases.push_back({"value has 1048577 bytes; at most 1048576 are allowed", [&] {
                     v1::KvPutRequest r;
                     r.set_key("k");
                     r.set_value(std::string(limits::kMaxKvValueBytes + 1, 'v'));
                     v1::KvPutResponse response;
                     return head_->kv().KvPut(nullptr, &r, &response);
                   }});
  cases.push_back({"key has 4097 bytes; at most 4096 are allowed", [&] {
                     v1::KvGetRequest r;
                     r.set_key(long_key);
                     v1::KvGetResponse response;
                     return head_->kv().KvGet(nullptr, &r, &response);
                   }});
  cases.push_back({"key has 4097 bytes; at most 4096 are allowed", [&] {
                     v1::KvDeleteRequest r;
                     r.set_key(long_key);
                     v1::KvDeleteResponse response;
                     return head_->kv().KvDelete(nullptr, &r, &response);
                   }});
  cases.push_back({"prefix has 4097 bytes; at most 4096 are allowed", [&] {
                     v1::KvListRequest r;
                     r.set_prefix(long_key);
                     v1::KvListResponse response;
                     return head_->kv().KvList(nullptr, &r, &response);
                   }});

  // Listing.
  cases.push_back({"page_token has 1025 bytes; at most 1024 are allowed", [&] {
                     v1::ListRequest r;
                     r.set_page_token(std::string(limits::kMaxPageTokenBytes + 1, 't'));
                     v1::ListJobsResponse response;
                     return head_->jobs().ListJobs(nullptr, &r, &response);
                   }});

  for (const Case& c : cases) ExpectRefused(c.call(), c.message);

  // Nothing changed anywhere.
  v1::ClusterStatus s = Status();
  EXPECT_EQ(s.nodes_size(), 1);
  EXPECT_EQ(s.placement_groups_size(), 0);
  EXPECT_EQ(s.slices().groups_size(), 0);
  EXPECT_EQ(Used("CPU"), 0);
  EXPECT_TRUE(Held().empty());
  EXPECT_EQ(agents_["n1"]->prepares(), 0);
  EXPECT_TRUE(store_.List(kJobsTable)->empty());
  EXPECT_TRUE(store_.List(kKvTable)->empty());
  EXPECT_TRUE(store_.List(kPlacementGroupsTable)->empty());
  EXPECT_TRUE(store_.List(kSliceGroupsTable)->empty());
}

// --- job retention ---

grpc::Status RecordJobIn(HeadService& head, const std::string& id, v1::JobState state,
                         const std::string& node = "", const std::string& exit_reason = "") {
  v1::RecordJobRequest request;
  request.mutable_job()->set_job_id(id);
  request.mutable_job()->set_state(state);
  request.mutable_job()->set_node_id(node);
  request.mutable_job()->set_exit_reason(exit_reason);
  request.mutable_job()->add_argv("true");
  v1::JobInfo recorded;
  return head.jobs().RecordJob(nullptr, &request, &recorded);
}

// Every job the head lists, paging through with `page_size`, in the order listed; `pages`
// counts the pages.
std::vector<std::string> ListedJobs(HeadService& head, int page_size = 0, int* pages = nullptr) {
  std::vector<std::string> ids;
  v1::ListRequest request;
  request.set_page_size(page_size);
  int count = 0;
  while (true) {
    v1::ListJobsResponse page;
    grpc::Status status = head.jobs().ListJobs(nullptr, &request, &page);
    EXPECT_TRUE(status.ok()) << status.error_message();
    if (!status.ok() || ++count > 1000) break;
    for (const v1::JobInfo& job : page.jobs()) ids.push_back(job.job_id());
    if (page.next_page_token().empty()) break;
    request.set_page_token(page.next_page_token());
  }
  if (pages != nullptr) *pages = count;
  return ids;
}

TEST_F(HeadServiceTest, RetentionKeepsEveryRunningJobAndTheNewestEndedOnes) {
  HeadServiceOptions options = Options();
  options.max_ended_jobs = 3;
  head_ = std::make_unique<HeadService>(std::move(options));
  // Running jobs and ended ones interleaved: r0 e0 r1 e1 ... ; e<i> ends as it is recorded.
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(RecordJobIn(*head_, absl::StrCat("r", i), v1::JOB_STATE_RUNNING).ok());
    ASSERT_TRUE(RecordJobIn(*head_, absl::StrCat("e", i), v1::JOB_STATE_RUNNING).ok());
    ASSERT_TRUE(RecordJobIn(*head_, absl::StrCat("e", i),
                            i % 2 == 0 ? v1::JOB_STATE_SUCCEEDED : v1::JOB_STATE_FAILED)
                    .ok());
  }
  std::vector<std::string> expected = {"r0", "r1", "r2", "r3", "r4", "r5", "r6",
                                       "r7", "e7", "r8", "e8", "r9", "e9"};
  EXPECT_EQ(ListedJobs(*head_), expected);
  // Forgotten in the store too.
  EXPECT_FALSE(store_.Get(kJobsTable, "e6")->has_value());
  EXPECT_TRUE(store_.Get(kJobsTable, "e7")->has_value());
  EXPECT_EQ(store_.List(kJobsTable)->size(), 13u);

  // Updating an ended job does not make it newer: the next job to end pushes it out.
  ASSERT_TRUE(RecordJobIn(*head_, "e7", v1::JOB_STATE_UNSPECIFIED, "", "late exit reason").ok());
  ASSERT_TRUE(RecordJobIn(*head_, "r0", v1::JOB_STATE_SUCCEEDED).ok());
  expected = {"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "e8", "r9", "e9"};
  EXPECT_EQ(ListedJobs(*head_), expected);
}

TEST_F(HeadServiceTest, JobsFailedByADeadNodeCountAsEnded) {
  HeadServiceOptions options = Options();
  options.max_ended_jobs = 1;
  head_ = std::make_unique<HeadService>(std::move(options));
  Register("n1");
  Register("n2");
  ASSERT_TRUE(RecordJobIn(*head_, "done", v1::JOB_STATE_SUCCEEDED).ok());
  ASSERT_TRUE(RecordJobIn(*head_, "on-n1", v1::JOB_STATE_RUNNING, "n1").ok());
  ASSERT_TRUE(RecordJobIn(*head_, "on-n2", v1::JOB_STATE_RUNNING, "n2").ok());
  for (int i = 0; i < 12; ++i) {
    clock_.Advance(absl::Milliseconds(500));
    Beat("n2");
    head_->Tick();
  }
  // n1 died: its job failed, and as the newest ended job it pushed "done" out.
  EXPECT_EQ(ListedJobs(*head_), (std::vector<std::string>{"on-n1", "on-n2"}));
  EXPECT_FALSE(store_.Get(kJobsTable, "done")->has_value());
}

// --- paged listings ---

TEST_F(HeadServiceTest, JobsArePagedInTheOrderRecordedEachExactlyOnce) {
  HeadServiceOptions options = Options();
  options.max_page_size = 4;
  head_ = std::make_unique<HeadService>(std::move(options));
  std::vector<std::string> recorded;
  for (int i = 0; i < 10; ++i) {
    recorded.push_back(absl::StrCat("job-", (i * 7) % 10));  // ids not in recording order
    ASSERT_TRUE(RecordJobIn(*head_, recorded.back(), v1::JOB_STATE_RUNNING).ok());
  }
  int pages = 0;
  EXPECT_EQ(ListedJobs(*head_, 0, &pages), recorded);  // 0: the head's page size
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(ListedJobs(*head_, 1000, &pages), recorded);  // capped at max_page_size
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(ListedJobs(*head_, 3, &pages), recorded);
  EXPECT_EQ(pages, 4);

  // The table changes between pages: a job recorded meanwhile comes at the end, none twice.
  v1::ListRequest request;
  v1::ListJobsResponse first;
  ASSERT_TRUE(head_->jobs().ListJobs(nullptr, &request, &first).ok());
  ASSERT_EQ(first.jobs_size(), 4);
  ASSERT_TRUE(RecordJobIn(*head_, "job-late", v1::JOB_STATE_RUNNING).ok());
  std::vector<std::string> seen;
  for (const auto& job : first.jobs()) seen.push_back(job.job_id());
  request.set_page_token(first.next_page_token());
  while (!request.page_token().empty()) {
    v1::ListJobsResponse page;
    ASSERT_TRUE(head_->jobs().ListJobs(nullptr, &request, &page).ok());
    for (const auto& job : page.jobs()) seen.push_back(job.job_id());
    request.set_page_token(page.next_page_token());
  }
  recorded.push_back("job-late");
  EXPECT_EQ(seen, recorded);
}

TEST_F(HeadServiceTest, BadPageRequestsAreRefused) {
  v1::ListRequest request;
  v1::ListJobsResponse jobs;
  v1::ListPlacementGroupsResponse groups;
  v1::ListSlicesResponse slices;
  request.set_page_size(-1);
  ExpectRefused(head_->jobs().ListJobs(nullptr, &request, &jobs), "page_size: -1 is negative");
  request.set_page_size(0);
  request.set_page_token("jobs:abc");
  ExpectRefused(head_->jobs().ListJobs(nullptr, &request, &jobs),
                "page_token: \"jobs:abc\" is not a page token of the jobs listing");
  request.set_page_token("slices:s/x");
  ExpectRefused(head_->jobs().ListJobs(nullptr, &request, &jobs),
                "page_token: \"slices:s/x\" is not a page token of the jobs listing");
  request.set_page_token("jobs:3");
  ExpectRefused(head_->reservations().ListPlacementGroups(nullptr, &request, &groups),
                "page_token: \"jobs:3\" is not a page token of the placement-groups listing");
  request.set_page_token("slices:x/y");
  ExpectRefused(head_->reservations().ListSlices(nullptr, &request, &slices),
                "page_token: \"slices:x/y\" is not a page token of the slices listing");
}

TEST_F(HeadServiceTest, PlacementGroupsArePagedByName) {
  HeadServiceOptions options = Options();
  options.max_page_size = 3;
  head_ = std::make_unique<HeadService>(std::move(options));
  Register("n1", "CPU=16");
  std::vector<std::string> names;
  for (int i = 6; i >= 0; --i) {
    names.push_back(absl::StrCat("g", i));
    Create(names.back(), v1::PLACEMENT_STRATEGY_PACK, {"CPU=1"});
  }
  std::sort(names.begin(), names.end());
  std::vector<std::string> seen;
  std::vector<int> sizes;
  v1::ListRequest request;
  do {
    v1::ListPlacementGroupsResponse page;
    ASSERT_TRUE(head_->reservations().ListPlacementGroups(nullptr, &request, &page).ok());
    sizes.push_back(page.groups_size());
    for (const auto& g : page.groups()) seen.push_back(g.name());
    request.set_page_token(page.next_page_token());
  } while (!request.page_token().empty() && sizes.size() < 100);
  EXPECT_EQ(seen, names);
  EXPECT_EQ(sizes, (std::vector<int>{3, 3, 1}));
}

TEST_F(HeadServiceTest, APageStopsBeforeItsByteBudgetButAlwaysHoldsOneItem) {
  HeadServiceOptions options = Options();
  options.max_page_bytes = 1000;
  head_ = std::make_unique<HeadService>(std::move(options));
  for (int i = 0; i < 5; ++i) {
    v1::RecordJobRequest request;
    request.mutable_job()->set_job_id(absl::StrCat("j", i));
    // j2 alone is larger than the budget.
    request.mutable_job()->add_argv(std::string(i == 2 ? 3000 : 400, 'a'));
    v1::JobInfo recorded;
    ASSERT_TRUE(head_->jobs().RecordJob(nullptr, &request, &recorded).ok());
  }
  std::vector<int> sizes;
  std::vector<std::string> seen;
  v1::ListRequest request;
  do {
    v1::ListJobsResponse page;
    ASSERT_TRUE(head_->jobs().ListJobs(nullptr, &request, &page).ok());
    EXPECT_TRUE(page.ByteSizeLong() <= 1000 + 16 || page.jobs_size() == 1) << page.ByteSizeLong();
    sizes.push_back(page.jobs_size());
    for (const auto& job : page.jobs()) seen.push_back(job.job_id());
    request.set_page_token(page.next_page_token());
  } while (!request.page_token().empty() && sizes.size() < 100);
  EXPECT_EQ(seen, (std::vector<std::string>{"j0", "j1", "j2", "j3", "j4"}));
  EXPECT_EQ(sizes, (std::vector<int>{2, 1, 2}));
}

TEST_F(HeadServiceTest, SliceGroupsThenSlicesArePagedAsOneListing) {
  HeadServiceOptions options = Options();
  options.max_page_size = 2;
  head_ = std::make_unique<HeadService>(std::move(options));
  for (std::string slice : {"s3", "s1", "s2"}) {
    for (int w = 0; w < 4; ++w) {
      Register(absl::StrCat(slice, "-w", w), "CPU=8,TPU=4",
               head_testing::V6e4x4HostLabels(slice, w));
    }
  }
  for (std::string name : {"train-b", "train-a"}) {
    v1::ReserveSlicesRequest request;
    request.set_name(name);
    auto* alt = request.add_alternatives();
    SetV6e4x4(alt);
    v1::SliceGroupInfo info;
    ASSERT_TRUE(head_->reservations().ReserveSlices(nullptr, &request, &info).ok());
    ASSERT_EQ(info.state(), v1::SLICE_GROUP_STATE_RESERVED) << info.explanation();
  }
  std::vector<std::string> seen;
  int pages = 0;
  v1::ListRequest request;
  do {
    v1::ListSlicesResponse page;
    ASSERT_TRUE(head_->reservations().ListSlices(nullptr, &request, &page).ok());
    EXPECT_LE(page.slices_size() + page.groups_size(), 2);
    for (const auto& g : page.groups()) seen.push_back(g.name());
    for (const auto& s : page.slices()) seen.push_back(s.name());
    request.set_page_token(page.next_page_token());
    ++pages;
  } while (!request.page_token().empty() && pages < 100);
  EXPECT_EQ(seen, (std::vector<std::string>{"train-a", "train-b", "s1", "s2", "s3"}));
  EXPECT_EQ(pages, 3);
}

// --- The head and the agents reconcile what each node holds; a second live agent with a node id
// is refused; health is never judged on time the head could not watch. ---

// A heartbeat of `node` (incarnation i1) reporting `bundles` ("group/index" each, generation 7),
// having seen the bundles epoch `epoch_seen`.
v1::HeartbeatRequest BeatWithBundles(const std::string& node,
                                     const std::vector<std::pair<std::string, int>>& bundles,
                                     int64_t epoch_seen = 0) {
  v1::HeartbeatRequest request;
  request.set_node_id(node);
  request.set_incarnation("i1");
  request.set_bundles_epoch_seen(epoch_seen);
  for (const auto& [group, index] : bundles) {
    v1::HeldBundle* held = request.add_bundles();
    held->set_placement_group(group);
    held->set_bundle_index(index);
    held->set_committed(true);
    held->set_generation(7);
    wire::ResourcesToProto(Res("CPU=1"), held->mutable_allocation()->mutable_resources());
  }
  return request;
}

// The head's state of node `id`; UNSPECIFIED when it does not list it.
v1::NodeState NodeState(HeadService& head, const std::string& id) {
  v1::ListNodesResponse nodes;
  v1::ListRequest list;
  EXPECT_TRUE(head.nodes().ListNodes(nullptr, &list, &nodes).ok());
  for (const auto& node : nodes.nodes()) {
    if (node.node().node_id() == id) return node.state();
  }
  return v1::NODE_STATE_UNSPECIFIED;
}

bool AnyEventHas(const std::vector<std::string>& events, const std::string& text) {
  for (const std::string& e : events) {
    if (absl::StrContains(e, text)) return true;
  }
  return false;
}

TEST_F(HeadServiceTest, ABundleOfNoGroupReportedByAHeartbeatIsReleasedWithAnEvent) {
  Register("n1");
  v1::HeartbeatRequest beat = BeatWithBundles("n1", {{"ghost", 0}});
  v1::HeartbeatResponse response;
  ASSERT_TRUE(head_->nodes().Heartbeat(nullptr, &beat, &response).ok());
  EXPECT_TRUE(response.known());
  ASSERT_EQ(response.release_size(), 1);
  EXPECT_EQ(response.release(0).placement_group(), "ghost");
  EXPECT_EQ(response.release(0).bundle_index(), 0);
  EXPECT_EQ(response.release(0).generation(), 7u);  // the agent spares one prepared again since
  EXPECT_TRUE(AnyEventHas(head_->events(), "bundles 0 of ghost on n1 belong to no group"));
  EXPECT_EQ(Used("CPU"), 0);
}

// `tessera events` and the dashboard follow the notices and the ordinary changes as one stream,
// by sequence number.
TEST_F(HeadServiceTest, ListEventsFollowsTheEventsBySequenceWithTheirKind) {
  Register("n1");
  for (const char* group : {"ghost-a", "ghost-b"}) {
    v1::HeartbeatRequest beat = BeatWithBundles("n1", {{group, 0}});
    v1::HeartbeatResponse response;
    ASSERT_TRUE(head_->nodes().Heartbeat(nullptr, &beat, &response).ok());
  }
  v1::ListEventsRequest request;
  request.set_limit(1);
  v1::ListEventsResponse joined;
  ASSERT_TRUE(head_->jobs().ListEvents(nullptr, &request, &joined).ok());
  ASSERT_EQ(joined.events_size(), 1);
  EXPECT_EQ(joined.events(0).seq(), 1);
  EXPECT_EQ(joined.events(0).kind(), "node");
  EXPECT_TRUE(absl::StrContains(joined.events(0).message(), "node n1 joined"))
      << joined.DebugString();
  EXPECT_FALSE(joined.events(0).notice());
  request.set_after(joined.next());
  v1::ListEventsResponse first;
  ASSERT_TRUE(head_->jobs().ListEvents(nullptr, &request, &first).ok());
  ASSERT_EQ(first.events_size(), 1);
  EXPECT_EQ(first.events(0).seq(), 2);
  EXPECT_TRUE(first.events(0).notice());
  EXPECT_EQ(first.events(0).kind(), "reservation");
  EXPECT_TRUE(absl::StrContains(first.events(0).message(), "ghost-a"));
  EXPECT_GT(first.events(0).time_ms(), 0);
  request.set_after(first.next());
  request.set_limit(0);  // the default bound
  v1::ListEventsResponse rest;
  ASSERT_TRUE(head_->jobs().ListEvents(nullptr, &request, &rest).ok());
  ASSERT_EQ(rest.events_size(), 1);
  EXPECT_TRUE(absl::StrContains(rest.events(0).message(), "ghost-b"));
  request.set_after(rest.next());
  v1::ListEventsResponse none;
  ASSERT_TRUE(head_->jobs().ListEvents(nullptr, &request, &none).ok());
  EXPECT_EQ(none.events_size(), 0);
  EXPECT_EQ(none.next(), rest.next());
}

// The ordinary life of the cluster is in the stream, not among `tessera status`'s notices.
TEST_F(HeadServiceTest, TheStreamHoldsNodeReservationAndJobChanges) {
  Register("n1");
  ASSERT_EQ(Create("pg", v1::PLACEMENT_STRATEGY_PACK, {"CPU=1", "CPU=1"}).state(),
            v1::PLACEMENT_GROUP_STATE_CREATED);
  v1::RemovePlacementGroupRequest remove;
  remove.set_name("pg");
  v1::RemovePlacementGroupResponse removed;
  ASSERT_TRUE(head_->reservations().RemovePlacementGroup(nullptr, &remove, &removed).ok());
  v1::RecordJobRequest job;
  job.mutable_job()->set_job_id("job-1");
  job.mutable_job()->set_node_id("n1");
  job.mutable_job()->add_argv("./train");
  job.mutable_job()->set_state(v1::JOB_STATE_RUNNING);
  v1::JobInfo recorded;
  ASSERT_TRUE(head_->jobs().RecordJob(nullptr, &job, &recorded).ok());
  job.mutable_job()->set_state(v1::JOB_STATE_FAILED);
  job.mutable_job()->set_exit_reason("exited with code 3");
  ASSERT_TRUE(head_->jobs().RecordJob(nullptr, &job, &recorded).ok());

  v1::ListEventsRequest request;
  v1::ListEventsResponse stream;
  ASSERT_TRUE(head_->jobs().ListEvents(nullptr, &request, &stream).ok());
  std::vector<std::string> changes;
  for (const v1::HeadEventInfo& event : stream.events()) {
    EXPECT_FALSE(event.notice()) << event.message();
    changes.push_back(absl::StrCat(event.kind(), ": ", event.message()));
  }
  ASSERT_EQ(changes.size(), 6u) << absl::StrJoin(changes, "\n");
  EXPECT_TRUE(absl::StartsWith(changes[0], "node: node n1 joined (agent at ")) << changes[0];
  EXPECT_TRUE(absl::EndsWith(changes[0], "): CPU=4")) << changes[0];
  EXPECT_EQ(changes[1], "reservation: placement group pg created: 2 bundles, PACK");
  EXPECT_EQ(changes[2], "reservation: placement group pg held: 2 bundles on 1 nodes (n1)");
  EXPECT_EQ(changes[3], "reservation: placement group pg removed");
  EXPECT_EQ(changes[4], "job: job job-1 started on node n1: ./train");
  EXPECT_EQ(changes[5], "job: job job-1 FAILED: exited with code 3");
  // None of them is a notice: `tessera status` shows none.
  EXPECT_TRUE(head_->events().empty());
}

// `tessera status` puts measured use beside reservations: the workers' CPU and memory from the
// agents' usage, a device resource's busy share from its devices' readings.
TEST_F(HeadServiceTest, StatusShowsMeasuredUseBesideReservations) {
  Register("n1", "CPU=4,memory=8GiB");
  Register("n2", "CPU=4,memory=8GiB");
  EXPECT_FALSE(Status().usage(0).has_measured());  // nothing measured yet
  auto beat = [&](const std::string& node, double cores, uint64_t bytes,
                  std::vector<double> gpu_busy) {
    v1::HeartbeatRequest request = BeatWithBundles(node, {});
    request.mutable_usage()->set_cpu_cores(cores);
    request.mutable_usage()->set_memory_bytes(bytes);
    request.mutable_usage()->set_time_ms(1000);
    for (size_t i = 0; i < gpu_busy.size(); ++i) {
      v1::DeviceSample* sample = request.add_device_samples();
      sample->set_resource("GPU");
      sample->set_index(static_cast<int>(i));
      sample->set_time_ms(1000);
      sample->set_utilization(gpu_busy[i]);
    }
    v1::HeartbeatResponse response;
    ASSERT_TRUE(head_->nodes().Heartbeat(nullptr, &request, &response).ok());
    ASSERT_TRUE(response.known());
  };
  beat("n1", 1.5, 1 << 30, {0.5, 1.0});
  beat("n2", 0.25, 512 << 20, {});
  const v1::ClusterStatus status = Status();
  std::map<std::string, v1::ResourceUsage> usage;
  for (const v1::ResourceUsage& u : status.usage()) usage[u.resource()] = u;
  ASSERT_TRUE(usage["CPU"].has_measured());
  EXPECT_DOUBLE_EQ(usage["CPU"].measured(), 1.75);
  EXPECT_EQ(usage["CPU"].measured_devices(), 0);
  EXPECT_DOUBLE_EQ(usage["memory"].measured(), double((1 << 30) + (512 << 20)));
  // A resource no node advertises is not listed, whatever readings came.
  EXPECT_EQ(usage.count("GPU"), 0u);
  ASSERT_EQ(status.nodes_size(), 2);
  EXPECT_DOUBLE_EQ(status.nodes(0).usage().cpu_cores(), 1.5);
  v1::ListNodesResponse nodes;
  v1::ListRequest list;
  ASSERT_TRUE(head_->nodes().ListNodes(nullptr, &list, &nodes).ok());
  EXPECT_EQ(nodes.nodes(1).usage().memory_bytes(), 512u << 20);
}

TEST_F(HeadServiceTest, TaskRunsReportedByDriversArePagedPerJob) {
  v1::ReportTaskEventsRequest report;
  report.set_job_id("driver-1");
  for (const char* name : {"f", "g", "h"}) {
    v1::TaskEvent* event = report.add_events();
    event->set_name(name);
    event->set_kind("task");
    event->set_outcome("ok");
  }
  report.set_dropped(2);
  v1::ReportTaskEventsResponse reported;
  ASSERT_TRUE(head_->jobs().ReportTaskEvents(nullptr, &report, &reported).ok());
  v1::GetTaskEventsRequest get;
  get.set_limit(2);  // the job that reported last
  v1::GetTaskEventsResponse page;
  ASSERT_TRUE(head_->jobs().GetTaskEvents(nullptr, &get, &page).ok());
  EXPECT_EQ(page.job_id(), "driver-1");
  ASSERT_EQ(page.events_size(), 2);
  EXPECT_EQ(page.events(1).name(), "g");
  EXPECT_TRUE(page.more());
  EXPECT_EQ(page.dropped(), 2);
  get.set_job_id("driver-1");
  get.set_after(page.next());
  v1::GetTaskEventsResponse rest;
  ASSERT_TRUE(head_->jobs().GetTaskEvents(nullptr, &get, &rest).ok());
  ASSERT_EQ(rest.events_size(), 1);
  EXPECT_FALSE(rest.more());
  // An unknown job is NOT_FOUND; a report without a job, or too large, is refused.
  get.set_job_id("driver-x");
  v1::GetTaskEventsResponse none;
  EXPECT_EQ(head_->jobs().GetTaskEvents(nullptr, &get, &none).error_code(),
            grpc::StatusCode::NOT_FOUND);
  v1::ReportTaskEventsRequest nameless = report;
  nameless.clear_job_id();
  EXPECT_EQ(head_->jobs().ReportTaskEvents(nullptr, &nameless, &reported).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  v1::ReportTaskEventsRequest huge;
  huge.set_job_id("driver-1");
  huge.add_events()->set_name(std::string(request_limits::kMaxTaskEventNameBytes + 1, 'x'));
  grpc::Status refused = head_->jobs().ReportTaskEvents(nullptr, &huge, &reported);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(refused.error_message(), "events[0].name has 1025 bytes"))
      << refused.error_message();
  // Nothing of the refused reports was kept.
  get.set_job_id("driver-1");
  get.set_after(0);
  get.set_limit(0);
  v1::GetTaskEventsResponse all;
  ASSERT_TRUE(head_->jobs().GetTaskEvents(nullptr, &get, &all).ok());
  EXPECT_EQ(all.events_size(), 3);
}

TEST_F(HeadServiceTest, APrepareAppliedAfterTheHeadGaveUpIsReleasedByTheNextHeartbeat) {
  Register("n1");
  Register("n2");
  // The prepare on n2 "times out" (the head cancels both); the group waits.
  agents_["n2"]->FailPrepare(absl::DeadlineExceededError("prepare timed out"));
  v1::PlacementGroupInfo info =
      Create("pg", v1::PLACEMENT_STRATEGY_STRICT_SPREAD, {"CPU=1", "CPU=1"});
  ASSERT_EQ(info.state(), v1::PLACEMENT_GROUP_STATE_PENDING);
  // ... but n2's agent applied it late and holds the bundle: its heartbeat says so.
  v1::HeartbeatRequest beat = BeatWithBundles("n2", {{"pg", 0}, {"pg", 1}});
  v1::HeartbeatResponse response;
  ASSERT_TRUE(head_->nodes().Heartbeat(nullptr, &beat, &response).ok());
  ASSERT_EQ(response.release_size(), 2);
  EXPECT_TRUE(AnyEventHas(head_->events(),
                          "bundles 0,1 of pg on n2 were held by the agent but "
                          "not by the head"));
  // Nothing is counted for it in the head's view either.
  EXPECT_EQ(Used("CPU"), 0);
}

TEST_F(HeadServiceTest, BundlesTheHeadHoldsThereAreKeptAndOthersReleased) {
  Register("n1");
  Register("n2");
  v1::PlacementGroupInfo info = Create("pg", v1::PLACEMENT_STRATEGY_PACK, {"CPU=1"});
  ASSERT_EQ(info.state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  const std::string holder = info.bundles(0).node_id();
  const std::string other = holder == "n1" ? "n2" : "n1";
  v1::HeartbeatResponse response;
  // The holder reports it, and a bundle index the group does not have.
  v1::HeartbeatRequest beat = BeatWithBundles(holder, {{"pg", 0}, {"pg", 3}});
  ASSERT_TRUE(head_->nodes().Heartbeat(nullptr, &beat, &response).ok());
  ASSERT_EQ(response.release_size(), 1);
  EXPECT_EQ(response.release(0).bundle_index(), 3);
  // The other node reports bundle 0 too: not held there.
  v1::HeartbeatRequest elsewhere = BeatWithBundles(other, {{"pg", 0}});
  v1::HeartbeatResponse other_response;
  ASSERT_TRUE(head_->nodes().Heartbeat(nullptr, &elsewhere, &other_response).ok());
  ASSERT_EQ(other_response.release_size(), 1);
  EXPECT_EQ(Find("pg").state(), v1::PLACEMENT_GROUP_STATE_CREATED);
}

TEST_F(HeadServiceTest, ABundleWhosePrepareIsInFlightIsNotAnOrphan) {
  Register("n1");
  v1::HeartbeatResponse during;
  // The agent has applied the prepare and heartbeats before the head's round has returned.
  agents_["n1"]->OnPrepare([&] {
    v1::HeartbeatRequest beat = BeatWithBundles("n1", {{"pg", 0}});
    EXPECT_TRUE(head_->nodes().Heartbeat(nullptr, &beat, &during).ok());
  });
  v1::PlacementGroupInfo info = Create("pg", v1::PLACEMENT_STRATEGY_PACK, {"CPU=1"});
  ASSERT_EQ(info.state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_TRUE(during.known());
  EXPECT_EQ(during.release_size(), 0);
  EXPECT_FALSE(AnyEventHas(head_->events(), "released"));
}

TEST_F(HeadServiceTest, ACommittedBundleTheAgentNoLongerHoldsIsPreparedAgain) {
  v1::RegisterNodeResponse registered;
  v1::RegisterNodeRequest request = NodeRequest("n1", "CPU=4");
  ASSERT_TRUE(head_->nodes().RegisterNode(nullptr, &request, &registered).ok());
  const int64_t before_commit = registered.bundles_epoch();
  v1::PlacementGroupInfo info = Create("pg", v1::PLACEMENT_STRATEGY_PACK, {"CPU=1"});
  ASSERT_EQ(info.state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  ASSERT_EQ(agents_["n1"]->prepares(), 1);

  // A report taken before the agent could have seen the commit proves nothing.
  v1::HeartbeatRequest stale = BeatWithBundles("n1", {}, before_commit);
  v1::HeartbeatResponse response;
  ASSERT_TRUE(head_->nodes().Heartbeat(nullptr, &stale, &response).ok());
  EXPECT_EQ(Find("pg").state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  const int64_t after_commit = response.bundles_epoch();
  EXPECT_GT(after_commit, before_commit);

  // One taken after it did, and without the bundle: lost; the next tick prepares it again.
  v1::HeartbeatRequest lacking = BeatWithBundles("n1", {}, after_commit);
  response.Clear();
  ASSERT_TRUE(head_->nodes().Heartbeat(nullptr, &lacking, &response).ok());
  v1::PlacementGroupInfo lost = Find("pg");
  EXPECT_EQ(lost.state(), v1::PLACEMENT_GROUP_STATE_RESCHEDULING);
  EXPECT_TRUE(absl::StrContains(lost.explanation(), "bundle 0 was lost on node n1"))
      << lost.explanation();
  EXPECT_TRUE(AnyEventHas(head_->events(),
                          "placement group pg: bundle 0 is no longer held by the agent of n1"));
  EXPECT_EQ(Used("CPU"), 10000);  // the view keeps its instances for it meanwhile
  head_->Tick();
  EXPECT_EQ(Find("pg").state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(agents_["n1"]->prepares(), 2);
  EXPECT_EQ(Held(true), (std::set<std::string>{"pg[0]@n1"}));
  // Reported again: nothing more happens.
  v1::HeartbeatRequest holding = BeatWithBundles("n1", {{"pg", 0}}, after_commit + 1000);
  response.Clear();
  ASSERT_TRUE(head_->nodes().Heartbeat(nullptr, &holding, &response).ok());
  EXPECT_EQ(response.release_size(), 0);
  EXPECT_EQ(Find("pg").state(), v1::PLACEMENT_GROUP_STATE_CREATED);
}

TEST_F(HeadServiceTest, ASliceHostThatLostItsBundleBreaksTheGroupWhichIsReservedAgain) {
  for (int w = 0; w < 4; ++w) {
    Register(absl::StrCat("s1-w", w), "CPU=8,TPU=4", head_testing::V6e4x4HostLabels("s1", w));
  }
  v1::ReserveSlicesRequest request;
  request.set_name("train");
  auto* alt = request.add_alternatives();
  SetV6e4x4(alt);
  v1::SliceGroupInfo info;
  ASSERT_TRUE(head_->reservations().ReserveSlices(nullptr, &request, &info).ok());
  ASSERT_EQ(info.state(), v1::SLICE_GROUP_STATE_RESERVED) << info.explanation();
  v1::HeartbeatRequest lacking = BeatWithBundles("s1-w1", {}, std::numeric_limits<int64_t>::max());
  lacking.set_incarnation("i1");
  v1::HeartbeatResponse response;
  ASSERT_TRUE(head_->nodes().Heartbeat(nullptr, &lacking, &response).ok());
  EXPECT_TRUE(AnyEventHas(head_->events(), "slice group train: bundle"));
  head_->Tick();  // broken, and given back: its hosts are all alive
  head_->Tick();  // reserved again
  EXPECT_EQ(Held(true).size(), 4u);
  v1::ListSlicesResponse slices;
  v1::ListRequest list;
  ASSERT_TRUE(head_->reservations().ListSlices(nullptr, &list, &slices).ok());
  ASSERT_EQ(slices.groups_size(), 1);
  EXPECT_EQ(slices.groups(0).state(), v1::SLICE_GROUP_STATE_RESERVED)
      << slices.groups(0).explanation();
}

TEST_F(HeadServiceTest, ASecondLiveAgentWithTheSameNodeIdIsRefused) {
  Register("n1");
  v1::PlacementGroupInfo info = Create("pg", v1::PLACEMENT_STRATEGY_PACK, {"CPU=2"});
  ASSERT_EQ(info.state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(Beat("n1"));

  v1::RegisterNodeRequest second = NodeRequest("n1", "CPU=4", {}, "i2");
  second.mutable_node()->set_address("10.0.0.2:7000");
  v1::RegisterNodeResponse response;
  grpc::Status status = head_->nodes().RegisterNode(nullptr, &second, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_TRUE(absl::StrContains(status.error_message(),
                                "node n1 is already held by a live agent at 127.0.0.1:1"))
      << status.error_message();
  EXPECT_EQ(status.error_message().find('\n'), std::string::npos);
  // The first agent keeps its node and what it holds.
  EXPECT_TRUE(Beat("n1", "i1"));
  EXPECT_FALSE(Beat("n1", "i2"));
  EXPECT_EQ(Find("pg").state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(Held(true), (std::set<std::string>{"pg[0]@n1"}));
  EXPECT_EQ(Used("CPU"), 20000);
  EXPECT_TRUE(
      AnyEventHas(head_->events(), "a second agent for node n1 (at 10.0.0.2:7000) was refused"));
}

TEST_F(HeadServiceTest, ANodeIdIsTakenOverOnceItsAgentIsDeadOrSilentAndKeptOnItsOwnReturn) {
  Register("n1");
  // Its own incarnation registering again (a head restart, a reconnect) is accepted.
  v1::RegisterNodeResponse response;
  ASSERT_TRUE(head_->nodes().RegisterNode(nullptr, &requests_["n1"], &response).ok());
  // Silent past the timeout, before any health check: another agent may take the id.
  clock_.Advance(absl::Seconds(6));
  v1::RegisterNodeRequest second = NodeRequest("n1", "CPU=4", {}, "i2");
  second.mutable_node()->set_address("10.0.0.2:7000");
  ASSERT_TRUE(head_->nodes().RegisterNode(nullptr, &second, &response).ok());
  EXPECT_TRUE(Beat("n1", "i2"));
  // Declared dead, then back from elsewhere: accepted too.
  for (int i = 0; i < 12; ++i) {
    clock_.Advance(absl::Milliseconds(500));
    head_->Tick();
  }
  EXPECT_FALSE(Beat("n1", "i2"));
  v1::RegisterNodeRequest third = NodeRequest("n1", "CPU=4", {}, "i3");
  third.mutable_node()->set_address("10.0.0.3:7000");
  ASSERT_TRUE(head_->nodes().RegisterNode(nullptr, &third, &response).ok());
  EXPECT_TRUE(Beat("n1", "i3"));
}

// The rule: silence counts only over time the head watched. A health check that runs more
// than one heartbeat interval after the previous one moves the deadline of every node it would
// declare dead by that gap (at most to now), once per silence.
TEST_F(HeadServiceTest, ALateHealthCheckGivesEveryNodeAFreshChanceOnce) {
  Register("n1");
  Register("n2");
  head_->Tick();
  // The head was stuck for 10 s: no heartbeat could be read, no check ran.
  clock_.Advance(absl::Seconds(10));
  head_->Tick();
  EXPECT_TRUE(Beat("n1"));
  EXPECT_TRUE(Beat("n2"));
  EXPECT_TRUE(AnyEventHas(head_->events(), "the health check ran 10s after the previous one"));

  // n2 then stays silent while the head ticks on time: dead after one timeout.
  for (int i = 0; i < 9; ++i) {
    clock_.Advance(absl::Milliseconds(500));
    head_->Tick();
    EXPECT_TRUE(Beat("n1"));
  }
  EXPECT_EQ(NodeState(*head_, "n2"), v1::NODE_STATE_ALIVE);  // 4.5 s of watched silence
  for (int i = 0; i < 12; ++i) {
    clock_.Advance(absl::Milliseconds(500));
    head_->Tick();
    Beat("n1");
  }
  EXPECT_EQ(NodeState(*head_, "n2"), v1::NODE_STATE_DEAD);
  EXPECT_EQ(NodeState(*head_, "n1"), v1::NODE_STATE_ALIVE);

  // Once per silence: a node that stayed silent through one late check dies at the next.
  Register("n3");
  head_->Tick();
  clock_.Advance(absl::Seconds(10));
  head_->Tick();  // n1 and n3 get their fresh chance
  Beat("n1");
  clock_.Advance(absl::Seconds(10));
  head_->Tick();  // n1 was heard since: another one; n3 was not
  EXPECT_TRUE(Beat("n1"));
  EXPECT_FALSE(Beat("n3"));
}

// The head's own clock, counting its reads (so a test knows a handler has stamped its arrival).
class CountingClock : public Clock {
 public:
  explicit CountingClock(FakeClock* inner) : inner_(inner) {}
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    ++reads_;
    return inner_->Now();
  }
  void SleepFor(absl::Duration d) override { inner_->SleepFor(d); }
  bool AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& condition, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) override {
    return inner_->AwaitWithDeadline(mu, condition, deadline);
  }
  int reads() const {
    absl::MutexLock lock(&mu_);
    return reads_;
  }
  // Waits until Now() was called more than `reads` times.
  void AwaitReadsAbove(int reads) const {
    absl::MutexLock lock(&mu_);
    threshold_ = reads;
    mu_.Await(absl::Condition(this, &CountingClock::AboveThreshold));
  }

 private:
  bool AboveThreshold() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return reads_ > threshold_; }

  FakeClock* inner_;
  mutable absl::Mutex mu_;
  mutable int reads_ ABSL_GUARDED_BY(mu_) = 0;
  mutable int threshold_ ABSL_GUARDED_BY(mu_) = 0;
};

// A store whose next Put blocks (its caller holding the head's lock) until released.
class BlockingStore : public InMemoryStateStore {
 public:
  absl::Status Put(std::string_view table, std::string_view key, std::string_view value) override {
    {
      absl::MutexLock lock(&mu_);
      if (armed_) {
        armed_ = false;
        blocked_ = true;
        mu_.Await(absl::Condition(
            +[](bool* blocked) { return !*blocked; }, &blocked_));
      }
    }
    return InMemoryStateStore::Put(table, key, value);
  }
  void BlockNextPut() {
    absl::MutexLock lock(&mu_);
    armed_ = true;
  }
  void AwaitBlocked() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&blocked_));
  }
  void Unblock() {
    absl::MutexLock lock(&mu_);
    blocked_ = false;
  }

 private:
  absl::Mutex mu_;
  bool armed_ ABSL_GUARDED_BY(mu_) = false;
  bool blocked_ ABSL_GUARDED_BY(mu_) = false;
};

TEST(HeadServiceBusyTest, AHeartbeatQueuedBehindASlowRequestCountsFromItsArrival) {
  FakeClock fake;
  CountingClock clock(&fake);
  BlockingStore store;
  HeadServiceOptions options;
  options.heartbeat_interval = absl::Seconds(4);
  options.node_timeout = absl::Seconds(5);
  options.clock = &clock;
  options.store = &store;
  options.agent_clients = [](const std::string&, const std::string&) {
    return std::make_shared<FakeAgent>();
  };
  HeadService head(std::move(options));
  v1::RegisterNodeRequest request;
  wire::NodeToProto(Spec("n1", "CPU=4", {}), "127.0.0.1:1", "i1", request.mutable_node());
  v1::RegisterNodeResponse registered;
  ASSERT_TRUE(head.nodes().RegisterNode(nullptr, &request, &registered).ok());
  fake.Advance(absl::Seconds(3));
  head.Tick();

  // A request holds the head's lock (its state-store write hangs) ...
  store.BlockNextPut();
  std::thread slow([&] {
    v1::CreatePlacementGroupRequest create;
    create.set_name("pg");
    create.set_strategy(v1::PLACEMENT_STRATEGY_PACK);
    wire::ResourcesToProto(Res("CPU=1"),
                           create.mutable_primary()->add_bundles()->mutable_resources());
    v1::PlacementGroupInfo info;
    (void)head.reservations().CreatePlacementGroup(nullptr, &create, &info);
  });
  store.AwaitBlocked();
  fake.Advance(absl::Seconds(1));
  // ... while n1's heartbeat arrives (t = 4 s) and waits for it.
  const int reads = clock.reads();
  v1::HeartbeatResponse beat_response;
  std::thread beat([&] {
    v1::HeartbeatRequest beat_request;
    beat_request.set_node_id("n1");
    beat_request.set_incarnation("i1");
    EXPECT_TRUE(head.nodes().Heartbeat(nullptr, &beat_request, &beat_response).ok());
  });
  clock.AwaitReadsAbove(reads);            // stamped on arrival
  fake.Advance(absl::Milliseconds(1500));  // t = 5.5 s: past the timeout since registration
  store.Unblock();
  slow.join();
  beat.join();
  EXPECT_TRUE(beat_response.known());
  head.Tick();
  v1::ListNodesResponse nodes;
  v1::ListRequest list;
  ASSERT_TRUE(head.nodes().ListNodes(nullptr, &list, &nodes).ok());
  ASSERT_EQ(nodes.nodes_size(), 1);
  EXPECT_EQ(nodes.nodes(0).state(), v1::NODE_STATE_ALIVE);
  // Heard at its arrival, not when the lock let it in.
  EXPECT_EQ(nodes.nodes(0).last_heartbeat_age_ms(), 1500);
}

// --- Drivers own their reservations ---

class DriverLifetimeTest : public HeadServiceTest {
 protected:
  void SetUp() override {
    for (int w = 0; w < 4; ++w) {
      Register(absl::StrCat("s1-w", w), "CPU=8,TPU=4", head_testing::V6e4x4HostLabels("s1", w));
    }
  }
  void OwnedGroup(const std::string& name, const std::string& owner) {
    v1::CreatePlacementGroupRequest request;
    request.set_name(name);
    request.set_strategy(v1::PLACEMENT_STRATEGY_PACK);
    request.set_owner(owner);
    wire::ResourcesToProto(Res("CPU=1"),
                           request.mutable_primary()->add_bundles()->mutable_resources());
    v1::PlacementGroupInfo info;
    ASSERT_TRUE(head_->reservations().CreatePlacementGroup(nullptr, &request, &info).ok());
    ASSERT_EQ(info.state(), v1::PLACEMENT_GROUP_STATE_CREATED) << info.explanation();
    EXPECT_EQ(info.owner(), owner);
  }
  void OwnedSlice(const std::string& name, const std::string& owner) {
    v1::ReserveSlicesRequest request;
    request.set_name(name);
    request.set_owner(owner);
    auto* alt = request.add_alternatives();
    SetV6e4x4(alt);
    v1::SliceGroupInfo info;
    ASSERT_TRUE(head_->reservations().ReserveSlices(nullptr, &request, &info).ok());
    ASSERT_EQ(info.state(), v1::SLICE_GROUP_STATE_RESERVED) << info.explanation();
    EXPECT_EQ(info.owner(), owner);
  }
  bool SliceExists(const std::string& name) {
    v1::ListSlicesResponse list;
    v1::ListRequest request;
    EXPECT_TRUE(head_->reservations().ListSlices(nullptr, &request, &list).ok());
    for (const auto& g : list.groups()) {
      if (g.name() == name) return true;
    }
    return false;
  }
  void KeepAlive(const std::string& driver) {
    v1::KeepDriverAliveRequest request;
    request.set_driver_id(driver);
    v1::KeepDriverAliveResponse response;
    ASSERT_TRUE(head_->reservations().KeepDriverAlive(nullptr, &request, &response).ok());
    EXPECT_EQ(response.timeout_ms(), 10000);
  }
  // Time passes with every node beating (only drivers fall silent).
  void Pass(absl::Duration d, const std::vector<std::string>& alive_drivers = {}) {
    for (absl::Duration t; t < d; t += absl::Milliseconds(500)) {
      clock_.Advance(absl::Milliseconds(500));
      for (int w = 0; w < 4; ++w) Beat(absl::StrCat("s1-w", w));
      for (const std::string& driver : alive_drivers) KeepAlive(driver);
      head_->Tick();
    }
  }
};

TEST_F(DriverLifetimeTest, ADriverThatFallsSilentLosesWhatItOwnsAndOnlyThat) {
  OwnedGroup("mine", "driver-a");
  OwnedSlice("train", "driver-a");
  OwnedGroup("theirs", "driver-b");
  OwnedGroup("detached", "");
  ASSERT_EQ(Held(true).size(), 7u);  // the slice on its 4 hosts, three groups of one bundle
  // Both drivers keep themselves alive past the timeout: nothing is released.
  Pass(absl::Seconds(15), {"driver-a", "driver-b"});
  EXPECT_EQ(Find("mine").state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_TRUE(SliceExists("train"));
  // driver-a stops (killed): after the timeout its group and slice are given back to the agents.
  Pass(absl::Seconds(11), {"driver-b"});
  EXPECT_EQ(Find("mine").name(), "");
  EXPECT_FALSE(SliceExists("train"));
  EXPECT_EQ(Find("theirs").state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(Find("detached").state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  for (const std::string& held : Held()) {
    EXPECT_FALSE(absl::StartsWith(held, "mine[")) << held;
    EXPECT_FALSE(absl::StartsWith(held, "train[")) << held;
  }
  bool noted = false;
  const v1::ClusterStatus status = Status();
  for (const std::string& event : status.events()) {
    noted = noted ||
            absl::StrContains(event, "driver driver-a fell silent for 10s: released mine, train");
  }
  EXPECT_TRUE(noted);
  // A detached group outlives every driver.
  Pass(absl::Seconds(11));
  EXPECT_EQ(Find("detached").state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(Find("theirs").name(), "");
}

TEST_F(DriverLifetimeTest, ADriverThatExitsReleasesAtOnce) {
  OwnedGroup("mine", "driver-a");
  OwnedSlice("train", "driver-a");
  v1::DriverExitedRequest request;
  request.set_driver_id("driver-a");
  v1::DriverExitedResponse response;
  ASSERT_TRUE(head_->reservations().DriverExited(nullptr, &request, &response).ok());
  EXPECT_EQ(std::set<std::string>(response.released().begin(), response.released().end()),
            (std::set<std::string>{"mine", "train"}));
  EXPECT_EQ(Find("mine").name(), "");
  EXPECT_FALSE(SliceExists("train"));
  EXPECT_TRUE(Held().empty());
  // Again: nothing left to release, and that is not an error.
  ASSERT_TRUE(head_->reservations().DriverExited(nullptr, &request, &response).ok());
  v1::KeepDriverAliveRequest empty;
  v1::KeepDriverAliveResponse ignored;
  EXPECT_EQ(head_->reservations().KeepDriverAlive(nullptr, &empty, &ignored).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

// Agents learn of gone drivers from heartbeat responses (their stores free what those owned):
// an exited driver at once, a silent one after the timeout, each for a minute.
TEST_F(DriverLifetimeTest, GoneDriversAreNamedInHeartbeatResponsesForAMinute) {
  auto gone = [&] {
    v1::HeartbeatRequest request;
    request.set_node_id("s1-w0");
    request.set_incarnation("i1");
    v1::HeartbeatResponse response;
    EXPECT_TRUE(head_->nodes().Heartbeat(nullptr, &request, &response).ok());
    return std::vector<std::string>(response.gone_drivers().begin(), response.gone_drivers().end());
  };
  KeepAlive("driver-a");
  KeepAlive("driver-b");
  EXPECT_TRUE(gone().empty());
  v1::DriverExitedRequest request;
  request.set_driver_id("driver-a");
  v1::DriverExitedResponse response;
  ASSERT_TRUE(head_->reservations().DriverExited(nullptr, &request, &response).ok());
  EXPECT_EQ(gone(), std::vector<std::string>{"driver-a"});
  Pass(absl::Seconds(11));  // driver-b falls silent past the 10 s timeout
  EXPECT_EQ(gone(), (std::vector<std::string>{"driver-b", "driver-a"}));
  Pass(absl::Seconds(50));
  EXPECT_EQ(gone(), std::vector<std::string>{"driver-b"});
  Pass(absl::Seconds(11));
  EXPECT_TRUE(gone().empty());
}

// --- nodes listed in pages; jobs a dead node presumed failed ---

// Every node id the head lists, paging through with `page_size`; `sizes` gets each page's size,
// `states` each node's state.
std::vector<std::string> ListedNodes(HeadService& head, int page_size,
                                     std::vector<int>* sizes = nullptr,
                                     std::map<std::string, v1::NodeState>* states = nullptr) {
  std::vector<std::string> ids;
  v1::ListRequest request;
  request.set_page_size(page_size);
  for (int pages = 0; pages < 1000; ++pages) {
    v1::ListNodesResponse page;
    grpc::Status status = head.nodes().ListNodes(nullptr, &request, &page);
    EXPECT_TRUE(status.ok()) << status.error_message();
    if (!status.ok()) break;
    if (sizes != nullptr) sizes->push_back(page.nodes_size());
    for (const v1::NodeInfo& node : page.nodes()) {
      ids.push_back(node.node().node_id());
      if (states != nullptr) (*states)[node.node().node_id()] = node.state();
    }
    if (page.next_page_token().empty()) break;
    request.set_page_token(page.next_page_token());
  }
  return ids;
}

TEST_F(HeadServiceTest, NodesArePagedByIdEachExactlyOnceUpToTheCap) {
  HeadServiceOptions options = Options();
  options.max_page_size = 3;
  head_ = std::make_unique<HeadService>(std::move(options));
  std::vector<std::string> ids;
  for (int i = 0; i < 8; ++i) {
    ids.push_back(absl::StrCat("n", (i * 5) % 8));  // registered out of id order
    Register(ids.back());
  }
  std::sort(ids.begin(), ids.end());
  std::vector<int> sizes;
  EXPECT_EQ(ListedNodes(*head_, 0, &sizes), ids);  // 0: the head's page size
  EXPECT_EQ(sizes, (std::vector<int>{3, 3, 2}));
  sizes.clear();
  EXPECT_EQ(ListedNodes(*head_, 1000, &sizes), ids);  // capped at max_page_size
  EXPECT_EQ(sizes, (std::vector<int>{3, 3, 2}));
  sizes.clear();
  EXPECT_EQ(ListedNodes(*head_, 2, &sizes), ids);
  EXPECT_EQ(sizes, (std::vector<int>{2, 2, 2, 2}));

  // The registry changes between pages: the rest resumes after the last id listed, so a node
  // registered after it comes, one before it does not, and none comes twice.
  v1::ListRequest request;
  v1::ListNodesResponse first;
  ASSERT_TRUE(head_->nodes().ListNodes(nullptr, &request, &first).ok());
  ASSERT_EQ(first.nodes_size(), 3);
  EXPECT_EQ(first.next_page_token(), "nodes:n2");
  Register("n00");  // sorts before n2
  Register("n9");   // sorts after every node
  std::vector<std::string> seen;
  for (const auto& node : first.nodes()) seen.push_back(node.node().node_id());
  request.set_page_token(first.next_page_token());
  while (!request.page_token().empty()) {
    v1::ListNodesResponse page;
    ASSERT_TRUE(head_->nodes().ListNodes(nullptr, &request, &page).ok());
    for (const auto& node : page.nodes()) seen.push_back(node.node().node_id());
    request.set_page_token(page.next_page_token());
  }
  std::vector<std::string> expected = ids;
  expected.push_back("n9");
  EXPECT_EQ(seen, expected);

  // Dead nodes are listed too, in their place.
  for (int i = 0; i < 12; ++i) {
    clock_.Advance(absl::Milliseconds(500));
    for (const std::string& id : ids) {
      if (id != "n3") Beat(id);
    }
    Beat("n00");
    Beat("n9");
    head_->Tick();
  }
  std::map<std::string, v1::NodeState> states;
  EXPECT_EQ(ListedNodes(*head_, 0, nullptr, &states).size(), ids.size() + 2);
  EXPECT_EQ(states["n3"], v1::NODE_STATE_DEAD);
  EXPECT_EQ(states["n4"], v1::NODE_STATE_ALIVE);
}

TEST_F(HeadServiceTest, BadNodePageRequestsAreRefused) {
  Register("n1");
  v1::ListRequest request;
  v1::ListNodesResponse nodes;
  request.set_page_size(-2);
  ExpectRefused(head_->nodes().ListNodes(nullptr, &request, &nodes), "page_size: -2 is negative");
  request.set_page_size(0);
  request.set_page_token("jobs:3");
  ExpectRefused(head_->nodes().ListNodes(nullptr, &request, &nodes),
                "page_token: \"jobs:3\" is not a page token of the nodes listing");
  request.set_page_token("nodes:");
  ExpectRefused(head_->nodes().ListNodes(nullptr, &request, &nodes),
                "page_token: \"nodes:\" is not a page token of the nodes listing");
  request.set_page_token(std::string(limits::kMaxPageTokenBytes + 1, 't'));
  ExpectRefused(head_->nodes().ListNodes(nullptr, &request, &nodes),
                "page_token has 1025 bytes; at most 1024 are allowed");
}

// Records `job` and returns the head's record after it.
v1::JobInfo Record(HeadService& head, const std::string& id, v1::JobState state,
                   const std::string& node = "", const std::string& exit_reason = "") {
  v1::RecordJobRequest request;
  request.mutable_job()->set_job_id(id);
  request.mutable_job()->set_state(state);
  request.mutable_job()->set_node_id(node);
  request.mutable_job()->set_exit_reason(exit_reason);
  v1::JobInfo recorded;
  grpc::Status status = head.jobs().RecordJob(nullptr, &request, &recorded);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return recorded;
}

v1::JobInfo ListedJob(HeadService& head, const std::string& id) {
  v1::ListRequest request;
  v1::ListJobsResponse jobs;
  EXPECT_TRUE(head.jobs().ListJobs(nullptr, &request, &jobs).ok());
  for (const v1::JobInfo& job : jobs.jobs()) {
    if (job.job_id() == id) return job;
  }
  return v1::JobInfo();
}

TEST_F(HeadServiceTest, AJobsRealEndReplacesTheFailureItsNodesDeathMadePresumed) {
  Register("n1");
  Register("n2");
  Record(*head_, "comes-back", v1::JOB_STATE_RUNNING, "n1");
  Record(*head_, "fails-for-real", v1::JOB_STATE_RUNNING, "n1");
  Record(*head_, "ended-before", v1::JOB_STATE_RUNNING, "n1");
  Record(*head_, "ended-before", v1::JOB_STATE_FAILED, "", "exited with code 2");
  // A recorder cannot claim a presumption of its own.
  v1::RecordJobRequest claimed;
  claimed.mutable_job()->set_job_id("claims");
  claimed.mutable_job()->set_node_id("n2");
  claimed.mutable_job()->set_failure_presumed(true);
  v1::JobInfo claimed_record;
  ASSERT_TRUE(head_->jobs().RecordJob(nullptr, &claimed, &claimed_record).ok());
  EXPECT_FALSE(claimed_record.failure_presumed());

  // n1 goes silent (its agent paused) and is declared dead: its running jobs fail, presumed.
  for (int i = 0; i < 12; ++i) {
    clock_.Advance(absl::Milliseconds(500));
    Beat("n2");
    head_->Tick();
  }
  ASSERT_EQ(NodeState(*head_, "n1"), v1::NODE_STATE_DEAD);
  for (const char* id : {"comes-back", "fails-for-real"}) {
    const v1::JobInfo job = ListedJob(*head_, id);
    EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED) << id;
    EXPECT_TRUE(job.failure_presumed()) << id;
    EXPECT_TRUE(absl::StartsWith(job.exit_reason(), "node n1 was declared dead: no heartbeat"))
        << job.exit_reason();
  }
  EXPECT_TRUE(AnyEventHas(head_->events(), "2 running jobs are presumed failed"));
  // A job that had ended already keeps its own end.
  EXPECT_EQ(ListedJob(*head_, "ended-before").exit_reason(), "exited with code 2");
  EXPECT_FALSE(ListedJob(*head_, "ended-before").failure_presumed());

  // The same agent comes back; a repeated start record changes nothing.
  v1::RegisterNodeResponse registered;
  ASSERT_TRUE(head_->nodes().RegisterNode(nullptr, &requests_["n1"], &registered).ok());
  EXPECT_TRUE(Beat("n1"));
  EXPECT_EQ(Record(*head_, "comes-back", v1::JOB_STATE_RUNNING, "n1").state(),
            v1::JOB_STATE_FAILED);

  // The worker ran to its end meanwhile: its recorder's SUCCEEDED replaces the presumption.
  clock_.Advance(absl::Seconds(1));
  const v1::JobInfo succeeded =
      Record(*head_, "comes-back", v1::JOB_STATE_SUCCEEDED, "n1", "exited with code 0");
  EXPECT_EQ(succeeded.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(succeeded.exit_reason(), "exited with code 0");
  EXPECT_FALSE(succeeded.failure_presumed());
  EXPECT_EQ(succeeded.end_time_ms(), absl::ToUnixMillis(clock_.Now()));
  EXPECT_EQ(ListedJob(*head_, "comes-back").state(), v1::JOB_STATE_SUCCEEDED);
  v1::JobInfo stored;
  ASSERT_TRUE(stored.ParseFromString(**store_.Get(kJobsTable, "comes-back")));
  EXPECT_EQ(stored.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_FALSE(stored.failure_presumed());
  EXPECT_TRUE(AnyEventHas(head_->events(), "job comes-back ended SUCCEEDED after all"));

  // A real failure replaces the presumed one too, and from then on it stands.
  const v1::JobInfo failed =
      Record(*head_, "fails-for-real", v1::JOB_STATE_FAILED, "", "exited with code 3");
  EXPECT_EQ(failed.exit_reason(), "exited with code 3");
  EXPECT_FALSE(failed.failure_presumed());
  for (const char* id : {"fails-for-real", "ended-before"}) {
    const v1::JobInfo again = Record(*head_, id, v1::JOB_STATE_SUCCEEDED, "", "exited with code 0");
    EXPECT_EQ(again.state(), v1::JOB_STATE_FAILED) << id;
    EXPECT_NE(again.exit_reason(), "exited with code 0") << id;
    EXPECT_EQ(ListedJob(*head_, id).state(), v1::JOB_STATE_FAILED) << id;
  }
  // And an ended job is not failed again.
  EXPECT_EQ(Record(*head_, "comes-back", v1::JOB_STATE_FAILED, "", "late").state(),
            v1::JOB_STATE_SUCCEEDED);
}

TEST_F(HeadServiceTest, AJobsRealEndIsTakenAlsoBeforeItsNodeIsHeardFromAgain) {
  // The recorder heard the worker's end from the agent while the head still counts the node dead
  // (its re-registration has not arrived yet): the recorder's word is the evidence.
  Register("n1");
  Register("n2");
  Record(*head_, "j", v1::JOB_STATE_RUNNING, "n1");
  for (int i = 0; i < 12; ++i) {
    clock_.Advance(absl::Milliseconds(500));
    Beat("n2");
    head_->Tick();
  }
  ASSERT_EQ(NodeState(*head_, "n1"), v1::NODE_STATE_DEAD);
  ASSERT_TRUE(ListedJob(*head_, "j").failure_presumed());
  EXPECT_EQ(Record(*head_, "j", v1::JOB_STATE_SUCCEEDED, "", "exited with code 0").state(),
            v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(ListedJob(*head_, "j").state(), v1::JOB_STATE_SUCCEEDED);
}

TEST_F(HeadServiceTest, ARequestIntoAGroupStillWaitingForRoomWaitsUnlessItsBundleCannotExist) {
  Register("n1", "CPU=4");
  ASSERT_EQ(Create("first", v1::PLACEMENT_STRATEGY_PACK, {"CPU=3"}).state(),
            v1::PLACEMENT_GROUP_STATE_CREATED);
  v1::PlacementGroupInfo info = Create("later", v1::PLACEMENT_STRATEGY_PACK, {"CPU=2", "CPU=1"});
  ASSERT_EQ(info.state(), v1::PLACEMENT_GROUP_STATE_PENDING);
  v1::PickNodeRequest inside;
  inside.mutable_request()->set_placement_group("later");
  wire::ResourcesToProto(Res("CPU=1"), inside.mutable_request()->mutable_resources());
  v1::PickNodeResponse picked;
  inside.mutable_request()->set_bundle_index(1);
  ASSERT_TRUE(head_->nodes().PickNode(nullptr, &inside, &picked).ok());
  EXPECT_EQ(picked.status(), v1::PICK_STATUS_PENDING) << picked.explanation();
  inside.mutable_request()->set_bundle_index(5);
  ASSERT_TRUE(head_->nodes().PickNode(nullptr, &inside, &picked).ok());
  EXPECT_EQ(picked.status(), v1::PICK_STATUS_INFEASIBLE);
  EXPECT_EQ(picked.explanation(), "later has 2 bundles; there is no bundle 5");
}

// --- A head restarted on its state store comes back with what it held ---

class HeadRestartTest : public DriverLifetimeTest {
 protected:
  void Restart() {
    head_.reset();  // the old head is gone (its agents, the fakes, keep what they hold)
    head_ = std::make_unique<HeadService>(Options());
    absl::Status restored = head_->Restore();
    ASSERT_TRUE(restored.ok()) << restored;
  }
  std::map<std::string, std::string> SliceHosts(const std::string& name) {
    v1::ListSlicesResponse list;
    v1::ListRequest request;
    EXPECT_TRUE(head_->reservations().ListSlices(nullptr, &request, &list).ok());
    std::map<std::string, std::string> hosts;
    for (const auto& g : list.groups()) {
      if (g.name() != name) continue;
      hosts["state"] = std::string(rpc::SliceGroupStateName(g.state()));
      for (const auto& h : g.hosts()) hosts[h.node_id()] = h.allocation().DebugString();
    }
    return hosts;
  }
  int Prepares() {
    int n = 0;
    for (const auto& [node, agent] : agents_) n += agent->prepares();
    return n;
  }
  int Cancels() {
    int n = 0;
    for (const auto& [node, agent] : agents_) n += agent->cancels();
    return n;
  }
};

TEST_F(HeadRestartTest, EveryGroupSliceJobAndNodeComesBackExactlyAndNothingIsRedone) {
  Register("n1", "CPU=4,GPU=2");
  v1::PlacementGroupInfo group =
      Create("pg", v1::PLACEMENT_STRATEGY_PACK, {"CPU=1,GPU=1", "CPU=2"});
  ASSERT_EQ(group.state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  OwnedSlice("train", "");
  v1::RecordJobRequest job;
  job.mutable_job()->set_job_id("job-1");
  job.mutable_job()->set_node_id("n1");
  job.mutable_job()->set_state(v1::JOB_STATE_RUNNING);
  job.mutable_job()->set_start_time_ms(1);
  v1::JobInfo recorded;
  ASSERT_TRUE(head_->jobs().RecordJob(nullptr, &job, &recorded).ok());
  const std::map<std::string, std::string> slice_before = SliceHosts("train");
  const int64_t cpu_before = Used("CPU");
  const int64_t gpu_before = Used("GPU");
  const std::set<std::string> held_before = Held(true);
  const int prepares = Prepares();
  const int cancels = Cancels();

  Restart();
  v1::PlacementGroupInfo again = Find("pg");
  EXPECT_EQ(again.state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(again.id(), group.id());
  ASSERT_EQ(again.bundles_size(), 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(again.bundles(i).node_id(), group.bundles(i).node_id());
    EXPECT_EQ(again.bundles(i).allocation().DebugString(),
              group.bundles(i).allocation().DebugString());
  }
  EXPECT_EQ(SliceHosts("train"), slice_before);
  EXPECT_EQ(Used("CPU"), cpu_before);
  EXPECT_EQ(Used("GPU"), gpu_before);
  v1::ListJobsResponse jobs;
  v1::ListRequest list;
  ASSERT_TRUE(head_->jobs().ListJobs(nullptr, &list, &jobs).ok());
  ASSERT_EQ(jobs.jobs_size(), 1);
  EXPECT_EQ(jobs.jobs(0).state(), v1::JOB_STATE_RUNNING);
  // The agents keep heartbeating the same incarnation: known at once, and nothing is prepared
  // or cancelled again on them.
  EXPECT_TRUE(Beat("n1"));
  Pass(absl::Seconds(3));
  Beat("n1");
  EXPECT_EQ(Prepares(), prepares);
  EXPECT_EQ(Cancels(), cancels);
  EXPECT_EQ(Held(true), held_before);
  EXPECT_EQ(Find("pg").state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  // New names do not collide with the restored ones.
  v1::PlacementGroupInfo next = Create("", v1::PLACEMENT_STRATEGY_PACK, {"CPU=1"});
  EXPECT_NE(next.id(), group.id());
}

TEST_F(HeadRestartTest, ANodeThatNeverComesBackIsDeclaredDeadAndItsWorkHandledAsALoss) {
  Register("n1", "CPU=4,GPU=1");
  Create("pg", v1::PLACEMENT_STRATEGY_PACK, {"GPU=1"});
  ASSERT_EQ(Find("pg").bundles(0).node_id(), "n1");
  OwnedSlice("train", "");
  Restart();
  // n1 stays silent; the slice hosts beat.
  Pass(absl::Seconds(6));
  v1::ListNodesResponse nodes;
  v1::ListRequest list;
  ASSERT_TRUE(head_->nodes().ListNodes(nullptr, &list, &nodes).ok());
  for (const auto& n : nodes.nodes()) {
    EXPECT_EQ(n.state(), n.node().node_id() == "n1" ? v1::NODE_STATE_DEAD : v1::NODE_STATE_ALIVE)
        << n.node().node_id();
  }
  // Its bundle was lost with n1: nowhere else has a GPU, so the group waits for one.
  EXPECT_EQ(Find("pg").state(), v1::PLACEMENT_GROUP_STATE_RESCHEDULING);
  EXPECT_EQ(Find("pg").bundles(0).node_id(), "");
  EXPECT_EQ(SliceHosts("train")["state"], rpc::SliceGroupStateName(v1::SLICE_GROUP_STATE_RESERVED));
}

TEST_F(HeadRestartTest, AnUnreadableRecordStopsTheRestoreNamingIt) {
  ASSERT_TRUE(store_.Put(kPlacementGroupsTable, "broken", "not a record").ok());
  head_ = std::make_unique<HeadService>(Options());
  absl::Status restored = head_->Restore();
  EXPECT_EQ(restored.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(restored.message(), "table placement_groups, key broken"))
      << restored;
}

bool AnyEvent(const v1::ClusterStatus& status, std::string_view text) {
  return std::any_of(status.events().begin(), status.events().end(), [&](const std::string& event) {
    return absl::StrContains(event, ToAbsl(text));
  });
}

TEST_F(HeadServiceTest, WithTheStoreDownNothingIsAcknowledgedAndNothingChanges) {
  FailingStateStore failing;
  HeadServiceOptions options = Options();
  options.store = &failing;
  head_ = std::make_unique<HeadService>(options);
  Register("n1", "CPU=4");
  ASSERT_EQ(Create("doomed", v1::PLACEMENT_STRATEGY_PACK, {"CPU=1"}).state(),
            v1::PLACEMENT_GROUP_STATE_CREATED);
  const std::set<std::string> held = Held();
  failing.fail = true;

  // The write that finds the store down: refused, and the group was never made.
  grpc::Status status;
  Create("new", v1::PLACEMENT_STRATEGY_PACK, {"CPU=1"}, &status, "req-new");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(absl::StrContains(status.error_message(),
                                "state store unavailable: could not write "
                                "placement_groups/new: redis at unix:/x"))
      << status.error_message();
  EXPECT_TRUE(absl::StrContains(status.error_message(), "; nothing was changed"));
  EXPECT_TRUE(Find("new").name().empty());
  EXPECT_EQ(Held(), held);  // nothing asked of the agents
  EXPECT_EQ(Used("CPU"), 10000);
  v1::ClusterStatus degraded = Status();
  EXPECT_TRUE(degraded.state_store().degraded());
  EXPECT_TRUE(AnyEvent(degraded, "the state store is degraded: could not write"));

  // Degraded: removals, jobs and KV writes are refused at once, changing nothing.
  v1::RemovePlacementGroupRequest remove;
  remove.set_name("doomed");
  v1::RemovePlacementGroupResponse removed;
  EXPECT_EQ(head_->reservations().RemovePlacementGroup(nullptr, &remove, &removed).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Find("doomed").state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_EQ(Held(), held);
  v1::RecordJobRequest job;
  job.mutable_job()->set_job_id("job-1");
  job.mutable_job()->set_state(v1::JOB_STATE_RUNNING);
  v1::JobInfo recorded;
  EXPECT_EQ(head_->jobs().RecordJob(nullptr, &job, &recorded).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  v1::ListJobsResponse jobs;
  v1::ListRequest list;
  ASSERT_TRUE(head_->jobs().ListJobs(nullptr, &list, &jobs).ok());
  EXPECT_EQ(jobs.jobs_size(), 0);
  v1::KvPutRequest put;
  put.set_key("k");
  put.set_value("v");
  v1::KvPutResponse put_response;
  EXPECT_EQ(head_->kv().KvPut(nullptr, &put, &put_response).error_code(),
            grpc::StatusCode::UNAVAILABLE);

  // Still down at the next check; back at the one after.
  head_->CheckStateStore();
  EXPECT_TRUE(Status().state_store().degraded());
  failing.fail = false;
  head_->CheckStateStore();
  const v1::ClusterStatus back = Status();
  EXPECT_FALSE(back.state_store().degraded());
  EXPECT_TRUE(AnyEvent(back, "the state store is back"));
  // The same request id runs again now (the refusal was not kept as its answer).
  EXPECT_EQ(Create("new", v1::PLACEMENT_STRATEGY_PACK, {"CPU=1"}, nullptr, "req-new").state(),
            v1::PLACEMENT_GROUP_STATE_CREATED);
  EXPECT_TRUE(failing.Get(kPlacementGroupsTable, "new")->has_value());
  ASSERT_TRUE(head_->reservations().RemovePlacementGroup(nullptr, &remove, &removed).ok());
  EXPECT_FALSE(failing.Get(kPlacementGroupsTable, "doomed")->has_value());
  ASSERT_TRUE(head_->jobs().RecordJob(nullptr, &job, &recorded).ok());
  EXPECT_TRUE(failing.Get(kJobsTable, "job-1")->has_value());
}

TEST_F(HeadServiceTest, TheHeadsOwnWritesAreKeptWhileTheStoreIsDownAndMadeOnceItIsBack) {
  FailingStateStore failing;
  HeadServiceOptions options = Options();
  options.store = &failing;
  head_ = std::make_unique<HeadService>(options);
  Register("n1", "CPU=4");
  Register("n2", "CPU=4");
  ASSERT_EQ(Create("g", v1::PLACEMENT_STRATEGY_PACK, {"CPU=4"}).state(),
            v1::PLACEMENT_GROUP_STATE_CREATED);
  const std::string node = Find("g").bundles(0).node_id();
  const std::string other = node == "n1" ? "n2" : "n1";
  failing.fail = true;
  // A registration and a node's death are the head's own: never refused, kept for later.
  Register("n3", "CPU=1");
  for (int i = 0; i < 12; ++i) {
    clock_.Advance(absl::Milliseconds(500));
    Beat(other);
    Beat("n3");
    head_->Tick();
  }
  const v1::ClusterStatus degraded = Status();
  EXPECT_TRUE(degraded.state_store().degraded());
  EXPECT_GE(degraded.state_store().pending_writes(), 2);
  EXPECT_FALSE(failing.Get(kNodesTable, "n3")->has_value());
  const v1::PlacementGroupInfo moved = Find("g");
  EXPECT_NE(moved.bundles(0).node_id(), node);

  failing.fail = false;
  head_->CheckStateStore();
  EXPECT_FALSE(Status().state_store().degraded());
  EXPECT_EQ(Status().state_store().pending_writes(), 0);
  EXPECT_TRUE(failing.Get(kNodesTable, "n3")->has_value());
  // The latest record of the group, as the head holds it now.
  v1::StoredPlacementGroup stored;
  ASSERT_TRUE(stored.ParseFromString(**failing.Get(kPlacementGroupsTable, "g")));
  EXPECT_EQ(stored.info().ShortDebugString(), Find("g").ShortDebugString());
}

TEST_F(HeadServiceTest, AnInMemoryStoreNeverDegrades) {
  Register("n1");
  head_->CheckStateStore();
  head_->Tick();
  EXPECT_FALSE(Status().state_store().degraded());
  EXPECT_EQ(Status().state_store().failed_writes(), 0);
}

// Found by head_service_fuzzer: a device count without devices used to size a vector.
TEST_F(HeadServiceTest, ANodeClaimingBillionsOfDevicesIsRefusedNotAllocated) {
  for (const char* count : {"GPU=2147483648", "GPU=2000000000", "GPU=4097"}) {
    v1::RegisterNodeRequest request = NodeRequest("huge", count);
    v1::RegisterNodeResponse response;
    grpc::Status status = head_->nodes().RegisterNode(nullptr, &request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << count;
    EXPECT_TRUE(absl::StrContains(status.error_message(), "devices a node may have"))
        << status.error_message();
  }
  v1::ListNodesResponse nodes;
  v1::ListRequest list;
  ASSERT_TRUE(head_->nodes().ListNodes(nullptr, &list, &nodes).ok());
  EXPECT_EQ(nodes.nodes_size(), 0);
}

TEST_F(HeadRestartTest, ACreateRetriedToTheRestartedHeadIsAnsweredWithTheGroupItMade) {
  Register("n1", "CPU=4");
  // An anonymous group: a retry that were applied again would make a second one.
  v1::PlacementGroupInfo first =
      Create("", v1::PLACEMENT_STRATEGY_PACK, {"CPU=2"}, nullptr, "req-1");
  ASSERT_EQ(first.state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  Restart();
  v1::PlacementGroupInfo retried =
      Create("", v1::PLACEMENT_STRATEGY_PACK, {"CPU=2"}, nullptr, "req-1");
  EXPECT_EQ(retried.name(), first.name());
  EXPECT_EQ(retried.state(), v1::PLACEMENT_GROUP_STATE_CREATED);
  v1::ListPlacementGroupsResponse list;
  v1::ListRequest request;
  ASSERT_TRUE(head_->reservations().ListPlacementGroups(nullptr, &request, &list).ok());
  EXPECT_EQ(list.groups_size(), 1);
  EXPECT_EQ(Prepares(), 1);  // nothing prepared again
}

}  // namespace
}  // namespace tessera

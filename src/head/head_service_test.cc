// Unit tests of the head's state and service with a FakeClock and fake node agents: registration,
// heartbeats, death after the timeout with bundles re-placed, two-phase commit rollback,
// request-id deduplication, malformed requests, and head-restart registration.
#include "head/head_service.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "hardware/node_label_keys.h"
#include "rpc/proto_convert.h"
#include "scheduling/scheduling_test_util.h"

namespace tessera {
namespace {

using testing_util::Res;
using testing_util::Spec;

// A node agent that keeps the bundles the head prepares and commits (in one step when the
// prepare says so), and fails on demand.
// Thread-safe.
class FakeAgent : public NodeAgentClient {
 public:
  struct Held {
    bool committed = false;
    rpc::ExactAllocation allocation;
  };

  absl::Status Prepare(const v1::PrepareBundlesRequest& request) override {
    absl::MutexLock lock(&mu_);
    ++prepares_;
    if (!fail_prepare_.ok()) return fail_prepare_;
    for (const auto& bundle : request.bundles()) {
      held_[{request.placement_group(), bundle.bundle_index()}] =
          Held{request.commit(), *rpc::AllocationFromProto(bundle.allocation())};
    }
    return absl::OkStatus();
  }
  absl::Status Commit(const v1::CommitBundlesRequest& request) override {
    absl::MutexLock lock(&mu_);
    ++commits_;
    if (!fail_commit_.ok()) return fail_commit_;
    for (int index : request.bundle_indices()) {
      auto it = held_.find({request.placement_group(), index});
      if (it == held_.end()) return absl::FailedPreconditionError("commit without prepare");
      it->second.committed = true;
    }
    return absl::OkStatus();
  }
  absl::Status Cancel(const v1::CancelBundlesRequest& request) override {
    absl::MutexLock lock(&mu_);
    ++cancels_;
    for (int index : request.bundle_indices()) held_.erase({request.placement_group(), index});
    return absl::OkStatus();
  }

  void FailPrepare(absl::Status status) {
    absl::MutexLock lock(&mu_);
    fail_prepare_ = std::move(status);
  }
  void FailCommit(absl::Status status) {
    absl::MutexLock lock(&mu_);
    fail_commit_ = std::move(status);
  }
  std::map<std::pair<std::string, int>, Held> held() const {
    absl::MutexLock lock(&mu_);
    return held_;
  }
  int prepares() const {
    absl::MutexLock lock(&mu_);
    return prepares_;
  }
  int cancels() const {
    absl::MutexLock lock(&mu_);
    return cancels_;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Status fail_prepare_;
  absl::Status fail_commit_;
  std::map<std::pair<std::string, int>, Held> held_;
  int prepares_ = 0;
  int commits_ = 0;
  int cancels_ = 0;
};

class HeadServiceTest : public ::testing::Test {
 protected:
  HeadServiceTest() {
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
    head_ = std::make_unique<HeadService>(std::move(options));
  }

  v1::RegisterNodeRequest NodeRequest(const std::string& id, std::string_view resources,
                                      LabelSet labels = {}, std::string incarnation = "i1") {
    v1::RegisterNodeRequest request;
    NodeSpec spec = Spec(id, resources, std::move(labels));
    rpc::NodeToProto(spec, "127.0.0.1:1", incarnation, request.mutable_node());
    return request;
  }

  void Register(const std::string& id, std::string_view resources = "CPU=4",
                LabelSet labels = {}) {
    v1::RegisterNodeResponse response;
    grpc::Status status =
        head_->RegisterNode(nullptr, &(*requests_.emplace(id, NodeRequest(id, resources, labels))
                                          .first)
                                          .second,
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
    EXPECT_TRUE(head_->Heartbeat(nullptr, &request, &response).ok());
    return response.known();
  }

  v1::PlacementGroupInfo Create(const std::string& name, const std::string& strategy,
                                const std::vector<std::string>& bundles,
                                grpc::Status* status_out = nullptr,
                                const std::string& request_id = "") {
    v1::CreatePlacementGroupRequest request;
    request.set_name(name);
    request.set_strategy(strategy);
    request.set_request_id(request_id);
    for (const std::string& b : bundles) {
      rpc::ResourcesToProto(Res(b), request.mutable_primary()->add_bundles()->mutable_resources());
    }
    v1::PlacementGroupInfo info;
    grpc::Status status = head_->CreatePlacementGroup(nullptr, &request, &info);
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
    EXPECT_TRUE(head_->ListPlacementGroups(nullptr, &request, &list).ok());
    for (const auto& g : list.groups()) {
      if (g.name() == name) return g;
    }
    return v1::PlacementGroupInfo();
  }

  v1::ClusterStatus Status() {
    v1::ClusterStatus status;
    v1::ListRequest request;
    EXPECT_TRUE(head_->GetClusterStatus(nullptr, &request, &status).ok());
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
  ASSERT_TRUE(head_->ListNodes(nullptr, &list, &nodes).ok());
  ASSERT_EQ(nodes.nodes_size(), 1);
  EXPECT_EQ(nodes.nodes(0).state(), "ALIVE");
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
  rpc::ResourcesToProto(Res("CPU=3"), lease->mutable_allocation()->mutable_resources());
  v1::HeartbeatResponse response;
  ASSERT_TRUE(head_->Heartbeat(nullptr, &beat, &response).ok());
  EXPECT_EQ(Used("CPU"), 30000);
  // The same lease again is not counted twice.
  ASSERT_TRUE(head_->Heartbeat(nullptr, &beat, &response).ok());
  EXPECT_EQ(Used("CPU"), 30000);
  // A group that needs more than is left waits.
  v1::PlacementGroupInfo info = Create("big", "PACK", {"CPU=2"});
  EXPECT_EQ(info.state(), "PENDING");
  // The lease ends: the next heartbeat leaves it out, and the waiting group is placed.
  beat.clear_leases();
  ASSERT_TRUE(head_->Heartbeat(nullptr, &beat, &response).ok());
  EXPECT_EQ(Used("CPU"), 0);
  head_->Tick();
  EXPECT_EQ(Find("big").state(), "CREATED");
}

TEST_F(HeadServiceTest, CreateCommitsOnTheAgentsAndRemoveCancels) {
  Register("n1");
  Register("n2");
  v1::PlacementGroupInfo info = Create("pg", "STRICT_SPREAD", {"CPU=1", "CPU=1"});
  EXPECT_EQ(info.state(), "CREATED");
  ASSERT_EQ(info.bundles_size(), 2);
  std::set<std::string> nodes = {info.bundles(0).node_id(), info.bundles(1).node_id()};
  EXPECT_EQ(nodes, (std::set<std::string>{"n1", "n2"}));
  EXPECT_EQ(Held(true), (std::set<std::string>{
                            absl::StrCat("pg[0]@", info.bundles(0).node_id()),
                            absl::StrCat("pg[1]@", info.bundles(1).node_id())}));
  EXPECT_EQ(Used("CPU"), 20000);

  v1::RemovePlacementGroupRequest remove;
  remove.set_name("pg");
  v1::RemovePlacementGroupResponse removed;
  ASSERT_TRUE(head_->RemovePlacementGroup(nullptr, &remove, &removed).ok());
  EXPECT_EQ(removed.released_size(), 2);
  EXPECT_TRUE(Held().empty());
  EXPECT_EQ(Used("CPU"), 0);
  EXPECT_EQ(head_->RemovePlacementGroup(nullptr, &remove, &removed).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(HeadServiceTest, OneFailingPrepareRollsBackEverythingAndRetriesLater) {
  Register("n1");
  Register("n2");
  Register("n3");
  agents_["n2"]->FailPrepare(absl::UnavailableError("agent n2 is restarting"));
  v1::PlacementGroupInfo info = Create("pg", "STRICT_SPREAD", {"CPU=1", "CPU=1", "CPU=1"});
  EXPECT_EQ(info.state(), "PENDING");
  EXPECT_TRUE(absl::StrContains(info.explanation(), "prepare on n2 failed"))
      << info.explanation();
  // Nothing is held anywhere: not on any agent, not in the head's view.
  EXPECT_TRUE(Held().empty());
  EXPECT_EQ(Used("CPU"), 0);
  EXPECT_GT(agents_["n1"]->cancels() + agents_["n3"]->cancels(), 0);

  // The agent recovers; the group is placed at a later tick.
  agents_["n2"]->FailPrepare(absl::OkStatus());
  clock_.Advance(absl::Seconds(2));
  for (const char* n : {"n1", "n2", "n3"}) Beat(n);
  head_->Tick();
  EXPECT_EQ(Find("pg").state(), "CREATED");
  EXPECT_EQ(Held(true).size(), 3u);
  EXPECT_EQ(Used("CPU"), 30000);
}

TEST_F(HeadServiceTest, FailingCommitRollsBackToo) {
  Register("n1");
  Register("n2");
  agents_["n1"]->FailCommit(absl::DeadlineExceededError("commit timed out"));
  v1::PlacementGroupInfo info = Create("pg", "STRICT_SPREAD", {"CPU=1", "CPU=1"});
  EXPECT_EQ(info.state(), "PENDING");
  EXPECT_TRUE(Held().empty());
  EXPECT_EQ(Used("CPU"), 0);
}

TEST_F(HeadServiceTest, DeadNodeBundlesAreReplacedAndNothingElseIsDisturbed) {
  Register("n1");
  Register("n2");
  Register("n3");
  v1::PlacementGroupInfo spread = Create("spread", "STRICT_SPREAD", {"CPU=1", "CPU=1"});
  ASSERT_EQ(spread.state(), "CREATED");
  const std::string victim = spread.bundles(0).node_id();
  const std::string survivor = spread.bundles(1).node_id();
  // Another group, on the survivor only.
  v1::PlacementGroupInfo pinned = Create("pinned", "PACK", {"CPU=3"});
  ASSERT_EQ(pinned.state(), "CREATED");
  // A job running on the victim.
  v1::RecordJobRequest job;
  job.mutable_job()->set_job_id("job-1");
  job.mutable_job()->set_node_id(victim);
  job.mutable_job()->set_state("RUNNING");
  v1::JobInfo recorded;
  ASSERT_TRUE(head_->RecordJob(nullptr, &job, &recorded).ok());
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
  ASSERT_TRUE(head_->ListNodes(nullptr, &list, &nodes).ok());
  for (const auto& node : nodes.nodes()) {
    EXPECT_EQ(node.state(), node.node().node_id() == victim ? "DEAD" : "ALIVE");
  }
  v1::PlacementGroupInfo replaced = Find("spread");
  EXPECT_EQ(replaced.state(), "CREATED") << replaced.explanation();
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
  ASSERT_TRUE(head_->ListJobs(nullptr, &list, &jobs).ok());
  ASSERT_EQ(jobs.jobs_size(), 1);
  EXPECT_EQ(jobs.jobs(0).state(), "FAILED");
  EXPECT_TRUE(absl::StrContains(jobs.jobs(0).exit_reason(), victim));
  bool event = false;
  for (const std::string& e : head_->events()) {
    event = event || absl::StrContains(e, absl::StrCat("node ", victim, " declared dead"));
  }
  EXPECT_TRUE(event);
}

TEST_F(HeadServiceTest, MissingHeartbeatsWithinTimeoutKeepTheNodeAlive) {
  Register("n1");
  clock_.Advance(absl::Seconds(4));
  head_->Tick();
  EXPECT_TRUE(Beat("n1"));
  clock_.Advance(absl::Seconds(4));
  head_->Tick();
  EXPECT_TRUE(Beat("n1"));
  clock_.Advance(absl::Seconds(6));
  head_->Tick();
  EXPECT_FALSE(Beat("n1"));  // dead: the agent must register again
}

TEST_F(HeadServiceTest, RequestIdDeduplicatesCreateAndRemove) {
  Register("n1");
  grpc::Status status;
  v1::PlacementGroupInfo first = Create("pg", "PACK", {"CPU=1"}, &status, "req-1");
  ASSERT_TRUE(status.ok());
  v1::PlacementGroupInfo second = Create("pg", "PACK", {"CPU=1"}, &status, "req-1");
  ASSERT_TRUE(status.ok()) << status.error_message();  // not ALREADY_EXISTS: same request
  EXPECT_EQ(first.SerializeAsString(), second.SerializeAsString());
  EXPECT_EQ(agents_["n1"]->prepares(), 1);
  EXPECT_EQ(Used("CPU"), 10000);
  // A different request id with the same name is a second create.
  Create("pg", "PACK", {"CPU=1"}, &status, "req-2");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ALREADY_EXISTS);

  v1::RemovePlacementGroupRequest remove;
  remove.set_name("pg");
  remove.set_request_id("rm-1");
  v1::RemovePlacementGroupResponse r1, r2;
  ASSERT_TRUE(head_->RemovePlacementGroup(nullptr, &remove, &r1).ok());
  ASSERT_TRUE(head_->RemovePlacementGroup(nullptr, &remove, &r2).ok());
  EXPECT_EQ(r1.SerializeAsString(), r2.SerializeAsString());
  EXPECT_EQ(Used("CPU"), 0);
}

TEST_F(HeadServiceTest, MalformedRequestsAreInvalidArgumentAndChangeNothing) {
  Register("n1");
  grpc::Status status;
  Create("bad", "SIDEWAYS", {"CPU=1"}, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  Create("bad", "PACK", {}, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::CreatePlacementGroupRequest negative;
  negative.set_name("neg");
  (*negative.mutable_primary()->add_bundles()->mutable_resources()->mutable_raw())["CPU"] = -5;
  v1::PlacementGroupInfo info;
  status = head_->CreatePlacementGroup(nullptr, &negative, &info);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "negative")) << status.error_message();
  EXPECT_EQ(status.error_message().find('\n'), std::string::npos);

  v1::RegisterNodeRequest bad_node = NodeRequest("n2", "CPU=1");
  (*bad_node.mutable_node()->mutable_resources()->mutable_raw())["GPU"] = -1;
  v1::RegisterNodeResponse registered;
  EXPECT_EQ(head_->RegisterNode(nullptr, &bad_node, &registered).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  v1::RegisterNodeRequest no_address = NodeRequest("n3", "CPU=1");
  no_address.mutable_node()->clear_address();
  EXPECT_EQ(head_->RegisterNode(nullptr, &no_address, &registered).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  v1::PickNodeRequest pick;
  pick.mutable_request()->set_strategy(static_cast<v1::Strategy>(9));
  v1::PickNodeResponse picked;
  EXPECT_EQ(head_->PickNode(nullptr, &pick, &picked).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  v1::ReserveSlicesRequest slices;
  slices.set_name("s");
  v1::SliceGroupInfo slice_info;
  EXPECT_EQ(head_->ReserveSlices(nullptr, &slices, &slice_info).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  v1::RecordJobRequest job;
  v1::JobInfo job_info;
  EXPECT_EQ(head_->RecordJob(nullptr, &job, &job_info).error_code(),
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
  rpc::ResourcesToProto(Res("CPU=1"), held->mutable_allocation()->mutable_resources());
  v1::LeaseInfo* lease = request.add_leases();
  lease->set_lease_id("l1");
  rpc::ResourcesToProto(Res("CPU=2"), lease->mutable_allocation()->mutable_resources());
  v1::RegisterNodeResponse response;
  ASSERT_TRUE(head_->RegisterNode(nullptr, &request, &response).ok());
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
  v1::PlacementGroupInfo info = Create("pg", "PACK", {"CPU=1"});
  ASSERT_EQ(info.state(), "CREATED");
  v1::RegisterNodeRequest again = requests_["n1"];
  v1::HeldBundle* held = again.add_bundles();
  held->set_placement_group("pg");
  held->set_bundle_index(0);
  *held->mutable_allocation() = info.bundles(0).allocation();
  v1::RegisterNodeResponse response;
  ASSERT_TRUE(head_->RegisterNode(nullptr, &again, &response).ok());
  EXPECT_EQ(response.release_size(), 0);
  EXPECT_EQ(Find("pg").state(), "CREATED");
}

TEST_F(HeadServiceTest, AgentRestartDropsWhatTheOldIncarnationHeld) {
  Register("n1");
  Register("n2");
  v1::PlacementGroupInfo info = Create("pg", "PACK", {"CPU=4"});
  ASSERT_EQ(info.state(), "CREATED");
  const std::string node = info.bundles(0).node_id();
  v1::RegisterNodeRequest restarted = NodeRequest(node, "CPU=4", {}, "i2");
  v1::RegisterNodeResponse response;
  ASSERT_TRUE(head_->RegisterNode(nullptr, &restarted, &response).ok());
  head_->Tick();
  v1::PlacementGroupInfo moved = Find("pg");
  EXPECT_EQ(moved.state(), "CREATED");
  EXPECT_EQ(Used("CPU"), 40000);  // held once, not twice
}

TEST_F(HeadServiceTest, PickNodeHonoursExcludeAndBundles) {
  Register("n1");
  Register("n2");
  v1::PickNodeRequest pick;
  rpc::ResourcesToProto(Res("CPU=1"), pick.mutable_request()->mutable_resources());
  v1::PickNodeResponse picked;
  ASSERT_TRUE(head_->PickNode(nullptr, &pick, &picked).ok());
  EXPECT_EQ(picked.status(), "placed");
  std::string first = picked.node_id();
  EXPECT_EQ(picked.address(), "127.0.0.1:1");
  pick.add_exclude_node_ids(first);
  ASSERT_TRUE(head_->PickNode(nullptr, &pick, &picked).ok());
  EXPECT_EQ(picked.status(), "placed");
  EXPECT_NE(picked.node_id(), first);
  pick.add_exclude_node_ids(picked.node_id());
  ASSERT_TRUE(head_->PickNode(nullptr, &pick, &picked).ok());
  EXPECT_NE(picked.status(), "placed");
  EXPECT_EQ(Used("CPU"), 0);  // advice only: nothing is held by PickNode

  v1::PlacementGroupInfo info = Create("pg", "PACK", {"CPU=1"});
  v1::PickNodeRequest inside;
  inside.mutable_request()->set_placement_group("pg");
  inside.mutable_request()->set_bundle_index(0);
  ASSERT_TRUE(head_->PickNode(nullptr, &inside, &picked).ok());
  EXPECT_EQ(picked.node_id(), info.bundles(0).node_id());
  inside.mutable_request()->set_placement_group("nope");
  ASSERT_TRUE(head_->PickNode(nullptr, &inside, &picked).ok());
  EXPECT_EQ(picked.status(), "infeasible");
}

TEST_F(HeadServiceTest, SlicesAreReservedWholeAndBrokenWhenAHostDies) {
  for (std::string slice : {"s1", "s2"}) {
    for (int w = 0; w < 4; ++w) {
      Register(absl::StrCat(slice, "-w", w), "CPU=8,TPU=4",
               LabelSet{{std::string(labels::kTpuSliceName), slice},
                        {std::string(labels::kTpuWorkerId), std::to_string(w)},
                        {std::string(labels::kTpuTopology), "4x4"},
                        {std::string(labels::kTpuPodType), "v6e-16"},
                        {std::string(labels::kAcceleratorType), "TPU-V6E"}});
    }
  }
  v1::ReserveSlicesRequest request;
  request.set_name("train");
  auto* alt = request.add_alternatives();
  alt->set_accelerator_type("TPU-V6E");
  alt->set_topology("4x4");
  alt->set_num_slices(2);
  v1::SliceGroupInfo info;
  ASSERT_TRUE(head_->ReserveSlices(nullptr, &request, &info).ok());
  EXPECT_EQ(info.state(), "RESERVED") << info.explanation();
  EXPECT_EQ(info.hosts_size(), 8);
  EXPECT_EQ(Held(true).size(), 8u);
  std::set<std::string> hosts;
  for (const auto& h : info.hosts()) hosts.insert(h.node_id());
  EXPECT_EQ(hosts.size(), 8u);  // two slices never share a host

  v1::ReserveSlicesRequest more = request;
  more.set_name("more");
  more.mutable_alternatives(0)->set_num_slices(1);
  v1::SliceGroupInfo waiting;
  ASSERT_TRUE(head_->ReserveSlices(nullptr, &more, &waiting).ok());
  EXPECT_EQ(waiting.state(), "PENDING");
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
  ASSERT_TRUE(head_->ListSlices(nullptr, &list, &slices).ok());
  ASSERT_EQ(slices.slices_size(), 2);
  EXPECT_FALSE(slices.slices(0).intact());
  EXPECT_EQ(slices.slices(0).hosts(), 4);
  EXPECT_EQ(slices.slices(0).hosts_alive(), 3);
  EXPECT_EQ(slices.slices(0).held_by(), "train");
  bool broken = false;
  for (const auto& g : slices.groups()) broken = broken || (g.name() == "train" && g.state() == "BROKEN");
  EXPECT_TRUE(broken);

  v1::ReleaseSlicesRequest release;
  release.set_name("train");
  v1::ReleaseSlicesResponse released;
  ASSERT_TRUE(head_->ReleaseSlices(nullptr, &release, &released).ok());
  EXPECT_EQ(released.released_size(), 8);
  // Only the dead host's agent still "holds" its bundle (it is gone); the live ones released.
  for (const std::string& held : Held()) EXPECT_TRUE(absl::StrContains(held, "s1-w2")) << held;
}

TEST_F(HeadServiceTest, ABrokenSliceGroupWhoseHostReturnsIsReservedAgain) {
  auto labels = [](int w) {
    return LabelSet{{std::string(labels::kTpuSliceName), "s1"},
                    {std::string(labels::kTpuWorkerId), std::to_string(w)},
                    {std::string(labels::kTpuTopology), "4x4"},
                    {std::string(labels::kTpuPodType), "v6e-16"},
                    {std::string(labels::kAcceleratorType), "TPU-V6E"}};
  };
  for (int w = 0; w < 4; ++w) Register(absl::StrCat("s1-w", w), "CPU=8,TPU=4", labels(w));
  v1::ReserveSlicesRequest request;
  request.set_name("train");
  auto* alt = request.add_alternatives();
  alt->set_accelerator_type("TPU-V6E");
  alt->set_topology("4x4");
  v1::SliceGroupInfo info;
  ASSERT_TRUE(head_->ReserveSlices(nullptr, &request, &info).ok());
  ASSERT_EQ(info.state(), "RESERVED") << info.explanation();

  // s1-w2's agent restarts: a new incarnation drops what the old one held; the group breaks.
  v1::RegisterNodeRequest again = NodeRequest("s1-w2", "CPU=8,TPU=4", labels(2), "i2");
  v1::RegisterNodeResponse response;
  ASSERT_TRUE(head_->RegisterNode(nullptr, &again, &response).ok());
  auto group_state = [&] {
    v1::ListSlicesResponse slices;
    v1::ListRequest list;
    EXPECT_TRUE(head_->ListSlices(nullptr, &list, &slices).ok());
    for (const auto& g : slices.groups()) {
      if (g.name() == "train") return g;
    }
    return v1::SliceGroupInfo();
  };
  EXPECT_EQ(group_state().state(), "BROKEN");

  // Every host is back: the next ticks reserve it again, whole, on its agents.
  for (int i = 0; i < 4; ++i) {
    clock_.Advance(absl::Milliseconds(500));
    for (int w = 0; w < 4; ++w) Beat(absl::StrCat("s1-w", w), w == 2 ? "i2" : "i1");
    head_->Tick();
  }
  v1::SliceGroupInfo healed = group_state();
  EXPECT_EQ(healed.state(), "RESERVED") << healed.explanation();
  EXPECT_EQ(healed.hosts_size(), 4);
  EXPECT_EQ(Held(true).size(), 4u);
  bool said = false;
  for (const std::string& event : head_->events()) {
    said = said || absl::StrContains(event, "slice group train: its hosts are back");
  }
  EXPECT_TRUE(said);
}

TEST_F(HeadServiceTest, KvAndJobs) {
  v1::KvPutRequest put;
  put.set_key("a/1");
  put.set_value("one");
  v1::KvPutResponse added;
  ASSERT_TRUE(head_->KvPut(nullptr, &put, &added).ok());
  EXPECT_TRUE(added.added());
  put.set_value("uno");
  ASSERT_TRUE(head_->KvPut(nullptr, &put, &added).ok());
  EXPECT_FALSE(added.added());
  v1::KvGetRequest get;
  get.set_key("a/1");
  v1::KvGetResponse got;
  ASSERT_TRUE(head_->KvGet(nullptr, &get, &got).ok());
  EXPECT_EQ(got.value(), "one");  // no overwrite
  put.set_overwrite(true);
  ASSERT_TRUE(head_->KvPut(nullptr, &put, &added).ok());
  ASSERT_TRUE(head_->KvGet(nullptr, &get, &got).ok());
  EXPECT_EQ(got.value(), "uno");
  v1::KvListRequest list;
  list.set_prefix("a/");
  v1::KvListResponse keys;
  ASSERT_TRUE(head_->KvList(nullptr, &list, &keys).ok());
  ASSERT_EQ(keys.keys_size(), 1);
  v1::KvDeleteRequest del;
  del.set_key("a/1");
  v1::KvDeleteResponse deleted;
  ASSERT_TRUE(head_->KvDelete(nullptr, &del, &deleted).ok());
  EXPECT_TRUE(deleted.deleted());

  v1::RecordJobRequest job;
  job.mutable_job()->set_job_id("j1");
  job.mutable_job()->add_argv("env");
  v1::JobInfo recorded;
  ASSERT_TRUE(head_->RecordJob(nullptr, &job, &recorded).ok());
  EXPECT_EQ(recorded.state(), "RUNNING");
  job.mutable_job()->set_state("SUCCEEDED");
  ASSERT_TRUE(head_->RecordJob(nullptr, &job, &recorded).ok());
  EXPECT_EQ(recorded.state(), "SUCCEEDED");
  EXPECT_GT(recorded.end_time_ms(), 0);
  EXPECT_TRUE(store_.Get(kJobsTable, "j1")->has_value());
}

}  // namespace
}  // namespace tessera

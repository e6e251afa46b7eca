// The head's own gang backend: train's ClusterGangBackend over InProcessClusterHead, the way the
// head's server builds it for its training jobs. Reservations are made, waited for and released
// in process, on the head's fake clock, with fake agents and no gRPC server at all (a call to
// the head over gRPC would find none).
#include "head/in_process_cluster_head.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cluster_client.h"
#include "gtest/gtest.h"
#include "hardware/node_label_keys.h"
#include "head/head_service.h"
#include "head/head_service_test_util.h"
#include "scheduling/scheduling_test_util.h"
#include "train/cluster_gang_backend.h"
#include "wire/proto_convert.h"

namespace tessera {
namespace {

using head_testing::FakeAgent;
using testing_util::Spec;

class InProcessGangTest : public ::testing::Test {
 protected:
  // The 4 hosts of one TPU v6e 4x4 slice (s1), and a CPU node; a backend on the head in process.
  void SetUp() override {
    HeadServiceOptions options;
    options.clock = &clock_;
    options.store = &store_;
    options.agent_clients = [this](const std::string& node, const std::string&) {
      std::shared_ptr<FakeAgent>& agent = agents_[node];
      if (agent == nullptr) agent = std::make_shared<FakeAgent>();
      return agent;
    };
    head_ = std::make_unique<HeadService>(std::move(options));
    for (int w = 0; w < 4; ++w) {
      Register(absl::StrCat("s1-w", w), "CPU=8,TPU=4", head_testing::V6e4x4HostLabels("s1", w));
    }
    Register("cpu", "CPU=8", {});
    // The agents' client: no cluster behind it, and the backend never calls its head.
    client::ClusterClientOptions agents;
    agents.state_dir = absl::StrCat(::testing::TempDir(), "/no-cluster-", ::getpid());
    agents.head = client::HeadRequirement::kOptional;
    auto connected = client::ClusterClient::Connect(std::move(agents));
    ASSERT_TRUE(connected.ok()) << connected.status();
    backend_ =
        std::make_unique<train::ClusterGangBackend>(head_->InProcessHead(), *std::move(connected));
  }

  void Register(const std::string& id, std::string_view resources, LabelSet labels) {
    v1::RegisterNodeRequest request;
    wire::NodeToProto(Spec(id, resources, std::move(labels)), "127.0.0.1:1", "i1",
                      request.mutable_node());
    v1::RegisterNodeResponse response;
    grpc::Status status = head_->nodes().RegisterNode(nullptr, &request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  void Beat(const std::string& id) {
    v1::HeartbeatRequest request;
    request.set_node_id(id);
    request.set_incarnation("i1");
    v1::HeartbeatResponse response;
    EXPECT_TRUE(head_->nodes().Heartbeat(nullptr, &request, &response).ok());
  }

  // One whole 4x4 slice.
  static v1::GangPlacement SlicePlacement() {
    v1::GangPlacement placement;
    v1::SliceAlternative* slice = placement.add_slices();
    head_testing::SetV6e4x4(slice);
    slice->set_num_slices(1);
    return placement;
  }
  // Takes s1 under `name`, outside the gang.
  void HoldTheSlice(const std::string& name) {
    v1::ReserveSlicesRequest request;
    request.set_name(name);
    *request.mutable_alternatives() = SlicePlacement().slices();
    v1::SliceGroupInfo info;
    ASSERT_TRUE(head_->reservations().ReserveSlices(nullptr, &request, &info).ok());
    ASSERT_EQ(info.state(), v1::SLICE_GROUP_STATE_RESERVED) << info.explanation();
  }
  void ReleaseTheSlice(const std::string& name) {
    v1::ReleaseSlicesRequest request;
    request.set_name(name);
    v1::ReleaseSlicesResponse response;
    ASSERT_TRUE(head_->reservations().ReleaseSlices(nullptr, &request, &response).ok());
  }
  // The slice groups the head has, by name, with their states.
  std::map<std::string, v1::SliceGroupState> SliceGroups() {
    v1::ListRequest request;
    v1::ListSlicesResponse list;
    EXPECT_TRUE(head_->reservations().ListSlices(nullptr, &request, &list).ok());
    std::map<std::string, v1::SliceGroupState> groups;
    for (const v1::SliceGroupInfo& group : list.groups()) groups[group.name()] = group.state();
    return groups;
  }
  // Until the head lists slice group `name` as waiting (the gang's reserve has reached it).
  void AwaitPending(const std::string& name) {
    while (SliceGroups()[name] != v1::SLICE_GROUP_STATE_PENDING) std::this_thread::yield();
  }

  FakeClock clock_;
  InMemoryStateStore store_;
  std::map<std::string, std::shared_ptr<FakeAgent>> agents_;
  std::unique_ptr<HeadService> head_;
  std::unique_ptr<train::ClusterGangBackend> backend_;  // before head_ goes: it calls head_
};

TEST_F(InProcessGangTest, ReservesAWholeSliceAndReleasesIt) {
  auto reserved = backend_->Reserve("job-0", SlicePlacement(), train::GangSize{1, 1},
                                    absl::Seconds(60), nullptr);
  ASSERT_TRUE(reserved.ok()) << reserved.status();
  EXPECT_TRUE(reserved->slice_group);
  EXPECT_EQ(reserved->explanation, "slice s1");
  ASSERT_EQ(reserved->slots.size(), 4u);
  std::set<int> workers;
  for (const train::GangSlot& slot : reserved->slots) {
    EXPECT_EQ(slot.slice, "s1");
    EXPECT_EQ(slot.host, "127.0.0.1");
    EXPECT_EQ(slot.accelerator_type, "TPU-V6E");
    workers.insert(slot.tpu_worker_id);
  }
  EXPECT_EQ(workers, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(
      SliceGroups(),
      (std::map<std::string, v1::SliceGroupState>{{"job-0", v1::SLICE_GROUP_STATE_RESERVED}}));

  backend_->Release(*reserved);
  EXPECT_TRUE(SliceGroups().empty());
  for (const auto& [node, agent] : agents_) EXPECT_TRUE(agent->held().empty()) << node;
}

TEST_F(InProcessGangTest, ReservesWorkersInAPlacementGroupAndReleasesIt) {
  v1::GangPlacement placement;
  placement.set_min_workers(2);
  placement.set_max_workers(2);
  (*placement.mutable_resources_per_worker()->mutable_raw())["CPU"] = 10000;
  auto reserved =
      backend_->Reserve("job-1", placement, train::GangSize{2, 2}, absl::Seconds(60), nullptr);
  ASSERT_TRUE(reserved.ok()) << reserved.status();
  EXPECT_FALSE(reserved->slice_group);
  EXPECT_EQ(reserved->slots.size(), 2u);
  v1::ListRequest request;
  v1::ListPlacementGroupsResponse groups;
  ASSERT_TRUE(head_->reservations().ListPlacementGroups(nullptr, &request, &groups).ok());
  ASSERT_EQ(groups.groups_size(), 1);
  EXPECT_EQ(groups.groups(0).state(), v1::PLACEMENT_GROUP_STATE_CREATED);

  backend_->Release(*reserved);
  groups.Clear();
  ASSERT_TRUE(head_->reservations().ListPlacementGroups(nullptr, &request, &groups).ok());
  EXPECT_EQ(groups.groups_size(), 0);
}

TEST_F(InProcessGangTest, WaitsForTheSliceUntilItIsFreed) {
  HoldTheSlice("other");
  absl::StatusOr<train::GangReservation> reserved;
  std::thread gang([&] {
    reserved = backend_->Reserve("job-2", SlicePlacement(), train::GangSize{1, 1},
                                 absl::Seconds(60), [] { return false; });
  });
  AwaitPending("job-2");
  // The slice comes free; the next tick reserves it for the waiting gang. The fake clock never
  // moves: the head's wait ends on the reservation's change, not by polling.
  ReleaseTheSlice("other");
  head_->Tick();
  gang.join();
  ASSERT_TRUE(reserved.ok()) << reserved.status();
  EXPECT_EQ(reserved->slots.size(), 4u);
  EXPECT_EQ(
      SliceGroups(),
      (std::map<std::string, v1::SliceGroupState>{{"job-2", v1::SLICE_GROUP_STATE_RESERVED}}));
}

TEST_F(InProcessGangTest, GivesUpAtItsTimeoutOnTheHeadsClockAndHoldsNothing) {
  HoldTheSlice("other");
  std::atomic<bool> done{false};
  absl::StatusOr<train::GangReservation> reserved;
  std::thread gang([&] {
    reserved = backend_->Reserve("job-3", SlicePlacement(), train::GangSize{1, 1},
                                 absl::Seconds(10), nullptr);
    done = true;
  });
  while (!done) {
    clock_.Advance(absl::Milliseconds(100));
    std::this_thread::yield();
  }
  gang.join();
  EXPECT_EQ(reserved.status().code(), absl::StatusCode::kDeadlineExceeded) << reserved.status();
  EXPECT_TRUE(absl::StartsWith(reserved.status().message(), "no room within 10s: "))
      << reserved.status();
  EXPECT_EQ(
      SliceGroups(),
      (std::map<std::string, v1::SliceGroupState>{{"other", v1::SLICE_GROUP_STATE_RESERVED}}));
}

TEST_F(InProcessGangTest, AStoppedGangStopsWaitingWithinAStepAndHoldsNothing) {
  HoldTheSlice("other");
  std::atomic<bool> stop{false};
  std::atomic<bool> done{false};
  absl::StatusOr<train::GangReservation> reserved;
  std::thread gang([&] {
    reserved = backend_->Reserve("job-4", SlicePlacement(), train::GangSize{1, 1},
                                 absl::Seconds(60), [&] { return stop.load(); });
    done = true;
  });
  AwaitPending("job-4");
  const absl::Time start = clock_.Now();
  stop = true;
  // The head's wait cannot ask `stopped`; the steps between its calls do, each at most
  // client::kStopCheckInterval of the head's clock.
  while (!done) {
    clock_.Advance(absl::Milliseconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  gang.join();
  EXPECT_EQ(reserved.status().code(), absl::StatusCode::kCancelled) << reserved.status();
  EXPECT_LT(clock_.Now() - start, absl::Seconds(60));  // long before its timeout
  EXPECT_EQ(
      SliceGroups(),
      (std::map<std::string, v1::SliceGroupState>{{"other", v1::SLICE_GROUP_STATE_RESERVED}}));
}

TEST_F(InProcessGangTest, DeadNodesAreThoseTheHeadDeclaredDeadOrDoesNotKnow) {
  // s1-w0 falls silent past the node timeout while the others beat.
  for (int i = 0; i < 12; ++i) {
    clock_.Advance(absl::Milliseconds(500));
    for (const char* id : {"s1-w1", "s1-w2", "s1-w3", "cpu"}) Beat(id);
    head_->Tick();
  }
  auto dead = backend_->DeadNodes({"s1-w0", "s1-w1", "ghost"});
  ASSERT_TRUE(dead.ok()) << dead.status();
  EXPECT_EQ(*dead, (std::set<std::string>{"ghost", "s1-w0"}));
}

}  // namespace
}  // namespace tessera

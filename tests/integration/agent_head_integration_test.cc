// Node agents with the real head, in one process on loopback: registration, spillback of a lease
// a node cannot take to the node the head picks, and a placement group reserved on an agent by
// the head's two-phase commit, with a lease served from its bundle and released with it.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "head/head_server.h"
#include "node/agent_server.h"
#include "node/agent_test_util.h"
#include "rpc/auth.h"
#include "rpc/channel.h"
#include "tessera/v1/head.grpc.pb.h"
#include "tessera/v1/node_agent.grpc.pb.h"
#include "wire/proto_convert.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

using node_testing::Eventually;
using node_testing::kPatience;

class AgentHeadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "tessera-agent-head-XXXXXX").string();
    state_dir_ = ::mkdtemp(pattern.data());
    HeadOptions head;
    head.state_dir = state_dir_;
    head.heartbeat_interval = absl::Milliseconds(50);
    auto server = HeadServer::Create(head);
    ASSERT_TRUE(server.ok()) << server.status();
    head_ = std::move(*server);
    ConnectToHead();
  }
  void TearDown() override {
    cpu_.reset();
    gpu_.reset();
    head_.reset();
    std::error_code ec;
    std::filesystem::remove_all(state_dir_, ec);
  }

  // The token and head address come from the state folder, as for `tessera start --address`.
  std::unique_ptr<NodeAgentServer> StartAgent(const std::string& hardware, const std::string& id) {
    AgentOptions options;
    options.state_dir = state_dir_;
    options.node_id = id;
    options.hardware_file = node_testing::ExampleHardware(hardware);
    options.environment = Environment();
    auto agent = NodeAgentServer::Create(options);
    EXPECT_TRUE(agent.ok()) << agent.status();
    return agent.ok() ? std::move(*agent) : nullptr;
  }

  // Stubs of the head's services the tests call, on one channel to the head now running.
  void ConnectToHead() {
    const std::shared_ptr<grpc::Channel> channel =
        rpc::MakeChannel(head_->address(), head_->token());
    head_nodes_ = v1::HeadNodes::NewStub(channel);
    head_reservations_ = v1::HeadReservations::NewStub(channel);
    head_admin_ = v1::HeadAdmin::NewStub(channel);
  }

  std::unique_ptr<grpc::ClientContext> Context() { return rpc::MakeClientContext(kPatience); }

  v1::LeaseReply Lease(NodeAgentServer& agent, const v1::LeaseRequest& request) {
    auto stub = v1::NodeAgent::NewStub(rpc::MakeChannel(agent.address(), head_->token()));
    v1::LeaseReply reply;
    grpc::Status status = stub->RequestLease(Context().get(), request, &reply);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return reply;
  }

  static v1::LeaseRequest Request(std::string_view resources, std::vector<std::string> argv) {
    v1::LeaseRequest request;
    wire::ResourcesToProto(node_testing::Res(resources),
                           request.mutable_request()->mutable_resources());
    for (std::string& arg : argv) request.mutable_worker()->add_argv(std::move(arg));
    return request;
  }

  std::string state_dir_;
  std::unique_ptr<HeadServer> head_;
  std::unique_ptr<v1::HeadNodes::Stub> head_nodes_;
  std::unique_ptr<v1::HeadReservations::Stub> head_reservations_;
  std::unique_ptr<v1::HeadAdmin::Stub> head_admin_;
  std::unique_ptr<NodeAgentServer> cpu_;
  std::unique_ptr<NodeAgentServer> gpu_;
};

TEST_F(AgentHeadTest, SpillbackToTheNodeTheHeadPicks) {
  cpu_ = StartAgent("cpu-only.yaml", "cpu");
  gpu_ = StartAgent("h100-sxm-8.yaml", "gpu");
  ASSERT_NE(cpu_, nullptr);
  ASSERT_NE(gpu_, nullptr);
  v1::ListNodesResponse nodes;
  ASSERT_TRUE(head_nodes_->ListNodes(Context().get(), v1::ListRequest(), &nodes).ok());
  ASSERT_EQ(nodes.nodes_size(), 2);

  v1::LeaseRequest request = Request("GPU=2", {"/bin/sh", "-c", "echo $CUDA_VISIBLE_DEVICES"});
  v1::LeaseReply first = Lease(*cpu_, request);
  ASSERT_TRUE(first.has_spillback()) << first.status() << ": " << first.explanation();
  EXPECT_EQ(first.spillback().node_id(), "gpu");
  EXPECT_EQ(first.spillback().address(), gpu_->address());

  request.set_hops(1);
  v1::LeaseReply second = Lease(*gpu_, request);
  ASSERT_TRUE(second.has_granted()) << second.explanation();
  EXPECT_EQ(second.granted().node_id(), "gpu");

  // Nothing in the cluster has 16 GPUs: infeasible, with the head's explanation.
  v1::LeaseReply none = Lease(*cpu_, Request("GPU=16", {"/bin/true"}));
  EXPECT_FALSE(none.has_spillback());
  EXPECT_EQ(none.status(), v1::PICK_STATUS_INFEASIBLE);
  EXPECT_THAT(none.explanation(), HasSubstr("GPU"));
}

TEST_F(AgentHeadTest, PlacementGroupReservedOnTheAgentAndLeasesInsideIt) {
  cpu_ = StartAgent("cpu-only.yaml", "cpu");
  gpu_ = StartAgent("h100-sxm-8.yaml", "gpu");
  ASSERT_NE(cpu_, nullptr);
  ASSERT_NE(gpu_, nullptr);

  v1::CreatePlacementGroupRequest create;
  create.set_name("pg");
  create.set_request_id("create-pg");
  create.set_strategy(v1::PLACEMENT_STRATEGY_STRICT_PACK);
  wire::ResourcesToProto(node_testing::Res("CPU=1,GPU=2"),
                         create.mutable_primary()->add_bundles()->mutable_resources());
  v1::PlacementGroupInfo info;
  grpc::Status status = head_reservations_->CreatePlacementGroup(Context().get(), create, &info);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(info.state(), v1::PLACEMENT_GROUP_STATE_CREATED) << info.explanation();
  ASSERT_EQ(info.bundles_size(), 1);
  EXPECT_EQ(info.bundles(0).node_id(), "gpu");

  // The agent holds the head's exact instances, committed.
  const std::vector<BundleRecord> held = gpu_->state().Bundles();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_TRUE(held[0].committed);
  // Bundles are named by the group as the head names them to agents and in PickNode.
  EXPECT_EQ(held[0].key.group, info.name());
  ASSERT_EQ(held[0].allocation.devices.size(), 1u);
  std::vector<int> reserved = held[0].allocation.devices[0].instances;
  EXPECT_EQ(gpu_->state().Available().Get("GPU"), Quantity::FromInt(6));

  // A lease inside bundle 0, asked of the wrong agent: spilled back to the holder.
  v1::LeaseRequest inside = Request("GPU=1", {"/bin/sleep", "1000"});
  inside.mutable_request()->set_placement_group(held[0].key.group);
  inside.mutable_request()->set_bundle_index(0);
  v1::LeaseReply elsewhere = Lease(*cpu_, inside);
  ASSERT_TRUE(elsewhere.has_spillback()) << elsewhere.explanation();
  EXPECT_EQ(elsewhere.spillback().node_id(), "gpu");
  inside.set_hops(1);
  v1::LeaseReply granted = Lease(*gpu_, inside);
  ASSERT_TRUE(granted.has_granted()) << granted.explanation();
  const int instance = granted.granted().allocation().devices(0).instances(0);
  EXPECT_THAT(reserved, ::testing::Contains(instance));
  EXPECT_EQ(gpu_->state().Available().Get("GPU"), Quantity::FromInt(6));

  // Removing the group cancels the bundle on the agent and kills the worker inside it.
  v1::RemovePlacementGroupRequest remove;
  remove.set_name("pg");
  remove.set_request_id("remove-pg");
  v1::RemovePlacementGroupResponse removed;
  ASSERT_TRUE(head_reservations_->RemovePlacementGroup(Context().get(), remove, &removed).ok());
  EXPECT_THAT(gpu_->state().Bundles(), IsEmpty());
  const WorkerId worker(granted.granted().worker_id());
  ASSERT_TRUE(gpu_->state().AwaitWorkerExit(worker, kPatience));
  EXPECT_THAT(gpu_->state().FindWorker(worker)->exit->reason, HasSubstr("SIGKILL"));
  EXPECT_EQ(gpu_->state().Available().Get("GPU"), Quantity::FromInt(8));
}

TEST_F(AgentHeadTest, HeadMirrorsLeasesFromHeartbeats) {
  gpu_ = StartAgent("h100-sxm-8.yaml", "gpu");
  ASSERT_NE(gpu_, nullptr);
  v1::LeaseReply granted = Lease(*gpu_, Request("GPU=3", {"/bin/sleep", "1000"}));
  ASSERT_TRUE(granted.has_granted()) << granted.explanation();
  auto gpu_available = [&]() -> int64_t {
    v1::ListNodesResponse nodes;
    if (!head_nodes_->ListNodes(Context().get(), v1::ListRequest(), &nodes).ok()) return -1;
    if (nodes.nodes_size() != 1) return -1;
    auto it = nodes.nodes(0).available().raw().find("GPU");
    return it == nodes.nodes(0).available().raw().end() ? 0 : it->second;
  };
  EXPECT_TRUE(Eventually([&] { return gpu_available() == 50000; }));
  auto stub = v1::NodeAgent::NewStub(rpc::MakeChannel(gpu_->address(), head_->token()));
  v1::KillWorkerRequest kill;
  kill.set_worker_id(granted.granted().worker_id());
  kill.set_signal(9);
  v1::KillWorkerResponse killed;
  ASSERT_TRUE(stub->KillWorker(Context().get(), kill, &killed).ok());
  EXPECT_TRUE(Eventually([&] { return gpu_available() == 80000; }));
}

// A head restarted without --port takes a new port and publishes it in the state folder: the
// agents that dialled the old one find it there and register again, their workers untouched.
TEST_F(AgentHeadTest, AgentsFindAHeadRestartedOnAnotherPort) {
  gpu_ = StartAgent("h100-sxm-8.yaml", "gpu");
  ASSERT_NE(gpu_, nullptr);
  v1::LeaseReply granted = Lease(*gpu_, Request("GPU=3", {"/bin/sleep", "1000"}));
  ASSERT_TRUE(granted.has_granted()) << granted.explanation();
  const std::string old_address = head_->address();
  head_.reset();
  // Hold the old port, so the new head cannot take it by chance.
  const int old_port = std::stoi(old_address.substr(old_address.rfind(':') + 1));
  const int blocker = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(old_port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int one = 1;
  ::setsockopt(blocker, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  ASSERT_EQ(::bind(blocker, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  HeadOptions options;
  options.state_dir = state_dir_;
  options.heartbeat_interval = absl::Milliseconds(50);
  auto restarted = HeadServer::Create(options);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  head_ = std::move(*restarted);
  ASSERT_NE(head_->address(), old_address);
  ConnectToHead();
  auto gpus_used = [&]() -> int64_t {
    v1::ListNodesResponse nodes;
    if (!head_nodes_->ListNodes(Context().get(), v1::ListRequest(), &nodes).ok()) return -1;
    if (nodes.nodes_size() != 1 || nodes.nodes(0).state() != v1::NODE_STATE_ALIVE) return -1;
    return 80000 - nodes.nodes(0).available().raw().at("GPU");
  };
  EXPECT_TRUE(Eventually([&] { return gpus_used() == 30000; }));
  EXPECT_TRUE(gpu_->state().FindWorker(WorkerId(granted.granted().worker_id())).has_value());
  ::close(blocker);
}

// --- The head and the agents reconcile what each node holds; a node id has one live agent. ---

std::string ReadFirstLineOf(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

TEST_F(AgentHeadTest, ABundleTheHeadDoesNotHoldIsReleasedByTheNextHeartbeat) {
  gpu_ = StartAgent("h100-sxm-8.yaml", "gpu");
  ASSERT_NE(gpu_, nullptr);
  // A prepare applied after the head gave up on it: the agent holds what the head never counts.
  BundleAsk late;
  late.index = 0;
  late.resources = node_testing::Res("CPU=6");
  const Quantity cpus = gpu_->state().Available().Get("CPU");
  ASSERT_TRUE(gpu_->state().PrepareBundles("pg-lost", {late}).ok());
  ASSERT_EQ(gpu_->state().Bundles().size(), 1u);
  EXPECT_TRUE(Eventually([&] { return gpu_->state().Bundles().empty(); }));
  EXPECT_EQ(gpu_->state().Available().Get("CPU"), cpus);
  v1::ClusterStatus status;
  ASSERT_TRUE(head_admin_->GetClusterStatus(Context().get(), v1::ListRequest(), &status).ok());
  bool said = false;
  for (const std::string& event : status.events()) {
    said = said || (absl::StrContains(event, "bundles 0 of pg-lost on gpu") &&
                    absl::StrContains(event, "released"));
  }
  EXPECT_TRUE(said);
}

TEST_F(AgentHeadTest, ASecondAgentWithALiveNodeIdIsRefusedAndTheFirstKeepsItsNodeAndWorkers) {
  cpu_ = StartAgent("cpu-only.yaml", "cpu");
  ASSERT_NE(cpu_, nullptr);
  v1::LeaseReply granted = Lease(*cpu_, Request("CPU=1", {"/bin/sleep", "1000"}));
  ASSERT_TRUE(granted.has_granted()) << granted.explanation();
  const WorkerId worker(granted.granted().worker_id());

  AgentOptions options;
  options.state_dir = state_dir_;
  options.node_id = "cpu";
  options.hardware_file = node_testing::ExampleHardware("cpu-only.yaml");
  options.environment = Environment();
  auto second = NodeAgentServer::Create(options);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(
      second.status().message(),
      HasSubstr(absl::StrCat("node cpu is already held by a live agent at ", cpu_->address())));
  EXPECT_EQ(second.status().message().find('\n'), std::string::npos);

  // The first agent keeps its node, its files and its worker.
  v1::ListNodesResponse nodes;
  ASSERT_TRUE(head_nodes_->ListNodes(Context().get(), v1::ListRequest(), &nodes).ok());
  ASSERT_EQ(nodes.nodes_size(), 1);
  EXPECT_EQ(nodes.nodes(0).state(), v1::NODE_STATE_ALIVE);
  EXPECT_EQ(nodes.nodes(0).node().address(), cpu_->address());
  EXPECT_EQ(ReadFirstLineOf(cpu_->node_dir() + "/agent.address"), cpu_->address());
  EXPECT_EQ(cpu_->state().FindWorker(worker)->state, WorkerState::kRunning);
  const int64_t before = cpu_->head_link()->registrations();
  // Still heartbeating as the node's agent: its heartbeats stay known (no re-registration).
  v1::ListNodesResponse later;
  EXPECT_TRUE(Eventually([&] {
    return head_nodes_->ListNodes(Context().get(), v1::ListRequest(), &later).ok() &&
           later.nodes_size() == 1 && later.nodes(0).last_heartbeat_age_ms() < 1000 &&
           later.nodes(0).workers() == 1;
  }));
  EXPECT_EQ(cpu_->head_link()->registrations(), before);
  EXPECT_TRUE(cpu_->head_link()->refusal().ok());
}

TEST_F(AgentHeadTest, ANodeIdIsTakenOnceItsAgentIsDeclaredDead) {
  head_.reset();
  HeadOptions head;
  head.state_dir = state_dir_;
  head.heartbeat_interval = absl::Milliseconds(50);
  head.node_timeout = absl::Milliseconds(500);
  auto server = HeadServer::Create(head);
  ASSERT_TRUE(server.ok()) << server.status();
  head_ = std::move(*server);
  ConnectToHead();

  cpu_ = StartAgent("cpu-only.yaml", "cpu");
  ASSERT_NE(cpu_, nullptr);
  cpu_->Shutdown();  // stops heartbeating; the head declares it dead after its timeout
  v1::ListNodesResponse nodes;
  EXPECT_TRUE(Eventually([&] {
    return head_nodes_->ListNodes(Context().get(), v1::ListRequest(), &nodes).ok() &&
           nodes.nodes_size() == 1 && nodes.nodes(0).state() == v1::NODE_STATE_DEAD;
  }));
  gpu_ = StartAgent("cpu-only.yaml", "cpu");
  ASSERT_NE(gpu_, nullptr);
  ASSERT_TRUE(head_nodes_->ListNodes(Context().get(), v1::ListRequest(), &nodes).ok());
  ASSERT_EQ(nodes.nodes_size(), 1);
  EXPECT_EQ(nodes.nodes(0).state(), v1::NODE_STATE_ALIVE);
  EXPECT_EQ(nodes.nodes(0).node().address(), gpu_->address());
}

}  // namespace
}  // namespace tessera

// The head process's server on loopback: token file and address/pid files, the token check on
// every call, two-phase commit through real NodeAgent stubs, the Shutdown RPC, and listings
// that span several pages read whole through client::ClusterClient.
#include "head/head_server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "client/cluster_client.h"
#include "client/list_pages.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "rpc/auth.h"
#include "rpc/channel.h"
#include "rpc/server.h"
#include "rpc/status_conversion.h"
#include "rpc/token.h"
#include "scheduling/scheduling_test_util.h"
#include "tessera/v1/head.grpc.pb.h"
#include "tessera/v1/node_agent.grpc.pb.h"
#include "wire/proto_convert.h"

namespace tessera {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The participant side of the two-phase commit, nothing else.
class BundleAgent : public v1::NodeAgent::Service {
 public:
  grpc::Status PrepareBundles(grpc::ServerContext*, const v1::PrepareBundlesRequest* request,
                              v1::PrepareBundlesResponse*) override {
    absl::MutexLock lock(&mu_);
    for (const auto& b : request->bundles()) {
      prepared_.insert({request->placement_group(), b.bundle_index()});
      if (request->commit()) committed_.insert({request->placement_group(), b.bundle_index()});
    }
    return grpc::Status::OK;
  }
  grpc::Status CommitBundles(grpc::ServerContext*, const v1::CommitBundlesRequest* request,
                             v1::CommitBundlesResponse*) override {
    absl::MutexLock lock(&mu_);
    for (int i : request->bundle_indices()) committed_.insert({request->placement_group(), i});
    return grpc::Status::OK;
  }
  grpc::Status CancelBundles(grpc::ServerContext*, const v1::CancelBundlesRequest* request,
                             v1::CancelBundlesResponse*) override {
    absl::MutexLock lock(&mu_);
    for (int i : request->bundle_indices()) {
      prepared_.erase({request->placement_group(), i});
      committed_.erase({request->placement_group(), i});
    }
    return grpc::Status::OK;
  }
  size_t committed() {
    absl::MutexLock lock(&mu_);
    return committed_.size();
  }

 private:
  absl::Mutex mu_;
  std::set<std::pair<std::string, int>> prepared_;
  std::set<std::pair<std::string, int>> committed_;
};

class HeadServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/tessera-head-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    HeadOptions options;
    options.state_dir = dir_ + "/state";
    auto head = HeadServer::Create(options);
    ASSERT_TRUE(head.ok()) << head.status();
    head_ = std::move(*head);
    // The stubs of the services these tests call, on one channel as a client would hold them.
    const std::shared_ptr<grpc::Channel> channel =
        rpc::MakeChannel(head_->address(), head_->token());
    head_nodes_ = v1::HeadNodes::NewStub(channel);
    head_reservations_ = v1::HeadReservations::NewStub(channel);
    head_admin_ = v1::HeadAdmin::NewStub(channel);
  }
  void TearDown() override {
    head_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::string dir_;
  std::unique_ptr<HeadServer> head_;
  std::unique_ptr<v1::HeadNodes::Stub> head_nodes_;
  std::unique_ptr<v1::HeadReservations::Stub> head_reservations_;
  std::unique_ptr<v1::HeadAdmin::Stub> head_admin_;
};

TEST_F(HeadServerTest, WritesTokenAddressAndPidFiles) {
  std::string state = dir_ + "/state";
  struct stat st {};
  ASSERT_EQ(::stat((state + "/token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(*rpc::ReadTokenFile(state + "/token"), head_->token());
  EXPECT_EQ(ReadFile(state + "/head.address"), "127.0.0.1:" + std::to_string(head_->port()));
  EXPECT_EQ(ReadFile(state + "/head.pid"), std::to_string(::getpid()));
  head_->Shutdown();
  EXPECT_FALSE(std::filesystem::exists(state + "/head.address"));
  EXPECT_FALSE(std::filesystem::exists(state + "/head.pid"));
  EXPECT_TRUE(std::filesystem::exists(state + "/token"));  // kept for the next start
}

TEST_F(HeadServerTest, RestartKeepsTheToken) {
  std::string token = head_->token();
  head_.reset();
  HeadOptions options;
  options.state_dir = dir_ + "/state";
  auto again = HeadServer::Create(options);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->token(), token);
}

TEST_F(HeadServerTest, ClientsWithoutTheTokenAreRefused) {
  v1::ListRequest request;
  v1::ListNodesResponse response;
  {
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, absl::Seconds(30));
    EXPECT_TRUE(head_nodes_->ListNodes(&context, request, &response).ok());
  }
  auto stranger = v1::HeadNodes::NewStub(rpc::MakeChannel(head_->address(), "not-the-token"));
  {
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, absl::Seconds(30));
    EXPECT_TRUE(
        rpc::IsPeerAuthenticationFailure(stranger->ListNodes(&context, request, &response)));
  }
  {
    // A plaintext client, as every client was before mutual TLS.
    auto plaintext = v1::HeadAdmin::NewStub(
        grpc::CreateChannel(head_->address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, absl::Seconds(30));
    v1::ShutdownRequest shutdown;
    v1::ShutdownResponse done;
    EXPECT_FALSE(plaintext->Shutdown(&context, shutdown, &done).ok());
  }
  EXPECT_FALSE(head_->shutdown_requested());
}

TEST_F(HeadServerTest, PlacementGroupThroughRealAgentStubs) {
  BundleAgent agent;
  rpc::ServerOptions agent_options;
  agent_options.token = head_->token();
  auto agent_server = rpc::RpcServer::Start(agent_options, {&agent});
  ASSERT_TRUE(agent_server.ok()) << agent_server.status();

  v1::RegisterNodeRequest reg;
  wire::NodeToProto(testing_util::Spec("n1", "CPU=4"), (*agent_server)->address(), "i1",
                    reg.mutable_node());
  v1::RegisterNodeResponse registered;
  {
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, absl::Seconds(30));
    ASSERT_TRUE(head_nodes_->RegisterNode(&context, reg, &registered).ok());
  }
  v1::CreatePlacementGroupRequest create;
  create.set_name("pg");
  create.set_request_id("r1");
  wire::ResourcesToProto(testing_util::Res("CPU=2"),
                         create.mutable_primary()->add_bundles()->mutable_resources());
  v1::PlacementGroupInfo info;
  {
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, absl::Seconds(30));
    grpc::Status status = head_reservations_->CreatePlacementGroup(&context, create, &info);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  EXPECT_EQ(info.state(), v1::PLACEMENT_GROUP_STATE_CREATED) << info.explanation();
  EXPECT_EQ(agent.committed(), 1u);
  v1::RemovePlacementGroupRequest remove;
  remove.set_name("pg");
  v1::RemovePlacementGroupResponse removed;
  {
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, absl::Seconds(30));
    ASSERT_TRUE(head_reservations_->RemovePlacementGroup(&context, remove, &removed).ok());
  }
  EXPECT_EQ(agent.committed(), 0u);
}

TEST_F(HeadServerTest, ShutdownRpcEndsWait) {
  grpc::ClientContext context;
  rpc::ConfigureClientContext(&context, absl::Seconds(30));
  v1::ShutdownRequest request;
  v1::ShutdownResponse response;
  ASSERT_TRUE(head_admin_->Shutdown(&context, request, &response).ok());
  head_->Wait();  // returns: the request arrived
  EXPECT_TRUE(head_->shutdown_requested());
}

// The head's six services (head.proto) are all served by the one server, on its one port: a read
// of each through ClusterClient's stubs, which share one channel, reaches its handler.
TEST_F(HeadServerTest, EveryServiceOfTheHeadAnswersOnItsOnePort) {
  client::ClusterClientOptions options;
  options.state_dir = dir_ + "/state";
  auto connected = client::ClusterClient::Connect(options);
  ASSERT_TRUE(connected.ok()) << connected.status();
  client::ClusterClient& c = **connected;
  auto expect_answer = [&](const char* service,
                           const std::function<grpc::Status(grpc::ClientContext*)>& rpc) {
    const absl::Status status = c.Call(c.HeadPeer(), client::Retry::kSafe, rpc);
    EXPECT_TRUE(status.ok()) << service << ": " << status;
  };
  const v1::ListRequest list;
  v1::ListNodesResponse nodes;
  expect_answer("HeadNodes", [&](grpc::ClientContext* ctx) {
    return c.head_nodes().ListNodes(ctx, list, &nodes);
  });
  v1::ListPlacementGroupsResponse groups;
  expect_answer("HeadReservations", [&](grpc::ClientContext* ctx) {
    return c.head_reservations().ListPlacementGroups(ctx, list, &groups);
  });
  v1::ListActorsResponse actors;
  expect_answer("HeadActors", [&](grpc::ClientContext* ctx) {
    return c.head_actors().ListActors(ctx, list, &actors);
  });
  v1::ListJobsResponse jobs;
  expect_answer("HeadJobs",
                [&](grpc::ClientContext* ctx) { return c.head_jobs().ListJobs(ctx, list, &jobs); });
  v1::KvGetRequest get;
  get.set_key("absent");
  v1::KvGetResponse got;
  expect_answer("HeadKv",
                [&](grpc::ClientContext* ctx) { return c.head_kv().KvGet(ctx, get, &got); });
  EXPECT_FALSE(got.found());
  v1::ClusterStatus status;
  expect_answer("HeadAdmin", [&](grpc::ClientContext* ctx) {
    return c.head_admin().GetClusterStatus(ctx, list, &status);
  });
}

TEST(HeadServerOptionsTest, BadOptionsAreRefused) {
  HeadOptions options;
  EXPECT_EQ(HeadServer::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.state_dir = "/tmp/tessera-unused";
  options.node_timeout = absl::Milliseconds(100);
  EXPECT_EQ(HeadServer::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

// --- every page through ClusterClient ---

TEST_F(HeadServerTest, ClusterClientListsEveryNodeAcrossThePagesOfARealHead) {
  // More nodes than the head's largest page (HeadServiceOptions::max_page_size, 500): three pages.
  constexpr int kNodes = 1001;
  std::vector<std::string> ids;
  for (int i = 0; i < kNodes; ++i) {
    ids.push_back(absl::StrFormat("n%04d", (i * 2) % kNodes));  // out of id order (kNodes is odd)
    v1::RegisterNodeRequest reg;
    wire::NodeToProto(testing_util::Spec(ids.back(), "CPU=1"), "127.0.0.1:1", "i1",
                      reg.mutable_node());
    v1::RegisterNodeResponse registered;
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, absl::Seconds(30));
    grpc::Status status = head_nodes_->RegisterNode(&context, reg, &registered);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  std::sort(ids.begin(), ids.end());
  {
    // One call gets one page only.
    v1::ListRequest request;
    v1::ListNodesResponse page;
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, absl::Seconds(30));
    ASSERT_TRUE(head_nodes_->ListNodes(&context, request, &page).ok());
    EXPECT_EQ(page.nodes_size(), 500);
    EXPECT_FALSE(page.next_page_token().empty());
  }

  client::ClusterClientOptions options;
  options.state_dir = dir_ + "/state";
  auto client = client::ClusterClient::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  auto nodes = (*client)->ListNodes();
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  std::vector<std::string> listed;
  for (const v1::NodeInfo& node : nodes->nodes()) listed.push_back(node.node().node_id());
  EXPECT_EQ(listed, ids);  // each once, in id order
  EXPECT_TRUE(nodes->next_page_token().empty());

  // The API's callers with a bare stub walk the same pages.
  auto bare = client::ListEveryPageOf(*head_nodes_, &v1::HeadNodes::Stub::ListNodes,
                                      absl::Seconds(30), "the head");
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->nodes_size(), kNodes);
}

// A head that answers every page with the same next_page_token.
class RepeatingHead : public v1::HeadNodes::Service {
 public:
  grpc::Status ListNodes(grpc::ServerContext*, const v1::ListRequest*,
                         v1::ListNodesResponse* response) override {
    response->add_nodes()->mutable_node()->set_node_id("n1");
    response->set_next_page_token("nodes:n1");
    return grpc::Status::OK;
  }
};

TEST_F(HeadServerTest, AHeadThatRepeatsAPageTokenEndsTheListingWithAnError) {
  RepeatingHead repeating;
  rpc::ServerOptions server_options;
  server_options.token = head_->token();
  auto server = rpc::RpcServer::Start(server_options, {&repeating});
  ASSERT_TRUE(server.ok()) << server.status();
  client::ClusterClientOptions options;
  options.state_dir = dir_ + "/state";
  options.head_address = (*server)->address();
  auto client = client::ClusterClient::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  auto nodes = (*client)->ListNodes();
  ASSERT_EQ(nodes.status().code(), absl::StatusCode::kInternal) << nodes.status();
  EXPECT_EQ(nodes.status().message(),
            absl::StrCat("the head at ", (*server)->address(),
                         " returned the page token \"nodes:n1\" twice; the listing stops there"));
}

}  // namespace
}  // namespace tessera

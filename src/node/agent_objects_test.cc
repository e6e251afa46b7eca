// Two real node agents with object stores: an object put into one agent's store through its
// socket is copied into the other's by PullObject (over the holder's data port) and read there,
// and the holder's pin ends; an agent without a store says so; an unknown object is NOT_FOUND.
// The agent's OfferObject carries a fresh transfer key, and its data port sends nothing readable.
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "node/agent_server.h"
#include "node/agent_test_util.h"
#include "node/object_data_cipher.h"
#include "node/object_data_protocol.h"
#include "node/object_data_server.h"
#include "node/object_data_socket.h"
#include "objects/object_store_client.h"
#include "rpc/auth.h"
#include "rpc/channel.h"

namespace tessera {
namespace {

constexpr char kToken[] = "objects-test-token";

class AgentObjectsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "tessera-agent-objects-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    state_dir_ = pattern;
  }
  void TearDown() override {
    for (auto& agent : agents_) agent->Shutdown();
    std::error_code ec;
    std::filesystem::remove_all(state_dir_, ec);
  }
  NodeAgentServer* Start(const std::string& node_id, uint64_t store_bytes) {
    AgentOptions options;
    options.state_dir = state_dir_;
    options.token = kToken;
    options.node_id = node_id;
    options.hardware_file = node_testing::ExampleHardware("cpu-only.yaml");
    options.environment = Environment({{"PATH", "/usr/bin:/bin"}, {"LANG", "C"}});
    options.prestarted_workers = 0;
    options.object_store_bytes = store_bytes;
    auto agent = NodeAgentServer::Create(options);
    EXPECT_TRUE(agent.ok()) << agent.status();
    if (!agent.ok()) return nullptr;
    agents_.push_back(std::move(*agent));
    return agents_.back().get();
  }
  static std::unique_ptr<v1::NodeAgent::Stub> Stub(NodeAgentServer* agent) {
    return v1::NodeAgent::NewStub(rpc::MakeChannel(agent->address(), kToken));
  }
  static std::unique_ptr<ObjectStoreClient> Client(NodeAgentServer* agent) {
    auto client = ObjectStoreClient::Connect({.socket_path = agent->node_dir() + "/objects.sock"});
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

  std::string state_dir_;
  std::vector<std::unique_ptr<NodeAgentServer>> agents_;
};

TEST_F(AgentObjectsTest, AnObjectPutOnOneNodeIsPulledIntoAnotherAndReadThere) {
  NodeAgentServer* a = Start("a", 32 << 20);
  NodeAgentServer* b = Start("b", 32 << 20);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(a->object_store(), nullptr);
  std::string data(5 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i % 251);
  const ObjectId id = ObjectId::FromRandom();
  auto on_a = Client(a);
  ASSERT_NE(on_a, nullptr);
  ASSERT_TRUE(on_a->Put(id, data, "meta", {}).ok());

  v1::PullObjectRequest pull;
  pull.set_object_id(id.Binary());
  pull.set_from_address(a->address());
  v1::PullObjectResponse pulled;
  grpc::ClientContext context;
  rpc::ConfigureClientContext(&context, absl::Seconds(60));
  grpc::Status status = Stub(b)->PullObject(&context, pull, &pulled);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(pulled.size(), data.size());
  EXPECT_FALSE(pulled.already_here());

  auto on_b = Client(b);
  ASSERT_NE(on_b, nullptr);
  auto buffer = on_b->Get(id);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_TRUE(buffer->view() == data);
  EXPECT_EQ(buffer->metadata(), "meta");
  EXPECT_EQ(a->object_data_server()->pending_offers(), 0u);
  EXPECT_EQ(b->object_data_server()->pending_offers(), 0u);

  // A second pull finds the copy here.
  grpc::ClientContext again;
  rpc::ConfigureClientContext(&again, absl::Seconds(60));
  status = Stub(b)->PullObject(&again, pull, &pulled);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(pulled.already_here());
}

TEST_F(AgentObjectsTest, OffersCarryAFreshKeyAndTheDataPortSendsNothingReadable) {
  NodeAgentServer* a = Start("a", 32 << 20);
  ASSERT_NE(a, nullptr);
  std::string data;
  while (data.size() < (2 << 20) + 5) data += "agent-objects-plaintext|";
  const ObjectId id = ObjectId::FromRandom();
  auto on_a = Client(a);
  ASSERT_NE(on_a, nullptr);
  ASSERT_TRUE(on_a->Put(id, data, "", {}).ok());

  v1::OfferObjectRequest request;
  request.set_object_id(id.Binary());
  v1::OfferObjectResponse offers[2];
  for (v1::OfferObjectResponse& offer : offers) {
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, absl::Seconds(60));
    grpc::Status status = Stub(a)->OfferObject(&context, request, &offer);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(offer.transfer_key().size(), kTransferKeyBytes);
  }
  EXPECT_NE(offers[0].transfer_key(), offers[1].transfer_key());

  // What anyone on the path reads: the reply header, then sealed bytes only.
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  for (const v1::OfferObjectResponse& offer : offers) {
    auto fd = ConnectTcp("127.0.0.1", offer.data_port(), deadline);
    ASSERT_TRUE(fd.ok()) << fd.status();
    const std::string ask = EncodeDataRequest({DataAction::kSend, offer.ticket()});
    ASSERT_TRUE(WriteAll(fd->get(), ask.data(), ask.size(), deadline).ok());
    std::string wire(kDataReplyHeaderBytes + SealedSize(data.size()) + 1, '\0');
    auto got = ReadUpTo(fd->get(), wire.data(), wire.size(), deadline);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, wire.size() - 1);
    EXPECT_EQ(ParseDataReplyHeader(wire.substr(0, kDataReplyHeaderBytes))->size, data.size());
    EXPECT_EQ(wire.find("plaintext"), std::string::npos);
  }
  EXPECT_EQ(a->object_data_server()->pending_offers(), 0u);
}

TEST_F(AgentObjectsTest, AnUnknownObjectIsNotFoundAndAnAgentWithoutAStoreSaysSo) {
  NodeAgentServer* a = Start("a", 8 << 20);
  NodeAgentServer* plain = Start("plain", 0);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->object_store(), nullptr);
  EXPECT_EQ(plain->object_data_server(), nullptr);
  EXPECT_FALSE(std::filesystem::exists(plain->node_dir() + "/objects.sock"));

  v1::PullObjectRequest pull;
  pull.set_object_id(ObjectId::FromRandom().Binary());
  pull.set_from_address(plain->address());
  v1::PullObjectResponse pulled;
  {
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, absl::Seconds(60));
    grpc::Status status = Stub(a)->PullObject(&context, pull, &pulled);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
    EXPECT_NE(status.error_message().find("hosts no object store"), std::string::npos);
  }
  {
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, absl::Seconds(60));
    grpc::Status status = Stub(plain)->PullObject(&context, pull, &pulled);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  pull.set_from_address(a->address());
  {
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, absl::Seconds(60));
    v1::OfferObjectRequest offer;
    offer.set_object_id(pull.object_id());
    v1::OfferObjectResponse offered;
    EXPECT_EQ(Stub(a)->OfferObject(&context, offer, &offered).error_code(),
              grpc::StatusCode::NOT_FOUND);
    EXPECT_EQ(a->object_data_server()->pending_offers(), 0u);
  }
  {
    v1::PullObjectRequest bad;
    bad.set_object_id("short");
    bad.set_from_address(a->address());
    grpc::ClientContext context;
    rpc::ConfigureClientContext(&context, absl::Seconds(60));
    EXPECT_EQ(Stub(a)->PullObject(&context, bad, &pulled).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
}

}  // namespace
}  // namespace tessera

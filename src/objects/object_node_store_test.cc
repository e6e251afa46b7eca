#include "objects/object_node_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "objects/object_store_server.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

class NodeObjectStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/tessera-node-store-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    socket_ = dir_ + "/objects.sock";
    ObjectStoreServerOptions options;
    options.socket_path = socket_;
    options.capacity_bytes = 4 << 20;
    options.arena.allocate_pages = false;
    auto server = ObjectStoreServer::Start(std::move(options));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }
  NodeObjectStore Store() {
    NodeObjectStoreOptions options;
    options.socket_path = socket_;
    options.node_id = "n1";
    options.agent_address = "127.0.0.1:1";
    return NodeObjectStore(std::move(options));
  }

  std::string dir_;
  std::string socket_;
  std::unique_ptr<ObjectStoreServer> server_;
};

TEST_F(NodeObjectStoreTest, PutThenReadInPlaceThenDelete) {
  NodeObjectStore store = Store();
  ASSERT_TRUE(store.Available());
  const ObjectId id = ObjectId::FromRandom();
  const std::string bytes(300 * 1024, 'x');
  auto where = store.Put(id, bytes);
  ASSERT_TRUE(where.ok()) << where.status();
  EXPECT_EQ(where->node_id(), "n1");
  EXPECT_EQ(where->agent_address(), "127.0.0.1:1");
  EXPECT_EQ(where->size(), bytes.size());
  const internal::ObjectPathStats before = ObjectPathSnapshot();
  {
    auto value = store.Read(id, *where, absl::InfiniteFuture());
    ASSERT_TRUE(value.ok()) << value.status();
    EXPECT_TRUE(value->zero_copy());
    EXPECT_EQ(value->view(), bytes);
    // The view points into the arena, pinned while it lives.
    EXPECT_EQ(server_->store().Stats().pinned_bytes, bytes.size());
  }
  EXPECT_EQ(server_->store().Stats().pinned_bytes, 0u);
  EXPECT_EQ(ObjectPathSnapshot().zero_copy_reads, before.zero_copy_reads + 1);
  // A second put of the same id (a retried task) replaces the first.
  ASSERT_TRUE(store.Put(id, std::string(200 * 1024, 'y')).ok());
  EXPECT_EQ(store.Read(id, *where, absl::InfiniteFuture())->view().size(), 200u * 1024);
  store.Delete(id, *where);
  EXPECT_EQ(server_->store().Stats().num_objects, 0u);
  auto gone = store.Read(id, *where, absl::InfiniteFuture());
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(gone.status().message()), HasSubstr("no longer in node n1"));
}

TEST_F(NodeObjectStoreTest, PutPartsWritesThePiecesInOrderAsOneObject) {
  NodeObjectStore store = Store();
  const ObjectId id = ObjectId::FromRandom();
  const std::string head(10, 'h');
  const std::string body(150 * 1024, 'b');
  const std::string tail = "end";
  auto where = store.PutParts(id, {head, body, "", tail});
  ASSERT_TRUE(where.ok()) << where.status();
  EXPECT_EQ(where->size(), head.size() + body.size() + tail.size());
  {
    auto value = store.Read(id, *where, absl::InfiniteFuture());
    ASSERT_TRUE(value.ok()) << value.status();
    EXPECT_EQ(value->view(), head + body + tail);
  }
  // Once no reader pins it, a retried task's second put of its return replaces the first.
  ASSERT_TRUE(store.PutParts(id, {tail}).ok());
  EXPECT_EQ(store.Read(id, *where, absl::InfiniteFuture())->view(), tail);
}

TEST_F(NodeObjectStoreTest, WithoutAStoreNothingIsAvailable) {
  NodeObjectStoreOptions options;
  options.socket_path = dir_ + "/nothing.sock";
  options.node_id = "n1";
  NodeObjectStore store(std::move(options));
  EXPECT_FALSE(store.Available());
  EXPECT_FALSE(store.Put(ObjectId::FromRandom(), "abc").ok());
}

TEST_F(NodeObjectStoreTest, AStoreStartedAfterTheRuntimeIsFoundOnFirstUse) {
  NodeObjectStoreOptions options;
  options.socket_path = dir_ + "/later.sock";
  options.node_id = "n1";
  NodeObjectStore store(std::move(options));
  EXPECT_FALSE(store.Available());
  ObjectStoreServerOptions later;
  later.socket_path = dir_ + "/later.sock";
  later.capacity_bytes = 4 << 20;
  later.arena.allocate_pages = false;
  auto server = ObjectStoreServer::Start(std::move(later));
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_TRUE(store.Available());
  EXPECT_TRUE(store.Put(ObjectId::FromRandom(), "abc").ok());
}

TEST_F(NodeObjectStoreTest, AnObjectElsewhereWithNoReachableAgentFailsWithoutAHead) {
  NodeObjectStore store = Store();
  v1::StoredObject where;
  where.set_node_id("n2");
  where.set_agent_address("127.0.0.1:2");
  auto value = store.Read(ObjectId::FromRandom(), where, absl::Now() + absl::Seconds(30));
  ASSERT_FALSE(value.ok());
  EXPECT_THAT(std::string(value.status().message()), HasSubstr("from node n2"));
}

}  // namespace
}  // namespace tessera

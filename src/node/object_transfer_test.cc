// Copying objects between two nodes' stores through the NodeAgent FetchObject stream: contents
// and metadata arrive whole, a copy already here is not fetched again, and every failure (no such
// object, no room, a wrong token, chunks that do not add up, a holder that fails mid-stream)
// leaves nothing behind in the puller's store.
#include "node/object_transfer.h"

#include <cstring>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "objects/object_store_server.h"
#include "rpc/channel.h"
#include "rpc/server.h"

namespace tessera {
namespace {

constexpr char kToken[] = "transfer-test-token";

// One node's store, as its agent holds it.
struct Node {
  explicit Node(uint64_t capacity)
      : store(ObjectStoreOptions{.capacity_bytes = capacity}),
        arena(*SharedMemoryArena::Create(capacity, ArenaCreateOptions{})) {}
  LocalObjectStore local() { return {&store, arena.get()}; }

  ObjectId Put(const std::string& data, const std::string& metadata) {
    ObjectId id = ObjectId::FromRandom();
    auto location = store.Create(kLocalStoreClient, id, data.size(), metadata, {});
    EXPECT_TRUE(location.ok()) << location.status();
    std::memcpy(arena->base() + location->offset, data.data(), data.size());
    EXPECT_TRUE(store.Seal(kLocalStoreClient, id).ok());
    return id;
  }
  std::string Read(const ObjectId& id, std::string* metadata = nullptr) {
    auto location = store.Get(kLocalStoreClient, id);
    if (!location.ok()) return "<" + std::string(location.status().message()) + ">";
    std::string data(reinterpret_cast<const char*>(arena->base() + location->offset),
                     location->data_size);
    if (metadata != nullptr) *metadata = location->metadata;
    (void)store.Release(kLocalStoreClient, id);
    return data;
  }

  ObjectStore store;
  std::unique_ptr<SharedMemoryArena> arena;
};

// The holder's side as the node agent serves it, or a holder that misbehaves on demand.
class Holder : public v1::NodeAgent::Service {
 public:
  explicit Holder(Node* node) : node_(node) {}
  grpc::Status FetchObject(grpc::ServerContext*, const v1::FetchObjectRequest* request,
                           grpc::ServerWriter<v1::ObjectChunk>* writer) override {
    if (misbehave_ == Misbehave::kGap || misbehave_ == Misbehave::kFailAfterOne) {
      v1::ObjectChunk chunk;
      chunk.set_total_size(10);
      chunk.set_data("abc");
      writer->Write(chunk);
      if (misbehave_ == Misbehave::kFailAfterOne) {
        return grpc::Status(grpc::StatusCode::INTERNAL, "disk on fire");
      }
      chunk.set_offset(5);  // bytes 3 and 4 never come
      writer->Write(chunk);
      return grpc::Status::OK;
    }
    auto id = ObjectId::FromBinary(request->object_id());
    if (!id.ok()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad id");
    absl::Status status = StreamObject(node_->local(), *id, [&](const v1::ObjectChunk& chunk) {
      return writer->Write(chunk);
    });
    return status.ok() ? grpc::Status::OK
                       : grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                                      std::string(status.message()));
  }

  enum class Misbehave { kNo, kGap, kFailAfterOne };
  Misbehave misbehave_ = Misbehave::kNo;

 private:
  Node* node_;
};

class ObjectTransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rpc::ServerOptions options;
    options.token = kToken;
    auto server = rpc::RpcServer::Start(options, {&holder_});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::NodeAgent::NewStub(rpc::MakeChannel(server_->address()));
  }
  absl::StatusOr<PullResult> Pull(const ObjectId& id, const std::string& token = kToken) {
    return PullObject(*stub_, token, absl::Seconds(30), id, b_.local());
  }
  void ExpectNothingLeftInB() {
    ObjectStoreStats stats = b_.store.Stats();
    EXPECT_EQ(stats.num_objects, 0u);
    EXPECT_EQ(stats.allocated_bytes, 0u);
  }

  Node a_{64 << 20};
  Node b_{64 << 20};
  Holder holder_{&a_};
  std::unique_ptr<rpc::RpcServer> server_;
  std::unique_ptr<v1::NodeAgent::Stub> stub_;
};

TEST_F(ObjectTransferTest, CopiesAnObjectOfSeveralChunksWithItsMetadata) {
  std::string data(kObjectChunkBytes * 2 + 12345, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + i / 4096);
  const ObjectId id = a_.Put(data, "dtype=int8");
  auto pulled = Pull(id);
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(pulled->size, data.size());
  EXPECT_FALSE(pulled->already_here);
  std::string metadata;
  EXPECT_TRUE(b_.Read(id, &metadata) == data);
  EXPECT_EQ(metadata, "dtype=int8");
  // A secondary copy: evictable once nobody reads it.
  EXPECT_EQ(b_.store.Stats().num_evictable, 1u);
  // The holder's pin is gone: it can delete its copy.
  EXPECT_TRUE(a_.store.Delete(id).ok());

  auto again = Pull(id);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->already_here);
  EXPECT_EQ(again->size, data.size());
}

TEST_F(ObjectTransferTest, CopiesAnEmptyObject) {
  const ObjectId id = a_.Put("", "");
  auto pulled = Pull(id);
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(pulled->size, 0u);
  EXPECT_EQ(b_.Read(id), "");
}

TEST_F(ObjectTransferTest, AnObjectTheHolderDoesNotHaveIsNotFoundAndLeavesNothing) {
  const ObjectId id = ObjectId::FromRandom();
  auto pulled = Pull(id);
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(pulled.status().message().substr(0, 9 + id.Hex().size() + 2),
            "fetching " + id.Hex() + ": ");
  ExpectNothingLeftInB();
}

TEST_F(ObjectTransferTest, NoRoomHereIsResourceExhaustedAndLeavesNothing) {
  Node tiny(1 << 20);
  const ObjectId id = a_.Put(std::string(2 << 20, 'x'), "");
  auto pulled = PullObject(*stub_, kToken, absl::Seconds(30), id, tiny.local());
  EXPECT_TRUE(pulled.status().code() == absl::StatusCode::kResourceExhausted ||
              pulled.status().code() == absl::StatusCode::kInvalidArgument)
      << pulled.status();
  EXPECT_EQ(tiny.store.Stats().num_objects, 0u);
}

TEST_F(ObjectTransferTest, AWrongTokenIsRefused) {
  const ObjectId id = a_.Put("secret", "");
  auto pulled = Pull(id, "not-the-token");
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kUnauthenticated) << pulled.status();
  ExpectNothingLeftInB();
}

TEST_F(ObjectTransferTest, ChunksThatDoNotAddUpAreDataLossAndTheCopyIsAborted) {
  holder_.misbehave_ = Holder::Misbehave::kGap;
  auto pulled = Pull(ObjectId::FromRandom());
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kDataLoss) << pulled.status();
  ExpectNothingLeftInB();
}

TEST_F(ObjectTransferTest, AHolderThatFailsMidStreamLeavesNothing) {
  holder_.misbehave_ = Holder::Misbehave::kFailAfterOne;
  auto pulled = Pull(ObjectId::FromRandom());
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kInternal) << pulled.status();
  EXPECT_NE(pulled.status().message().find("disk on fire"), std::string::npos);
  ExpectNothingLeftInB();
}

}  // namespace
}  // namespace tessera

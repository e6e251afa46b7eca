// Copying objects between two nodes' stores: the holder's OfferObject (here a fake NodeAgent
// service in front of a real ObjectDataServer, or a fake data port that misbehaves on demand) and
// the raw TCP data connection. Contents and metadata arrive whole, a copy already here is not
// fetched again, the holder's pin ends with the transfer, and every failure (no such object, no
// room, a wrong token, a wrong or used ticket, a stream shorter or longer than the object, a
// holder that reports an error or dies mid-stream) leaves nothing behind in the puller's store.
// The bytes are sealed under the offer's transfer key (object_data_cipher.h): a byte changed on
// the way, or a stream from a listener that knows the ticket but not the key, fails the pull
// with DataLoss and leaves nothing; an offer without a key is refused before anything is made.
#include "node/object_transfer.h"

#include <sys/socket.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "node/object_data_cipher.h"
#include "node/object_data_protocol.h"
#include "node/object_data_server.h"
#include "node/object_data_socket.h"
#include "objects/object_store_server.h"
#include "rpc/channel.h"
#include "rpc/server.h"

namespace tessera {
namespace {

constexpr char kToken[] = "transfer-test-token";
// The key the fake holder's offers carry.
const std::string kFakeKey(kTransferKeyBytes, 'k');

// `plaintext` sealed under `key` as a holder's data port sends it after the reply header.
std::string Sealed(const std::string& key, const std::string& plaintext) {
  auto sealer = ChunkSealer::Create(key, plaintext.size());
  EXPECT_TRUE(sealer.ok()) << sealer.status();
  std::string out(SealedSize(plaintext.size()), '\0');
  auto* in = reinterpret_cast<const uint8_t*>(plaintext.data());
  auto* at = reinterpret_cast<uint8_t*>(out.data());
  for (uint64_t i = 0; i < ChunkCount(plaintext.size()); ++i) {
    const size_t n = ChunkPlaintextBytes(plaintext.size(), i);
    EXPECT_TRUE(sealer->Seal(i, std::span(in, n), at).ok());
    in += n;
    at += n + kSealTagBytes;
  }
  return out;
}

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

// A data port that answers one connection with `script` (after reading its request), then closes
// it, by resetting the connection when `reset` is set.
class FakeDataPort {
 public:
  FakeDataPort(std::string script, bool reset) {
    auto listener = ListenTcp("127.0.0.1");
    EXPECT_TRUE(listener.ok()) << listener.status();
    listener_ = std::move(*listener);
    port_ = *LocalPort(listener_.get());
    thread_ = std::thread([this, script = std::move(script), reset] {
      UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (fd.get() < 0) return;
      const absl::Time deadline = absl::Now() + absl::Seconds(30);
      std::string request(kDataRequestBytes, '\0');
      (void)ReadUpTo(fd.get(), request.data(), request.size(), deadline);
      (void)WriteAll(fd.get(), script.data(), script.size(), deadline);
      if (reset) {
        linger abort_on_close{1, 0};
        ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof(abort_on_close));
      }
    });
  }
  ~FakeDataPort() {
    ::shutdown(listener_.get(), SHUT_RDWR);
    thread_.join();
  }
  int port() const { return port_; }

 private:
  UniqueFd listener_;
  int port_ = 0;
  std::thread thread_;
};

// Stands between the puller and the real data port for one connection: passes the request on,
// reads the holder's whole answer, flips the byte at `flip_at` of it (header included) and
// passes that on. What anyone on the path between two machines could do.
class RelayDataPort {
 public:
  RelayDataPort(int upstream_port, size_t flip_at) {
    auto listener = ListenTcp("127.0.0.1");
    EXPECT_TRUE(listener.ok()) << listener.status();
    listener_ = std::move(*listener);
    port_ = *LocalPort(listener_.get());
    thread_ = std::thread([this, upstream_port, flip_at] {
      UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (fd.get() < 0) return;
      const absl::Time deadline = absl::Now() + absl::Seconds(30);
      std::string request(kDataRequestBytes, '\0');
      (void)ReadUpTo(fd.get(), request.data(), request.size(), deadline);
      auto upstream = ConnectTcp("127.0.0.1", upstream_port, deadline);
      if (!upstream.ok()) return;
      (void)WriteAll(upstream->get(), request.data(), request.size(), deadline);
      std::string answer;
      char buffer[1 << 16];
      while (true) {
        auto got = ReadUpTo(upstream->get(), buffer, sizeof(buffer), deadline);
        if (!got.ok() || *got == 0) break;
        answer.append(buffer, *got);
      }
      relayed_bytes_ = answer.size();
      if (flip_at < answer.size()) answer[flip_at] ^= 0x20;
      (void)WriteAll(fd.get(), answer.data(), answer.size(), deadline);
    });
  }
  ~RelayDataPort() {
    ::shutdown(listener_.get(), SHUT_RDWR);
    thread_.join();
  }
  int port() const { return port_; }
  // What the holder sent (read once the relay's connection is done).
  size_t relayed_bytes() const { return relayed_bytes_; }

 private:
  UniqueFd listener_;
  int port_ = 0;
  std::atomic<size_t> relayed_bytes_ = 0;
  std::thread thread_;
};

// The holder's OfferObject as the node agent serves it (its data port behind `relay_` when
// set), or an offer of 10 bytes under `fake_key_` on a fake data port.
class Holder : public v1::NodeAgent::Service {
 public:
  explicit Holder(ObjectDataServer* data) : data_(data) {}
  grpc::Status OfferObject(grpc::ServerContext*, const v1::OfferObjectRequest* request,
                           v1::OfferObjectResponse* response) override {
    if (fake_ != nullptr) {
      response->set_size(10);
      response->set_data_port(fake_->port());
      response->set_ticket(std::string(kDataTicketBytes, 'f'));
      response->set_transfer_key(fake_key_);
      return grpc::Status::OK;
    }
    auto id = ObjectId::FromBinary(request->object_id());
    if (!id.ok()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad id");
    auto offer = data_->OfferObject(*id);
    if (!offer.ok()) {
      return grpc::Status(static_cast<grpc::StatusCode>(offer.status().code()),
                          std::string(offer.status().message()));
    }
    response->set_size(offer->size);
    response->set_metadata(offer->metadata);
    response->set_data_port(relay_ != nullptr ? relay_->port() : data_->port());
    response->set_ticket(offer->ticket);
    response->set_transfer_key(offer->key);
    return grpc::Status::OK;
  }

  std::unique_ptr<FakeDataPort> fake_;
  std::string fake_key_ = kFakeKey;
  std::unique_ptr<RelayDataPort> relay_;

 private:
  ObjectDataServer* data_;
};

class ObjectTransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto data = ObjectDataServer::Start(a_.local(), ObjectDataServerOptions{});
    ASSERT_TRUE(data.ok()) << data.status();
    data_ = *std::move(data);
    holder_ = std::make_unique<Holder>(data_.get());
    rpc::ServerOptions options;
    options.token = kToken;
    auto server = rpc::RpcServer::Start(options, {holder_.get()});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::NodeAgent::NewStub(rpc::MakeChannel(server_->address(), kToken));
  }
  void TearDown() override {
    server_->Shutdown(absl::Seconds(1));
    data_->Stop();
  }
  absl::StatusOr<PullResult> Pull(const ObjectId& id, const std::string& token = kToken,
                                  Node* into = nullptr) {
    std::unique_ptr<v1::NodeAgent::Stub> other;
    v1::NodeAgent::Stub* stub = stub_.get();
    if (token != kToken) {
      other = v1::NodeAgent::NewStub(rpc::MakeChannel(server_->address(), token));
      stub = other.get();
    }
    return PullObject({stub, "127.0.0.1"}, absl::Seconds(30), id,
                      (into == nullptr ? &b_ : into)->local());
  }
  void ExpectNothingLeftIn(Node& node) {
    ObjectStoreStats stats = node.store.Stats();
    EXPECT_EQ(stats.num_objects, 0u);
    EXPECT_EQ(stats.allocated_bytes, 0u);
  }
  // The holder's pins end on the data server's own threads, just after the puller returns.
  void WaitUntilTheHolderPinsNothing() {
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (a_.store.Stats().pinned_bytes != 0 && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    EXPECT_EQ(a_.store.Stats().pinned_bytes, 0u);
    EXPECT_EQ(data_->pending_offers(), 0u);
  }
  // What the data port answers a raw request: the reply header's code and message.
  absl::Status Ask(DataAction action, const std::string& ticket) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    auto fd = ConnectTcp("127.0.0.1", data_->port(), deadline);
    if (!fd.ok()) return fd.status();
    const std::string request = EncodeDataRequest({action, ticket});
    if (absl::Status s = WriteAll(fd->get(), request.data(), request.size(), deadline); !s.ok()) {
      return s;
    }
    std::string header(kDataReplyHeaderBytes, '\0');
    auto got = ReadUpTo(fd->get(), header.data(), header.size(), deadline);
    if (!got.ok()) return got.status();
    if (*got == 0) return absl::OkStatus();  // a drop is answered by closing
    auto parsed = ParseDataReplyHeader(header.substr(0, *got));
    if (!parsed.ok()) return parsed.status();
    std::string message(parsed->message_bytes, '\0');
    (void)ReadUpTo(fd->get(), message.data(), message.size(), deadline);
    return absl::Status(parsed->code, message);
  }

  Node a_{64 << 20};
  Node b_{64 << 20};
  std::unique_ptr<ObjectDataServer> data_;
  std::unique_ptr<Holder> holder_;
  std::unique_ptr<rpc::RpcServer> server_;
  std::unique_ptr<v1::NodeAgent::Stub> stub_;
};

TEST_F(ObjectTransferTest, CopiesAnObjectOfSeveralMegabytesWithItsMetadata) {
  std::string data((5 << 20) + 12345, '\0');
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
  WaitUntilTheHolderPinsNothing();
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
  ExpectNothingLeftIn(b_);
}

TEST_F(ObjectTransferTest, NoRoomHereIsResourceExhaustedLeavesNothingAndDropsTheOffer) {
  Node tiny(1 << 20);
  const ObjectId id = a_.Put(std::string(2 << 20, 'x'), "");
  auto pulled = Pull(id, kToken, &tiny);
  EXPECT_TRUE(pulled.status().code() == absl::StatusCode::kResourceExhausted ||
              pulled.status().code() == absl::StatusCode::kInvalidArgument)
      << pulled.status();
  ExpectNothingLeftIn(tiny);
  WaitUntilTheHolderPinsNothing();
}

TEST_F(ObjectTransferTest, AWrongTokenIsRefused) {
  const ObjectId id = a_.Put("secret", "");
  auto pulled = Pull(id, "not-the-token");
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kUnauthenticated) << pulled.status();
  ExpectNothingLeftIn(b_);
  EXPECT_EQ(data_->pending_offers(), 0u);
}

TEST_F(ObjectTransferTest, AWrongOrUsedTicketIsRefusedByTheDataPort) {
  absl::Status wrong = Ask(DataAction::kSend, std::string(kDataTicketBytes, 'x'));
  EXPECT_EQ(wrong.code(), absl::StatusCode::kUnauthenticated) << wrong;
  EXPECT_EQ(wrong.message(), "unknown or used data ticket");

  const ObjectId id = a_.Put("secret", "");
  auto offer = data_->OfferObject(id);
  ASSERT_TRUE(offer.ok()) << offer.status();
  EXPECT_EQ(offer->size, 6u);
  EXPECT_EQ(Ask(DataAction::kDrop, offer->ticket), absl::OkStatus());
  WaitUntilTheHolderPinsNothing();
  EXPECT_EQ(Ask(DataAction::kSend, offer->ticket).code(), absl::StatusCode::kUnauthenticated);

  // Not a data request at all.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  auto fd = ConnectTcp("127.0.0.1", data_->port(), deadline);
  ASSERT_TRUE(fd.ok()) << fd.status();
  const std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n..........";
  ASSERT_EQ(http.size(), kDataRequestBytes);
  ASSERT_TRUE(WriteAll(fd->get(), http.data(), http.size(), deadline).ok());
  std::string header(kDataReplyHeaderBytes, '\0');
  ASSERT_EQ(*ReadUpTo(fd->get(), header.data(), header.size(), deadline), header.size());
  EXPECT_EQ(ParseDataReplyHeader(header)->code, absl::StatusCode::kInvalidArgument);
}

TEST_F(ObjectTransferTest, AnOfferNotClaimedInTimeExpiresAndItsPinEnds) {
  ObjectDataServerOptions options;
  options.ticket_lifetime = absl::Milliseconds(1);
  auto data = ObjectDataServer::Start(a_.local(), options);
  ASSERT_TRUE(data.ok()) << data.status();
  const ObjectId id = a_.Put("soon gone", "");
  auto offer = (*data)->OfferObject(id);
  ASSERT_TRUE(offer.ok()) << offer.status();
  WaitUntilTheHolderPinsNothing();
  EXPECT_EQ((*data)->pending_offers(), 0u);
}

TEST_F(ObjectTransferTest, StoppingTheDataServerReleasesItsOffers) {
  const ObjectId id = a_.Put("pinned", "");
  ASSERT_TRUE(data_->OfferObject(id).ok());
  EXPECT_GT(a_.store.Stats().pinned_bytes, 0u);
  data_->Stop();
  EXPECT_EQ(a_.store.Stats().pinned_bytes, 0u);
  EXPECT_EQ(data_->OfferObject(id).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(ObjectTransferTest, AShortStreamIsDataLossAndTheCopyIsAborted) {
  holder_->fake_ = std::make_unique<FakeDataPort>(
      EncodeDataReply(absl::StatusCode::kOk, 10, "") + "abc", /*reset=*/false);
  auto pulled = Pull(ObjectId::FromRandom());
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kDataLoss) << pulled.status();
  EXPECT_NE(
      pulled.status().message().find("the stream ended after 3 of 26 bytes (10 sealed in chunks)"),
      std::string::npos)
      << pulled.status();
  ExpectNothingLeftIn(b_);

  // Cut inside the tag.
  holder_->fake_ = std::make_unique<FakeDataPort>(
      EncodeDataReply(absl::StatusCode::kOk, 10, "") + Sealed(kFakeKey, "0123456789").substr(0, 20),
      /*reset=*/false);
  pulled = Pull(ObjectId::FromRandom());
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kDataLoss) << pulled.status();
  EXPECT_NE(pulled.status().message().find("the stream ended after 20 of 26 bytes"),
            std::string::npos)
      << pulled.status();
  ExpectNothingLeftIn(b_);
}

TEST_F(ObjectTransferTest, ALongStreamIsDataLossAndTheCopyIsAborted) {
  holder_->fake_ = std::make_unique<FakeDataPort>(
      EncodeDataReply(absl::StatusCode::kOk, 10, "") + Sealed(kFakeKey, "0123456789") + "X",
      /*reset=*/false);
  auto pulled = Pull(ObjectId::FromRandom());
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kDataLoss) << pulled.status();
  EXPECT_NE(pulled.status().message().find("the stream carries more than 26 bytes"),
            std::string::npos)
      << pulled.status();
  ExpectNothingLeftIn(b_);
}

TEST_F(ObjectTransferTest, AStreamSealedUnderTheFakeKeyIsAccepted) {
  // The fake port itself is right when it seals with the offer's key: the refusals below are
  // the key's doing, not the fake's.
  holder_->fake_ = std::make_unique<FakeDataPort>(
      EncodeDataReply(absl::StatusCode::kOk, 10, "") + Sealed(kFakeKey, "0123456789"),
      /*reset=*/false);
  const ObjectId id = ObjectId::FromRandom();
  auto pulled = Pull(id);
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(b_.Read(id), "0123456789");
}

TEST_F(ObjectTransferTest, AListenerThatKnowsTheTicketButNotTheKeyIsRefusedAndLeavesNothing) {
  // A squatter on the holder's data port gets the ticket with the request, but never the key,
  // which travelled only in the authenticated OfferObject answer: whatever it makes up, sealed
  // under a key of its own or not sealed at all, is refused.
  for (const std::string& forged : {Sealed(std::string(kTransferKeyBytes, 'x'), "forged!!!!"),
                                    std::string("forged!!!!") + std::string(kSealTagBytes, '\0')}) {
    holder_->fake_ = std::make_unique<FakeDataPort>(
        EncodeDataReply(absl::StatusCode::kOk, 10, "") + forged, /*reset=*/false);
    auto pulled = Pull(ObjectId::FromRandom());
    EXPECT_EQ(pulled.status().code(), absl::StatusCode::kDataLoss) << pulled.status();
    EXPECT_NE(pulled.status().message().find("the bytes did not come from the holder (chunk 0 "
                                             "of 1 failed authentication"),
              std::string::npos)
        << pulled.status();
    ExpectNothingLeftIn(b_);
  }
  // An empty object too: its stream is one tag.
  holder_->fake_ = std::make_unique<FakeDataPort>(
      EncodeDataReply(absl::StatusCode::kOk, 0, "") + std::string(kSealTagBytes, '\0'),
      /*reset=*/false);
  holder_->fake_key_ = kFakeKey;
  auto pulled = Pull(ObjectId::FromRandom());
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kDataLoss) << pulled.status();
}

TEST_F(ObjectTransferTest, AByteChangedOnTheWayFailsThePullAndLeavesNothing) {
  std::string data((3 << 20) + 777, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31 + i / 999);
  const ObjectId id = a_.Put(data, "");
  const size_t body = kDataReplyHeaderBytes;
  // In the first chunk's bytes, in the middle chunk's tag, in the last chunk's last byte.
  for (size_t flip_at : {body + 100, body + 2 * ((1 << 20) + kSealTagBytes) - 3,
                         body + SealedSize(data.size()) - kSealTagBytes - 1}) {
    holder_->relay_ = std::make_unique<RelayDataPort>(data_->port(), flip_at);
    auto pulled = Pull(id);
    EXPECT_EQ(pulled.status().code(), absl::StatusCode::kDataLoss)
        << flip_at << ": " << pulled.status();
    EXPECT_NE(pulled.status().message().find("the bytes did not come from the holder"),
              std::string::npos)
        << pulled.status();
    ExpectNothingLeftIn(b_);
    holder_->relay_.reset();  // joins the relay
    WaitUntilTheHolderPinsNothing();
  }
  // The same relay, changing nothing past the stream's end, passes the copy whole.
  holder_->relay_ = std::make_unique<RelayDataPort>(data_->port(), size_t{1} << 40);
  auto pulled = Pull(id);
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_TRUE(b_.Read(id) == data);
  holder_->relay_.reset();
}

TEST_F(ObjectTransferTest, AnOfferWithoutATransferKeyIsRefusedAndLeavesNothing) {
  holder_->fake_ = std::make_unique<FakeDataPort>(
      EncodeDataReply(absl::StatusCode::kOk, 10, "") + "0123456789", /*reset=*/false);
  holder_->fake_key_.clear();
  const ObjectId id = ObjectId::FromRandom();
  auto pulled = Pull(id);
  EXPECT_EQ(pulled.status(),
            absl::FailedPreconditionError(absl::StrCat(
                "fetching ", id.Hex(),
                ": the holder's offer carries 0 bytes of transfer key, not 32 (an agent of an "
                "older version?), so its bytes could not be authenticated; not copied")));
  ExpectNothingLeftIn(b_);
}

TEST_F(ObjectTransferTest, AHolderThatReportsAnErrorLeavesNothing) {
  holder_->fake_ = std::make_unique<FakeDataPort>(
      EncodeDataReply(absl::StatusCode::kInternal, 0, "disk on fire"), /*reset=*/false);
  auto pulled = Pull(ObjectId::FromRandom());
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kInternal) << pulled.status();
  EXPECT_NE(pulled.status().message().find("disk on fire"), std::string::npos);
  ExpectNothingLeftIn(b_);
}

TEST_F(ObjectTransferTest, AHolderThatDiesMidStreamLeavesNothing) {
  holder_->fake_ = std::make_unique<FakeDataPort>(
      EncodeDataReply(absl::StatusCode::kOk, 10, "") + "abc", /*reset=*/true);
  auto pulled = Pull(ObjectId::FromRandom());
  EXPECT_FALSE(pulled.ok());
  EXPECT_NE(pulled.status().message().find("fetching "), std::string::npos) << pulled.status();
  ExpectNothingLeftIn(b_);
}

TEST_F(ObjectTransferTest, AHolderWhoseReplyIsNotADataReplyIsDataLoss) {
  holder_->fake_ = std::make_unique<FakeDataPort>("HTTP/1.1 400 Bad Request\r\n", false);
  auto pulled = Pull(ObjectId::FromRandom());
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kDataLoss) << pulled.status();
  ExpectNothingLeftIn(b_);
}

}  // namespace
}  // namespace tessera

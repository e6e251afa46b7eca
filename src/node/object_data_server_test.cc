// The data port's bounds, spoken to in the raw protocol (object_data_protocol.h): idle
// connections share the event loop (the thread count stays that of the loop and the sending
// threads), a connection that sends no whole request is answered and closed after
// request_timeout, a refused request's connection is closed at once, connections past
// max_connections are answered Unavailable and closed, more transfers than sending threads all
// arrive whole, and Stop ends stalled and queued transfers and releases their pins. What the
// port sends is sealed (object_data_cipher.h): the tests open it with the offer's key, and the
// object's plaintext never appears on the wire.
#include "node/object_data_server.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "node/object_data_cipher.h"
#include "node/object_data_protocol.h"
#include "node/object_data_socket.h"
#include "objects/object_store_server.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

// Long enough that no event a test waits for can miss it on a loaded machine.
constexpr absl::Duration kPatience = absl::Seconds(30);

size_t ThreadsOfThisProcess() {
  size_t count = 0;
  for ([[maybe_unused]] const auto& entry :
       std::filesystem::directory_iterator("/proc/self/task")) {
    ++count;
  }
  return count;
}

bool WaitUntil(const std::function<bool()>& done) {
  const absl::Time give_up = absl::Now() + kPatience;
  while (!done()) {
    if (absl::Now() >= give_up) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

// One node's store, as its agent holds it.
struct Node {
  explicit Node(uint64_t capacity)
      : store(ObjectStoreOptions{.capacity_bytes = capacity}),
        arena(*SharedMemoryArena::Create(capacity, ArenaCreateOptions{})) {}
  LocalObjectStore local() { return {&store, arena.get()}; }

  ObjectId Put(const std::string& data) {
    ObjectId id = ObjectId::FromRandom();
    auto location = store.Create(kLocalStoreClient, id, data.size(), "", {});
    EXPECT_TRUE(location.ok()) << location.status();
    std::memcpy(arena->base() + location->offset, data.data(), data.size());
    EXPECT_TRUE(store.Seal(kLocalStoreClient, id).ok());
    return id;
  }

  ObjectStore store;
  std::unique_ptr<SharedMemoryArena> arena;
};

std::string Pattern(size_t size, int seed) {
  std::string data(size, '\0');
  for (size_t i = 0; i < size; ++i) data[i] = static_cast<char>(i * 7 + i / 4096 + seed);
  return data;
}

// What the data port answered on one connection: the reply's status, the object size it
// announced, the sealed bytes after it, and whether the port then closed the connection.
struct Answer {
  absl::Status status;
  uint64_t size = 0;
  std::string body;  // SealedSize(size) bytes as they crossed the wire
  bool closed = false;
};

// Opens a whole sealed body under `key`: the object's bytes.
absl::StatusOr<std::string> OpenBody(const std::string& key, uint64_t size, std::string body) {
  if (body.size() != SealedSize(size)) {
    return absl::DataLossError(absl::StrCat(body.size(), " sealed bytes for ", size));
  }
  TESSERA_ASSIGN_OR_RETURN(ChunkOpener opener, ChunkOpener::Create(key, size));
  std::string data;
  auto* at = reinterpret_cast<uint8_t*>(body.data());
  for (uint64_t i = 0; i < ChunkCount(size); ++i) {
    const size_t n = ChunkPlaintextBytes(size, i);
    TESSERA_RETURN_IF_ERROR(opener.Open(i, std::span(at, n), std::span(at + n, kSealTagBytes)));
    data.append(reinterpret_cast<const char*>(at), n);
    at += n + kSealTagBytes;
  }
  return data;
}

// Reads a whole answer and then one more read: end of stream is `closed`. DeadlineExceeded
// when the port neither answers nor closes within kPatience.
absl::StatusOr<Answer> ReadAnswer(int fd) {
  const absl::Time deadline = absl::Now() + kPatience;
  std::string header(kDataReplyHeaderBytes, '\0');
  TESSERA_ASSIGN_OR_RETURN(size_t got, ReadUpTo(fd, header.data(), header.size(), deadline));
  if (got != header.size()) {
    return absl::DataLossError(absl::StrCat("closed after ", got, " bytes of the reply header"));
  }
  TESSERA_ASSIGN_OR_RETURN(DataReplyHeader parsed, ParseDataReplyHeader(header));
  std::string message(parsed.message_bytes, '\0');
  TESSERA_ASSIGN_OR_RETURN(got, ReadUpTo(fd, message.data(), message.size(), deadline));
  Answer answer;
  answer.status = absl::Status(parsed.code, message);
  answer.size = parsed.size;
  if (parsed.code == absl::StatusCode::kOk) answer.body.resize(SealedSize(parsed.size));
  TESSERA_ASSIGN_OR_RETURN(got, ReadUpTo(fd, answer.body.data(), answer.body.size(), deadline));
  if (got != answer.body.size()) {
    return absl::DataLossError(absl::StrCat("the body ended after ", got, " bytes"));
  }
  char extra;
  TESSERA_ASSIGN_OR_RETURN(got, ReadUpTo(fd, &extra, 1, deadline));
  answer.closed = got == 0;
  return answer;
}

// A connection whose receive buffer is small, so a large object's sender soon blocks on it.
UniqueFd ConnectWithSmallReceiveBuffer(int port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int bytes = 4096;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0)
      << std::strerror(errno);
  return fd;
}

class ObjectDataServerTest : public ::testing::Test {
 protected:
  void StartServer(ObjectDataServerOptions options) {
    auto server = ObjectDataServer::Start(node_.local(), std::move(options));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  UniqueFd Connect() {
    auto fd = ConnectTcp("127.0.0.1", server_->port(), absl::Now() + kPatience);
    EXPECT_TRUE(fd.ok()) << fd.status();
    return fd.ok() ? *std::move(fd) : UniqueFd();
  }
  absl::Status SendRequest(int fd, DataAction action, const std::string& ticket) {
    const std::string request = EncodeDataRequest({action, ticket});
    return WriteAll(fd, request.data(), request.size(), absl::Now() + kPatience);
  }
  // Offers `id` and fetches it over a new connection: the offer and the answer as it came.
  absl::StatusOr<std::pair<ObjectOffer, Answer>> FetchSealed(const ObjectId& id) {
    TESSERA_ASSIGN_OR_RETURN(ObjectOffer offer, server_->OfferObject(id));
    TESSERA_ASSIGN_OR_RETURN(UniqueFd fd,
                             ConnectTcp("127.0.0.1", server_->port(), absl::Now() + kPatience));
    TESSERA_RETURN_IF_ERROR(SendRequest(fd.get(), DataAction::kSend, offer.ticket));
    TESSERA_ASSIGN_OR_RETURN(Answer answer, ReadAnswer(fd.get()));
    TESSERA_RETURN_IF_ERROR(answer.status);
    if (!answer.closed) return absl::DataLossError("the port sent more than the object");
    return std::make_pair(std::move(offer), std::move(answer));
  }
  // The same, opened with the offer's key: the object's bytes, or the port's answer.
  absl::StatusOr<std::string> Fetch(const ObjectId& id) {
    TESSERA_ASSIGN_OR_RETURN(auto fetched, FetchSealed(id));
    auto& [offer, answer] = fetched;
    if (answer.size != offer.size) return absl::DataLossError("announced another size");
    return OpenBody(offer.key, answer.size, std::move(answer.body));
  }
  void ExpectAllConnectionsClosedAndNothingPinned() {
    EXPECT_TRUE(WaitUntil([&] { return server_->open_connections() == 0; }))
        << server_->open_connections() << " connections still open";
    EXPECT_TRUE(WaitUntil([&] { return node_.store.Stats().pinned_bytes == 0; }));
  }

  Node node_{32 << 20};
  std::unique_ptr<ObjectDataServer> server_;
};

TEST_F(ObjectDataServerTest, OptionsOutOfRangeAreRefusedNamingTheOption) {
  ObjectDataServerOptions no_threads;
  no_threads.transfer_threads = 0;
  auto started = ObjectDataServer::Start(node_.local(), no_threads);
  EXPECT_EQ(started.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(started.status().message()),
              HasSubstr("ObjectDataServerOptions.transfer_threads must be at least 1, got 0"));

  ObjectDataServerOptions no_connections;
  no_connections.max_connections = -1;
  started = ObjectDataServer::Start(node_.local(), no_connections);
  EXPECT_THAT(std::string(started.status().message()),
              HasSubstr("ObjectDataServerOptions.max_connections must be at least 1, got -1"));

  ObjectDataServerOptions no_request_time;
  no_request_time.request_timeout = absl::ZeroDuration();
  started = ObjectDataServer::Start(node_.local(), no_request_time);
  EXPECT_THAT(std::string(started.status().message()),
              HasSubstr("ObjectDataServerOptions.request_timeout must be positive, got 0"));
}

TEST_F(ObjectDataServerTest, TheBytesOnTheWireAreSealedUnderAFreshKeyPerOffer) {
  StartServer({});
  // A distinctive plaintext over several chunks, the last one short.
  std::string data;
  while (data.size() < 3 * kSealedChunkBytes + 999) data += "TESSERA-PLAINTEXT-MARKER;";
  const ObjectId id = node_.Put(data);

  auto first = FetchSealed(id);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = FetchSealed(id);
  ASSERT_TRUE(second.ok()) << second.status();
  const auto& [offer, answer] = *first;
  EXPECT_EQ(offer.key.size(), kTransferKeyBytes);
  EXPECT_NE(offer.key, second->first.key);
  EXPECT_NE(offer.ticket, second->first.ticket);
  EXPECT_EQ(answer.size, data.size());
  EXPECT_EQ(answer.body.size(), SealedSize(data.size()));
  EXPECT_EQ(answer.body.find("TESSERA-PLAINTEXT"), std::string::npos);
  EXPECT_EQ(answer.body.find("MARKER;"), std::string::npos);
  // The same object sealed for two offers: nothing of one stream repeats in the other.
  EXPECT_EQ(second->second.body.find(answer.body.substr(1000, 64)), std::string::npos);

  auto opened = OpenBody(offer.key, answer.size, answer.body);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_TRUE(*opened == data);
  // Under the other offer's key it does not open.
  EXPECT_EQ(OpenBody(second->first.key, answer.size, answer.body).status().code(),
            absl::StatusCode::kDataLoss);

  // An empty object is one empty chunk: a tag, nothing readable and nothing forgeable.
  auto empty = FetchSealed(node_.Put(""));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->second.body.size(), kSealTagBytes);
  EXPECT_TRUE(OpenBody(empty->first.key, 0, empty->second.body).ok());
  ExpectAllConnectionsClosedAndNothingPinned();
}

TEST_F(ObjectDataServerTest, HundredsOfIdleConnectionsShareTheEventLoopAndATransferStillWorks) {
  const size_t threads_before = ThreadsOfThisProcess();
  ObjectDataServerOptions options;
  options.transfer_threads = 2;
  options.max_connections = 1000;
  options.request_timeout = absl::Minutes(10);  // none of them is closed for being idle here
  StartServer(options);
  const size_t server_threads = 1 + 2;  // the event loop and the sending threads
  EXPECT_LE(ThreadsOfThisProcess(), threads_before + server_threads);

  constexpr int kIdle = 300;
  std::vector<UniqueFd> idle;
  for (int i = 0; i < kIdle; ++i) idle.push_back(Connect());
  ASSERT_TRUE(WaitUntil([&] { return server_->open_connections() == kIdle; }))
      << server_->open_connections();
  EXPECT_LE(ThreadsOfThisProcess(), threads_before + server_threads);

  const std::string data = Pattern((1 << 20) + 17, 1);
  auto fetched = Fetch(node_.Put(data));
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_TRUE(*fetched == data);
  EXPECT_LE(ThreadsOfThisProcess(), threads_before + server_threads);

  // Stop closes every idle connection and joins every thread.
  server_->Stop();
  EXPECT_EQ(server_->open_connections(), 0);
  char byte;
  for (const UniqueFd& fd : idle) {
    ASSERT_EQ(*ReadUpTo(fd.get(), &byte, 1, absl::Now() + kPatience), 0u);
  }
  EXPECT_LE(ThreadsOfThisProcess(), threads_before);
}

TEST_F(ObjectDataServerTest, AConnectionWithoutAWholeRequestIsAnsweredAndClosedAfterTheTimeout) {
  ObjectDataServerOptions options;
  options.request_timeout = absl::Milliseconds(200);
  StartServer(options);
  const ObjectId id = node_.Put("still offered");
  auto offer = server_->OfferObject(id);
  ASSERT_TRUE(offer.ok()) << offer.status();

  std::vector<UniqueFd> silent;
  std::vector<UniqueFd> halfway;
  for (int i = 0; i < 10; ++i) {
    silent.push_back(Connect());
    halfway.push_back(Connect());
    const std::string half =
        EncodeDataRequest({DataAction::kSend, offer->ticket}).substr(0, kDataRequestBytes / 2);
    ASSERT_TRUE(
        WriteAll(halfway.back().get(), half.data(), half.size(), absl::Now() + kPatience).ok());
  }
  for (std::vector<UniqueFd>* group : {&silent, &halfway}) {
    for (const UniqueFd& fd : *group) {
      auto answer = ReadAnswer(fd.get());
      ASSERT_TRUE(answer.ok()) << answer.status();
      EXPECT_EQ(answer->status.code(), absl::StatusCode::kDeadlineExceeded) << answer->status;
      EXPECT_EQ(answer->status.message(), "no whole data request within 200ms of connecting");
      EXPECT_TRUE(answer->closed);
    }
  }
  EXPECT_TRUE(WaitUntil([&] { return server_->open_connections() == 0; }));
  // Half a request claims nothing: the offer is still good.
  EXPECT_EQ(server_->pending_offers(), 1u);
}

TEST_F(ObjectDataServerTest, ARefusedRequestIsAnsweredAndItsConnectionClosedAtOnce) {
  ObjectDataServerOptions options;
  options.request_timeout = absl::Minutes(10);  // a close here is the refusal's, not idleness
  StartServer(options);

  UniqueFd unknown = Connect();
  ASSERT_TRUE(
      SendRequest(unknown.get(), DataAction::kSend, std::string(kDataTicketBytes, 'x')).ok());
  auto answer = ReadAnswer(unknown.get());
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->status, absl::UnauthenticatedError("unknown or used data ticket"));
  EXPECT_TRUE(answer->closed);

  // A request that is not one, with more bytes after it than a request has.
  UniqueFd garbage = Connect();
  const std::string http = "GET / HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n";
  ASSERT_GT(http.size(), kDataRequestBytes);
  ASSERT_TRUE(WriteAll(garbage.get(), http.data(), http.size(), absl::Now() + kPatience).ok());
  answer = ReadAnswer(garbage.get());
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->status.code(), absl::StatusCode::kInvalidArgument) << answer->status;
  EXPECT_TRUE(answer->closed);

  // A used ticket; and the drop before it is answered by closing.
  const ObjectId id = node_.Put("dropped");
  auto offer = server_->OfferObject(id);
  ASSERT_TRUE(offer.ok()) << offer.status();
  UniqueFd drop = Connect();
  ASSERT_TRUE(SendRequest(drop.get(), DataAction::kDrop, offer->ticket).ok());
  char byte;
  EXPECT_EQ(*ReadUpTo(drop.get(), &byte, 1, absl::Now() + kPatience), 0u);
  UniqueFd used = Connect();
  ASSERT_TRUE(SendRequest(used.get(), DataAction::kSend, offer->ticket).ok());
  answer = ReadAnswer(used.get());
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(answer->closed);

  ExpectAllConnectionsClosedAndNothingPinned();
}

TEST_F(ObjectDataServerTest, ConnectionsPastTheLimitAreAnsweredUnavailableAndClosed) {
  ObjectDataServerOptions options;
  options.max_connections = 4;
  options.request_timeout = absl::Minutes(10);
  StartServer(options);
  std::vector<UniqueFd> held;
  for (int i = 0; i < 4; ++i) held.push_back(Connect());
  ASSERT_TRUE(WaitUntil([&] { return server_->open_connections() == 4; }));

  for (int i = 0; i < 3; ++i) {
    UniqueFd over = Connect();
    auto answer = ReadAnswer(over.get());
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->status.code(), absl::StatusCode::kUnavailable) << answer->status;
    EXPECT_THAT(std::string(answer->status.message()),
                HasSubstr("the data port is at its connection limit (4 open)"));
    EXPECT_TRUE(answer->closed);
  }
  EXPECT_EQ(server_->open_connections(), 4);

  // One held connection goes away: its place serves a transfer again.
  held.pop_back();
  ASSERT_TRUE(WaitUntil([&] { return server_->open_connections() == 3; }));
  const std::string data = Pattern(100000, 2);
  auto fetched = Fetch(node_.Put(data));
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_TRUE(*fetched == data);
}

TEST_F(ObjectDataServerTest, MoreTransfersThanSendingThreadsAllArriveWhole) {
  ObjectDataServerOptions options;
  options.transfer_threads = 2;
  StartServer(options);
  constexpr int kTransfers = 8;
  std::vector<std::string> data;
  std::vector<ObjectId> ids;
  for (int i = 0; i < kTransfers; ++i) {
    data.push_back(Pattern((1 << 20) + i, i));
    ids.push_back(node_.Put(data.back()));
  }
  std::vector<absl::StatusOr<std::string>> fetched(kTransfers, absl::UnknownError("not run"));
  std::vector<std::thread> pullers;
  for (int i = 0; i < kTransfers; ++i) {
    pullers.emplace_back([&, i] { fetched[i] = Fetch(ids[i]); });
  }
  for (std::thread& puller : pullers) puller.join();
  for (int i = 0; i < kTransfers; ++i) {
    ASSERT_TRUE(fetched[i].ok()) << i << ": " << fetched[i].status();
    EXPECT_TRUE(*fetched[i] == data[i]) << i;
  }
  ExpectAllConnectionsClosedAndNothingPinned();
}

TEST_F(ObjectDataServerTest, StopEndsStalledAndQueuedTransfersAndReleasesTheirPins) {
  ObjectDataServerOptions options;
  options.transfer_threads = 1;
  StartServer(options);
  // Larger than the socket buffers of both ends: the one sender blocks on a reader that waits.
  const ObjectId first = node_.Put(Pattern(8 << 20, 3));
  const ObjectId second = node_.Put(Pattern(8 << 20, 4));
  auto first_offer = server_->OfferObject(first);
  auto second_offer = server_->OfferObject(second);
  ASSERT_TRUE(first_offer.ok() && second_offer.ok());

  UniqueFd stalled = ConnectWithSmallReceiveBuffer(server_->port());
  ASSERT_TRUE(SendRequest(stalled.get(), DataAction::kSend, first_offer->ticket).ok());
  std::string header(kDataReplyHeaderBytes, '\0');
  ASSERT_EQ(*ReadUpTo(stalled.get(), header.data(), header.size(), absl::Now() + kPatience),
            header.size());
  EXPECT_EQ(ParseDataReplyHeader(header)->size, uint64_t{8 << 20});
  UniqueFd queued = ConnectWithSmallReceiveBuffer(server_->port());
  ASSERT_TRUE(SendRequest(queued.get(), DataAction::kSend, second_offer->ticket).ok());
  ASSERT_TRUE(WaitUntil([&] { return server_->pending_offers() == 0; }));  // both claimed
  EXPECT_GT(node_.store.Stats().pinned_bytes, 0u);

  server_->Stop();
  EXPECT_EQ(node_.store.Stats().pinned_bytes, 0u);
  EXPECT_EQ(server_->open_connections(), 0);
}

}  // namespace
}  // namespace tessera

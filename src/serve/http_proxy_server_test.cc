// HttpProxyServer over real loopback sockets, read by a small blocking client: keep-alive,
// pipelining, 16 MiB bodies (Content-Length and chunked), streamed (server-sent event) chunks
// arriving before Finish, backpressure, 100-continue, HEAD, HTTP/1.0, the refusals (400, 413,
// 431, 503) and the timers (a trickled head, an idle connection, the request timeout) driven by
// a FakeClock, a client leaving mid-stream, and Fail.
#include "serve/http_proxy_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "base/clock.h"
#include "base/string_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::serve {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

// How long a test waits for something that comes at once when the code is right: a bound
// against hanging, never a measured time.
constexpr absl::Duration kPatience = absl::Seconds(30);

struct Reply {
  int status = 0;                              // 0: no whole head came
  std::map<std::string, std::string> headers;  // names lower-case
  std::string body;
  bool complete = false;  // the whole body came
};

// One blocking client connection with its own read buffer, so several responses on one
// connection are read one at a time.
class Client {
 public:
  explicit Client(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
      ADD_FAILURE() << "cannot connect to port " << port;
      Close();
      return;
    }
    const timeval patience{static_cast<time_t>(absl::ToInt64Seconds(kPatience)), 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof(patience));
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &patience, sizeof(patience));
  }
  ~Client() { Close(); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  void Send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return;  // the server may close early (413): its reply is still there to read
      bytes.remove_prefix(static_cast<size_t>(n));
    }
  }

  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

  // The next response; `head_only` for the response to HEAD (no body whatever it says).
  Reply ReadReply(bool head_only = false) {
    Reply reply;
    if (!FillUntil("\r\n\r\n")) return reply;
    const std::string head = Take(buffer_.find("\r\n\r\n") + 4);
    const size_t line_end = head.find("\r\n");
    if (!absl::SimpleAtoi(head.substr(9, 3), &reply.status)) return reply;
    for (size_t at = line_end + 2; at < head.size() - 2;) {
      const size_t end = head.find("\r\n", at);
      const std::string line = head.substr(at, end - at);
      const size_t colon = line.find(':');
      reply.headers[absl::AsciiStrToLower(line.substr(0, colon))] =
          std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
      at = end + 2;
    }
    if (head_only || reply.status < 200 || reply.status == 204 || reply.status == 304) {
      reply.complete = true;
    } else if (const auto coding = reply.headers.find("transfer-encoding");
               coding != reply.headers.end() && coding->second == "chunked") {
      while (std::optional<std::string> chunk = ReadChunk()) {
        if (chunk->empty()) {
          reply.complete = true;
          break;
        }
        reply.body += *chunk;
      }
    } else if (reply.headers.contains("content-length")) {
      size_t length = 0;
      if (absl::SimpleAtoi(reply.headers.at("content-length"), &length) && FillTo(length)) {
        reply.body = Take(length);
        reply.complete = true;
      }
    } else {
      while (Fill() > 0) {
      }
      reply.body = Take(buffer_.size());
      reply.complete = true;  // delimited by the end of the connection
    }
    return reply;
  }

  // The data of the next chunk of a chunked body: "" for the last chunk (no trailers), nullopt
  // when the connection ends first.
  std::optional<std::string> ReadChunk() {
    if (!FillUntil("\r\n")) return std::nullopt;
    const size_t line_end = buffer_.find("\r\n");
    size_t size = 0;
    if (!absl::SimpleHexAtoi(buffer_.substr(0, line_end), &size)) return std::nullopt;
    buffer_.erase(0, line_end + 2);
    if (!FillTo(size + 2)) return std::nullopt;
    std::string data = Take(size);
    buffer_.erase(0, 2);
    return data;
  }

  // Whether the server ends the connection (an orderly end or a reset) with no byte more.
  bool ReadsEnd() {
    if (!buffer_.empty()) return false;
    const ssize_t n = Fill();
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
  }

 private:
  ssize_t Fill() {
    char chunk[64 * 1024];
    const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
    if (n > 0) buffer_.append(chunk, static_cast<size_t>(n));
    return n;
  }
  bool FillTo(size_t size) {
    while (buffer_.size() < size) {
      if (Fill() <= 0) return false;
    }
    return true;
  }
  bool FillUntil(std::string_view text) {
    while (buffer_.find(text) == std::string::npos) {
      if (Fill() <= 0) return false;
    }
    return true;
  }
  std::string Take(size_t size) {
    std::string out = buffer_.substr(0, size);
    buffer_.erase(0, size);
    return out;
  }

  int fd_ = -1;
  std::string buffer_;
};

std::string Get(std::string_view target, std::string_view extra_headers = "") {
  return absl::StrCat("GET ", ToAbsl(target), " HTTP/1.1\r\nHost: 127.0.0.1\r\n",
                      ToAbsl(extra_headers), "\r\n");
}

// Answers at once: "<method> <target> <body size>", or the body itself for /echo-body.
void Echo(ProxyRequest request, std::shared_ptr<ResponseWriter> writer) {
  std::string body =
      request.head.path == "/echo-body"
          ? std::move(request.body)
          : absl::StrCat(request.head.method, " ", request.head.target, " ", request.body.size());
  const absl::Status started = writer->Start(200, {{"content-type", "text/plain"}},
                                             ResponseMode::kComplete, std::move(body));
  EXPECT_TRUE(started.ok()) << started;
}

// Keeps each request and its writer for the test to answer.
class Recorder {
 public:
  ProxyHandler Handler() {
    return [this](ProxyRequest request, std::shared_ptr<ResponseWriter> writer) {
      absl::MutexLock lock(&mu_);
      requests_.push_back(std::move(request));
      writers_.push_back(std::move(writer));
    };
  }
  // The writer of the n-th request (from 1), once it has come; null if it does not.
  std::shared_ptr<ResponseWriter> Writer(size_t n) {
    absl::MutexLock lock(&mu_);
    return Arrived(n) ? writers_[n - 1] : nullptr;
  }
  ProxyRequest Request(size_t n) {
    absl::MutexLock lock(&mu_);
    return Arrived(n) ? requests_[n - 1] : ProxyRequest();
  }
  size_t count() {
    absl::MutexLock lock(&mu_);
    return requests_.size();
  }

 private:
  bool Arrived(size_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const auto arrived = [this, n] {
      mu_.AssertReaderHeld();
      return requests_.size() >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&arrived), kPatience);
  }

  absl::Mutex mu_;
  std::vector<ProxyRequest> requests_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<ResponseWriter>> writers_ ABSL_GUARDED_BY(mu_);
};

std::unique_ptr<HttpProxyServer> StartOrDie(HttpProxyServerOptions options, ProxyHandler handler) {
  absl::StatusOr<std::unique_ptr<HttpProxyServer>> server =
      HttpProxyServer::Start(std::move(options), std::move(handler));
  if (!server.ok()) {
    ADD_FAILURE() << server.status();
    std::abort();
  }
  return std::move(*server);
}

TEST(HttpProxyServerTest, AnswersThreeRequestsOnOneKeepAliveConnection) {
  auto server = StartOrDie({}, [](ProxyRequest request, std::shared_ptr<ResponseWriter> writer) {
    EXPECT_EQ(request.client_address, "127.0.0.1");
    EXPECT_GT(request.client_port, 0);
    Echo(std::move(request), std::move(writer));
  });
  Client client(server->port());
  for (const char* path : {"/1", "/2?x=y", "/3"}) {
    client.Send(Get(path));
    const Reply reply = client.ReadReply();
    EXPECT_EQ(reply.status, 200);
    EXPECT_EQ(reply.body, absl::StrCat("GET ", path, " 0"));
    EXPECT_EQ(reply.headers.at("connection"), "keep-alive");
    EXPECT_THAT(reply.headers.at("x-request-id"), MatchesRegex("[0-9a-f]{32}"));
    EXPECT_TRUE(reply.headers.contains("date"));
  }
  const HttpProxyServerStats stats = server->stats();
  EXPECT_EQ(stats.connections_accepted, 1);
  EXPECT_EQ(stats.connections_open, 1);
  EXPECT_EQ(stats.requests, 3);
  EXPECT_EQ(stats.responses_completed, 3);
  EXPECT_EQ(stats.responses_by_status.at(200), 3);
}

TEST(HttpProxyServerTest, HonoursAndEchoesTheRequestId) {
  Recorder recorder;
  auto server = StartOrDie({}, recorder.Handler());
  Client client(server->port());
  client.Send(Get("/", "X-Request-ID: my-id-1\r\n"));
  std::shared_ptr<ResponseWriter> writer = recorder.Writer(1);
  ASSERT_NE(writer, nullptr);
  EXPECT_EQ(writer->request_id(), "my-id-1");
  EXPECT_EQ(recorder.Request(1).request_id, "my-id-1");
  ASSERT_TRUE(writer->Start(201, {}, ResponseMode::kComplete, "made").ok());
  const Reply reply = client.ReadReply();
  EXPECT_EQ(reply.status, 201);
  EXPECT_EQ(reply.body, "made");
  EXPECT_EQ(reply.headers.at("x-request-id"), "my-id-1");
}

TEST(HttpProxyServerTest, AnswersPipelinedRequestsInOrderOneAtATime) {
  Recorder recorder;
  auto server = StartOrDie({}, recorder.Handler());
  Client client(server->port());
  const std::string requests = Get("/first") + Get("/second") + Get("/third");
  client.Send(requests);
  ASSERT_NE(recorder.Writer(1), nullptr);
  // Every byte is read by now, and still only the first request is with the handler.
  ASSERT_TRUE(server->AwaitStats(
      [&](const HttpProxyServerStats& stats) {
        return stats.bytes_received == static_cast<int64_t>(requests.size());
      },
      kPatience));
  EXPECT_EQ(recorder.count(), 1u);
  ASSERT_TRUE(recorder.Writer(1)->Start(200, {}, ResponseMode::kComplete, "one").ok());
  for (size_t n = 2; n <= 3; ++n) {
    std::shared_ptr<ResponseWriter> writer = recorder.Writer(n);
    ASSERT_NE(writer, nullptr);
    ASSERT_TRUE(writer->Start(200, {}, ResponseMode::kComplete, absl::StrCat("n", n)).ok());
  }
  EXPECT_EQ(recorder.Request(2).head.path, "/second");
  EXPECT_EQ(recorder.Request(3).head.path, "/third");
  EXPECT_EQ(client.ReadReply().body, "one");
  EXPECT_EQ(client.ReadReply().body, "n2");
  EXPECT_EQ(client.ReadReply().body, "n3");
}

std::string Pattern(size_t size) {
  std::string text(size, '\0');
  for (size_t i = 0; i < size; ++i) text[i] = static_cast<char>('a' + (i * 7 + i / 4096) % 26);
  return text;
}

TEST(HttpProxyServerTest, Takes16MiBBodiesByContentLengthAndChunked) {
  auto server = StartOrDie({}, Echo);
  const std::string body = Pattern(16 * 1024 * 1024);
  Client client(server->port());
  client.Send(absl::StrCat("POST /echo-body HTTP/1.1\r\nHost: a\r\nContent-Length: ", body.size(),
                           "\r\n\r\n"));
  client.Send(body);
  Reply reply = client.ReadReply();
  EXPECT_EQ(reply.status, 200);
  EXPECT_TRUE(reply.complete);
  EXPECT_TRUE(reply.body == body) << "the echoed body differs (" << reply.body.size() << " bytes)";

  std::string chunked = "POST /echo-body HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
  constexpr size_t kChunk = 100 * 1000;
  for (size_t at = 0; at < body.size(); at += kChunk) {
    const std::string_view piece = std::string_view(body).substr(at, kChunk);
    absl::StrAppend(&chunked, absl::Hex(piece.size()), ";n=", at, "\r\n", ToAbsl(piece), "\r\n");
  }
  chunked += "0\r\nx-trailer: 1\r\n\r\n";
  client.Send(chunked);
  reply = client.ReadReply();
  EXPECT_EQ(reply.status, 200);
  EXPECT_TRUE(reply.complete);
  EXPECT_TRUE(reply.body == body) << "the echoed body differs (" << reply.body.size() << " bytes)";
}

TEST(HttpProxyServerTest, StreamsServerSentEventsBeforeFinish) {
  Recorder recorder;
  auto server = StartOrDie({}, recorder.Handler());
  Client client(server->port());
  client.Send(Get("/events", "Accept: text/event-stream\r\n"));
  std::shared_ptr<ResponseWriter> writer = recorder.Writer(1);
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer
                  ->Start(200, {{"content-type", "text/event-stream"}, {"content-length", "9"}},
                          ResponseMode::kStreaming, "data: 0\n\n")
                  .ok());
  const Reply head = client.ReadReply(/*head_only=*/true);
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.headers.at("transfer-encoding"), "chunked");
  EXPECT_FALSE(head.headers.contains("content-length")) << "framing is the server's";
  EXPECT_EQ(client.ReadChunk(), "data: 0\n\n");
  for (int i = 1; i <= 3; ++i) {
    const std::string event = absl::StrCat("data: ", i, "\n\n");
    ASSERT_TRUE(writer->Write(event).ok());
    EXPECT_EQ(client.ReadChunk(), event) << "each event arrives before the next is written";
  }
  EXPECT_TRUE(writer->Write("").ok());
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_EQ(client.ReadChunk(), "");
  EXPECT_EQ(writer->Write("late").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(writer->Finish().code(), absl::StatusCode::kFailedPrecondition);
  // The connection is still open for the next request.
  client.Send(Get("/after"));
  writer = recorder.Writer(2);
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->Start(200, {}, ResponseMode::kComplete, "ok").ok());
  EXPECT_EQ(client.ReadReply().body, "ok");
}

TEST(HttpProxyServerTest, WriterCallsOutOfOrderAreRefused) {
  Recorder recorder;
  auto server = StartOrDie({}, recorder.Handler());
  Client client(server->port());
  client.Send(Get("/"));
  std::shared_ptr<ResponseWriter> writer = recorder.Writer(1);
  ASSERT_NE(writer, nullptr);
  EXPECT_FALSE(writer->started());
  EXPECT_EQ(writer->Write("x").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(writer->Finish().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(writer->Start(99, {}, ResponseMode::kComplete).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(writer->Start(200, {{"x", "a\r\nb"}}, ResponseMode::kComplete).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(writer->started()) << "a refused Start changes nothing";
  ASSERT_TRUE(writer->Start(200, {}, ResponseMode::kComplete, "whole").ok());
  EXPECT_TRUE(writer->started());
  EXPECT_EQ(writer->Start(200, {}, ResponseMode::kComplete).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(writer->Write("more").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(client.ReadReply().body, "whole");
}

TEST(HttpProxyServerTest, ASlowReaderMakesWritesBufferUntilItReads) {
  absl::Notification writable;  // outlives the server, which may run its callback
  Recorder recorder;
  HttpProxyServerOptions options;
  options.max_buffered_bytes = 64 * 1024;
  auto server = StartOrDie(options, recorder.Handler());
  Client client(server->port());
  client.Send(Get("/big"));
  std::shared_ptr<ResponseWriter> writer = recorder.Writer(1);
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->Start(200, {}, ResponseMode::kStreaming).ok());
  EXPECT_FALSE(writer->WouldBuffer());
  // More than the kernel's socket buffers hold, while the client reads nothing.
  const std::string big = Pattern(32 * 1024 * 1024);
  ASSERT_TRUE(writer->Write(big).ok()) << "Write never refuses bytes for a slow reader";
  EXPECT_TRUE(writer->WouldBuffer());
  writer->OnWritable([&writable] { writable.Notify(); });
  EXPECT_FALSE(writable.HasBeenNotified());
  const Reply head = client.ReadReply(/*head_only=*/true);
  EXPECT_EQ(head.status, 200);
  const std::optional<std::string> chunk = client.ReadChunk();
  EXPECT_TRUE(chunk == big) << "nothing is dropped";
  EXPECT_TRUE(writable.WaitForNotificationWithTimeout(kPatience));
  EXPECT_FALSE(writer->WouldBuffer());
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_EQ(client.ReadChunk(), "");
}

TEST(HttpProxyServerTest, AClientLeavingMidStreamRunsOnClientGoneAndTheServerGoesOn) {
  absl::Notification gone;
  auto server =
      StartOrDie({}, [&gone](ProxyRequest request, std::shared_ptr<ResponseWriter> writer) {
        if (request.head.path != "/stream") return Echo(std::move(request), std::move(writer));
        writer->OnClientGone([&gone] { gone.Notify(); });
        EXPECT_TRUE(writer->Start(200, {}, ResponseMode::kStreaming, "data: 1\n\n").ok());
      });
  {
    Client client(server->port());
    client.Send(Get("/stream"));
    EXPECT_EQ(client.ReadReply(/*head_only=*/true).status, 200);
    EXPECT_EQ(client.ReadChunk(), "data: 1\n\n");
  }  // closes the connection mid-stream
  EXPECT_TRUE(gone.WaitForNotificationWithTimeout(kPatience));
  Client next(server->port());
  next.Send(Get("/next"));
  EXPECT_EQ(next.ReadReply().body, "GET /next 0");
}

TEST(HttpProxyServerTest, AnswersAMalformedRequestLineWith400AndCloses) {
  auto server = StartOrDie({}, Echo);
  Client client(server->port());
  client.Send("GARBAGE\r\n\r\n");
  const Reply reply = client.ReadReply();
  EXPECT_EQ(reply.status, 400);
  EXPECT_THAT(reply.body, HasSubstr("request line"));
  EXPECT_EQ(reply.headers.at("connection"), "close");
  EXPECT_TRUE(client.ReadsEnd());
  EXPECT_EQ(server->stats().requests, 0);
  EXPECT_EQ(server->stats().responses_by_status.at(400), 1);
}

TEST(HttpProxyServerTest, AnswersAHeaderFloodWith431) {
  auto server = StartOrDie({}, Echo);
  Client client(server->port());
  std::string flood = "GET / HTTP/1.1\r\nHost: a\r\n";
  for (int i = 0; i < 150; ++i) absl::StrAppend(&flood, "X-Flood-", i, ": v\r\n");
  client.Send(flood + "\r\n");
  const Reply reply = client.ReadReply();
  EXPECT_EQ(reply.status, 431);
  EXPECT_EQ(reply.body, "the request has more than 100 headers");
  EXPECT_TRUE(client.ReadsEnd());
}

TEST(HttpProxyServerTest, AnswersATooLargeBodyWith413BeforeReadingIt) {
  HttpProxyServerOptions options;
  options.max_body_bytes = 1024 * 1024;
  auto server = StartOrDie(options, Echo);
  Client client(server->port());
  client.Send("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2097152\r\n\r\nsome of it");
  const Reply reply = client.ReadReply();
  EXPECT_EQ(reply.status, 413);
  EXPECT_EQ(reply.body, "the request body of 2097152 bytes exceeds the limit of 1048576 bytes");
  EXPECT_TRUE(client.ReadsEnd());
  EXPECT_EQ(server->stats().requests, 0);
}

TEST(HttpProxyServerTest, Sends100ContinueBeforeTheBody) {
  auto server = StartOrDie({}, Echo);
  Client client(server->port());
  client.Send("PUT /up HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
  EXPECT_EQ(client.ReadReply().status, 100);
  client.Send("hello");
  const Reply reply = client.ReadReply();
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, "PUT /up 5");
}

TEST(HttpProxyServerTest, ClosesAfterAnHttp10RequestWithoutKeepAlive) {
  auto server = StartOrDie({}, Echo);
  Client client(server->port());
  client.Send("GET /old HTTP/1.0\r\n\r\n");
  const Reply reply = client.ReadReply();
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, "GET /old 0");
  EXPECT_EQ(reply.headers.at("connection"), "close");
  EXPECT_TRUE(client.ReadsEnd());

  Client keep(server->port());
  for (int i = 0; i < 2; ++i) {
    keep.Send("GET /kept HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    const Reply kept = keep.ReadReply();
    EXPECT_EQ(kept.body, "GET /kept 0");
    EXPECT_EQ(kept.headers.at("connection"), "keep-alive");
  }
}

TEST(HttpProxyServerTest, ClosesWhenAnHttp11RequestAsksToClose) {
  auto server = StartOrDie({}, Echo);
  Client client(server->port());
  client.Send(Get("/bye", "Connection: close\r\n"));
  const Reply reply = client.ReadReply();
  EXPECT_EQ(reply.body, "GET /bye 0");
  EXPECT_EQ(reply.headers.at("connection"), "close");
  EXPECT_TRUE(client.ReadsEnd());
}

TEST(HttpProxyServerTest, StreamsToHttp10AsRawBytesEndedByClosing) {
  auto server = StartOrDie({}, [](ProxyRequest, std::shared_ptr<ResponseWriter> writer) {
    EXPECT_TRUE(writer->Start(200, {}, ResponseMode::kStreaming, "abc").ok());
    EXPECT_TRUE(writer->Write("def").ok());
    EXPECT_TRUE(writer->Finish().ok());
  });
  Client client(server->port());
  client.Send("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  const Reply reply = client.ReadReply();
  EXPECT_EQ(reply.status, 200);
  EXPECT_FALSE(reply.headers.contains("transfer-encoding"));
  EXPECT_EQ(reply.headers.at("connection"), "close");
  EXPECT_EQ(reply.body, "abcdef");
}

TEST(HttpProxyServerTest, AnswersHeadWithoutABody) {
  auto server = StartOrDie({}, Echo);
  Client client(server->port());
  client.Send("HEAD /h HTTP/1.1\r\nHost: a\r\n\r\n");
  const Reply head = client.ReadReply(/*head_only=*/true);
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.headers.at("content-length"), "9");  // the handler's body: "HEAD /h 0"
  // Were a body sent, it would be read as the next response's head.
  client.Send(Get("/g"));
  const Reply get = client.ReadReply();
  EXPECT_EQ(get.status, 200);
  EXPECT_EQ(get.body, "GET /g 0");
}

TEST(HttpProxyServerTest, AnswersFailBeforeAnyByteWith500) {
  auto server = StartOrDie({}, [](ProxyRequest, std::shared_ptr<ResponseWriter> writer) {
    writer->Fail();
    EXPECT_EQ(writer->Start(200, {}, ResponseMode::kComplete).code(),
              absl::StatusCode::kFailedPrecondition);
  });
  Client client(server->port());
  client.Send(Get("/"));
  const Reply reply = client.ReadReply();
  EXPECT_EQ(reply.status, 500);
  EXPECT_EQ(reply.body, "Internal Server Error");
}

TEST(HttpProxyServerTest, ResetsTheConnectionOnFailAfterBytesWent) {
  Recorder recorder;
  auto server = StartOrDie({}, recorder.Handler());
  Client client(server->port());
  client.Send(Get("/"));
  std::shared_ptr<ResponseWriter> writer = recorder.Writer(1);
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->Start(200, {}, ResponseMode::kStreaming, "part").ok());
  EXPECT_EQ(client.ReadReply(/*head_only=*/true).status, 200);
  EXPECT_EQ(client.ReadChunk(), "part");
  writer->Fail();
  EXPECT_FALSE(client.ReadChunk().has_value()) << "no last chunk: the response is broken";
}

TEST(HttpProxyServerTest, RefusesConnectionsPastMaxConnectionsWith503) {
  HttpProxyServerOptions options;
  options.max_connections = 1;
  auto server = StartOrDie(options, Echo);
  Client first(server->port());
  first.Send(Get("/a"));
  EXPECT_EQ(first.ReadReply().status, 200);
  Client second(server->port());
  const Reply refused = second.ReadReply();
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.body, "the server has 1 connections open");
  EXPECT_TRUE(second.ReadsEnd());
  first.Send(Get("/b"));
  EXPECT_EQ(first.ReadReply().body, "GET /b 0");
  EXPECT_EQ(server->stats().connections_refused, 1);
}

TEST(HttpProxyServerTest, AnswersAHeadTrickledPastHeadReadTimeoutWith408) {
  FakeClock clock;
  HttpProxyServerOptions options;
  options.clock = &clock;
  options.head_read_timeout = absl::Seconds(5);
  auto server = StartOrDie(options, Echo);
  Client client(server->port());
  int64_t sent = 0;
  // Each piece comes 2 s after the one before: the head is not whole 6 s after its first byte.
  for (std::string_view piece : {"GET / HT", "TP/1.1\r\nHo", "st: a\r\n"}) {
    client.Send(piece);
    sent += static_cast<int64_t>(piece.size());
    ASSERT_TRUE(server->AwaitStats(
        [sent](const HttpProxyServerStats& stats) { return stats.bytes_received >= sent; },
        kPatience));
    clock.Advance(absl::Seconds(2));
    server->Wake();
  }
  const Reply reply = client.ReadReply();
  EXPECT_EQ(reply.status, 408);
  EXPECT_EQ(reply.body, "the request head did not arrive within 5s");
  EXPECT_TRUE(client.ReadsEnd());
  EXPECT_EQ(server->stats().requests, 0);
}

TEST(HttpProxyServerTest, ClosesAnIdleKeepAliveConnectionAfterItsTimeout) {
  FakeClock clock;
  HttpProxyServerOptions options;
  options.clock = &clock;
  auto server = StartOrDie(options, Echo);
  Client client(server->port());
  client.Send(Get("/"));
  EXPECT_EQ(client.ReadReply().status, 200);
  ASSERT_TRUE(server->AwaitStats(
      [](const HttpProxyServerStats& stats) { return stats.responses_completed == 1; }, kPatience));
  clock.Advance(absl::Seconds(89));
  server->Wake();
  client.Send(Get("/still-open"));  // within the 90 s
  EXPECT_EQ(client.ReadReply().status, 200);
  ASSERT_TRUE(server->AwaitStats(
      [](const HttpProxyServerStats& stats) { return stats.responses_completed == 2; }, kPatience));
  clock.Advance(absl::Seconds(91));
  server->Wake();
  EXPECT_TRUE(client.ReadsEnd());
  EXPECT_TRUE(server->AwaitStats(
      [](const HttpProxyServerStats& stats) { return stats.connections_open == 0; }, kPatience));
}

TEST(HttpProxyServerTest, AnswersTheRequestTimeoutWith408AndCancelsTheRequest) {
  absl::Notification cancelled;
  FakeClock clock;
  Recorder recorder;
  HttpProxyServerOptions options;
  options.clock = &clock;
  options.request_timeout = absl::Seconds(2);
  auto server = StartOrDie(options, recorder.Handler());
  Client client(server->port());
  client.Send(Get("/slow", "X-Request-ID: req-7\r\n"));
  std::shared_ptr<ResponseWriter> writer = recorder.Writer(1);
  ASSERT_NE(writer, nullptr);
  writer->OnClientGone([&cancelled] { cancelled.Notify(); });
  clock.Advance(absl::Seconds(3));
  server->Wake();
  const Reply reply = client.ReadReply();
  EXPECT_EQ(reply.status, 408);
  EXPECT_EQ(reply.body, "Request req-7 timed out after 2.0s.");  // Python's float
  EXPECT_TRUE(cancelled.WaitForNotificationWithTimeout(kPatience));
  EXPECT_EQ(writer->Start(200, {}, ResponseMode::kComplete).code(), absl::StatusCode::kCancelled);
  bool ran_at_once = false;
  writer->OnClientGone([&ran_at_once] { ran_at_once = true; });
  EXPECT_TRUE(ran_at_once) << "a callback registered after the client is gone runs at once";
  EXPECT_TRUE(client.ReadsEnd());
}

TEST(HttpProxyServerTest, ClosesOnTheRequestTimeoutOnceBytesWent) {
  absl::Notification cancelled;
  FakeClock clock;
  Recorder recorder;
  HttpProxyServerOptions options;
  options.clock = &clock;
  options.request_timeout = absl::Seconds(2);
  auto server = StartOrDie(options, recorder.Handler());
  Client client(server->port());
  client.Send(Get("/stream"));
  std::shared_ptr<ResponseWriter> writer = recorder.Writer(1);
  ASSERT_NE(writer, nullptr);
  writer->OnClientGone([&cancelled] { cancelled.Notify(); });
  ASSERT_TRUE(writer->Start(200, {}, ResponseMode::kStreaming, "first").ok());
  EXPECT_EQ(client.ReadReply(/*head_only=*/true).status, 200);
  EXPECT_EQ(client.ReadChunk(), "first");
  clock.Advance(absl::Seconds(3));
  server->Wake();
  EXPECT_TRUE(cancelled.WaitForNotificationWithTimeout(kPatience));
  EXPECT_FALSE(client.ReadChunk().has_value()) << "closed without a last chunk";
}

TEST(HttpProxyServerTest, StopEndsRequestsInFlight) {
  bool cancelled = false;
  Recorder recorder;
  auto server = StartOrDie({}, recorder.Handler());
  Client client(server->port());
  client.Send(Get("/"));
  std::shared_ptr<ResponseWriter> writer = recorder.Writer(1);
  ASSERT_NE(writer, nullptr);
  writer->OnClientGone([&cancelled] { cancelled = true; });
  server->Stop();
  EXPECT_TRUE(cancelled) << "Stop runs the callbacks before it returns";
  EXPECT_EQ(writer->Start(200, {}, ResponseMode::kComplete).code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(client.ReadsEnd());
  server->Stop();  // idempotent
}

TEST(HttpProxyServerTest, RefusesBadOptions) {
  HttpProxyServerOptions options;
  options.max_head_bytes = 10;
  EXPECT_EQ(HttpProxyServer::Start(options, Echo).status().message(),
            "max_head_bytes 10 is not 1 KiB..1 MiB");
  options = {};
  options.request_timeout = absl::ZeroDuration();
  EXPECT_EQ(HttpProxyServer::Start(options, Echo).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HttpProxyServer::Start({}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  options = {};
  options.host = "192.0.2.1";  // TEST-NET-1: no address of this host
  EXPECT_EQ(HttpProxyServer::Start(options, Echo).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tessera::serve

// ServeProxy over real loopback sockets, with an in-memory replica runtime (whose streams the
// tests answer with the replica's frame protocol) and replica set source: the own routes
// (/-/healthz, /-/routes), longest-prefix routing and 404, the request frame, whole and streamed
// responses, a rejection routed again, a failed stream, backpressure (503), a client leaving
// mid-stream (its stream cancelled), a slow client (items wait), the metrics, the replica of the
// proxy's own node preferred, and a drain (/-/healthz 503, requests still served and counted).
#include "serve_runtime/serve_proxy.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "metrics/metric_registry.h"
#include "serve_runtime/python_call_codec.h"
#include "serve_runtime/replica_test_fakes.h"

namespace tessera::serve {
namespace {

using fakes::FakeReplicaRuntime;
using fakes::FakeReplicaSetSource;
using fakes::kPatience;
using fakes::MakeReplica;
using fakes::MakeSet;
using fakes::WaitUntil;
using ::testing::HasSubstr;

struct Reply {
  int status = 0;  // 0: no response head came
  std::map<std::string, std::string> headers;
  std::string body;  // de-chunked
};

// One client connection, blocking, with the test's patience as its socket timeouts.
class Connection {
 public:
  explicit Connection(int port, int receive_buffer = 0) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (receive_buffer > 0) {
      setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
    }
    const timeval patience{static_cast<time_t>(absl::ToInt64Seconds(kPatience)), 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof(patience));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
      ADD_FAILURE() << "cannot connect to port " << port;
    }
  }
  ~Connection() { Close(); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void Send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
  }
  // Reads until `text` has arrived (true) or the connection ends (false).
  bool ReadUntil(std::string_view text) {
    while (received_.find(text) == std::string::npos) {
      if (!ReadSome()) return false;
    }
    return true;
  }
  // Everything until the server closes the connection, parsed.
  Reply ReadAll() {
    while (ReadSome()) {
    }
    return Parse(received_);
  }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  bool ReadSome() {
    char buffer[64 * 1024];
    const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
    if (n <= 0) return false;
    received_.append(buffer, static_cast<size_t>(n));
    return true;
  }

  static std::string Dechunk(std::string_view body) {
    std::string out;
    while (true) {
      const size_t line_end = body.find("\r\n");
      size_t size = 0;
      if (line_end == std::string_view::npos ||
          !absl::SimpleHexAtoi(std::string(body.substr(0, line_end)), &size) || size == 0) {
        return out;
      }
      out.append(body.substr(line_end + 2, size));
      body.remove_prefix(std::min(body.size(), line_end + 2 + size + 2));
    }
  }

  static Reply Parse(const std::string& bytes) {
    Reply reply;
    const size_t head_end = bytes.find("\r\n\r\n");
    if (head_end == std::string::npos || bytes.size() < 12) return reply;
    if (!absl::SimpleAtoi(bytes.substr(9, 3), &reply.status)) return reply;
    size_t at = bytes.find("\r\n") + 2;
    while (at < head_end) {
      const size_t end = bytes.find("\r\n", at);
      const std::string line = bytes.substr(at, end - at);
      const size_t colon = line.find(':');
      reply.headers[absl::AsciiStrToLower(line.substr(0, colon))] =
          std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
      at = end + 2;
    }
    const std::string body = bytes.substr(head_end + 4);
    auto coding = reply.headers.find("transfer-encoding");
    reply.body =
        coding != reply.headers.end() && coding->second == "chunked" ? Dechunk(body) : body;
    return reply;
  }

  int fd_ = -1;
  std::string received_;
};

std::string Request(const std::string& method, const std::string& target,
                    const std::string& headers = "", const std::string& body = "") {
  return absl::StrCat(
      method, " ", target, " HTTP/1.1\r\nHost: proxy\r\nConnection: close\r\n", headers,
      body.empty() ? "" : absl::StrCat("Content-Length: ", body.size(), "\r\n"), "\r\n", body);
}

// The first item of a response, as the replica's _http.response_first makes it.
std::string First(int status, std::vector<std::vector<std::string>> headers, bool more,
                  std::string body) {
  const nlohmann::json head = {{"status", status}, {"headers", headers}, {"more", more}};
  return EncodeFrame(head.dump(), body);
}

RouteEntry Route(std::string prefix, std::string application) {
  return RouteEntry{.route_prefix = std::move(prefix),
                    .application = std::move(application),
                    .ingress_deployment = "d",
                    .takes_http = true};
}

// The value of series `labels` of family `name` (nullopt when it has none).
std::optional<double> MetricValue(const metrics::MetricRegistry& registry, const std::string& name,
                                  const std::vector<std::string>& labels) {
  for (const metrics::FamilySnapshot& family : registry.Collect()) {
    if (family.name != name) continue;
    for (const metrics::SeriesSnapshot& series : family.series) {
      if (series.label_values != labels) continue;
      return family.type == metrics::MetricType::kHistogram
                 ? static_cast<double>(series.cumulative_counts.back())
                 : series.value;
    }
  }
  return std::nullopt;
}

class ServeProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpProxyServerOptions http;
    http.clock = &clock_;
    http.max_buffered_bytes = 64 * 1024;  // the least: a slow client is soon one
    auto started = ServeProxy::Start({.http = http,
                                      .node_id = "n1",
                                      .node_ip_address = "10.0.0.1",
                                      .runtime = &runtime_,
                                      .replica_sets = &source_,
                                      .metrics = &registry_,
                                      .seed = 3});
    ASSERT_TRUE(started.ok()) << started.status();
    proxy_ = *std::move(started);
  }
  void TearDown() override {
    source_.Close();  // every long poll returns
    proxy_->Stop();
  }

  void Routes(std::vector<RouteEntry> routes) {
    const uint64_t version = source_.PublishRoutes(std::move(routes));
    ASSERT_TRUE(WaitUntil([&] { return proxy_->route_table_version() == version; }));
  }

  Reply Fetch(const std::string& request) {
    Connection connection(proxy_->port());
    connection.Send(request);
    return connection.ReadAll();
  }

  // Each stream is answered 200 with the replica's id as its body.
  void AnswerWithReplicaId() {
    runtime_.SetResponder([this](size_t index, const FakeReplicaRuntime::StreamRecord& stream) {
      runtime_.Item(index, First(200, {}, false, stream.replica_id));
      runtime_.End(index, absl::OkStatus());
    });
  }

  FakeClock clock_;
  metrics::MetricRegistry registry_;
  FakeReplicaRuntime runtime_;
  FakeReplicaSetSource source_;
  std::unique_ptr<ServeProxy> proxy_;
};

TEST_F(ServeProxyTest, HealthzIs503UntilTheFirstRouteTable) {
  Reply before = Fetch(Request("GET", "/-/healthz"));
  EXPECT_EQ(before.status, 503);
  EXPECT_EQ(before.body, "Route table is not populated yet.");
  Routes({Route("/a", "app")});
  Reply after = Fetch(Request("GET", "/-/healthz"));
  EXPECT_EQ(after.status, 200);
  EXPECT_EQ(after.body, "success");
}

TEST_F(ServeProxyTest, RoutesListsPrefixesAndTheirApplications) {
  Routes({Route("/", "root"), Route("/a", "app")});
  Reply reply = Fetch(Request("GET", "/-/routes"));
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.headers["content-type"], "application/json");
  EXPECT_EQ(nlohmann::json::parse(reply.body),
            nlohmann::json::parse(R"({"/": "root", "/a": "app"})"));
}

TEST_F(ServeProxyTest, NoMatchingPrefixIs404) {
  Routes({Route("/a", "app")});
  Reply reply = Fetch(Request("GET", "/ab"));
  EXPECT_EQ(reply.status, 404);
  EXPECT_EQ(reply.body, "Path '/ab' not found. Ping http://.../-/routes for available routes.");
  EXPECT_EQ(
      MetricValue(registry_, "ray_serve_num_http_error_requests_total", {"", "404", "GET", ""}), 1);
  // No route, no deployment: nothing counted for one.
  EXPECT_FALSE(MetricValue(registry_, "ray_serve_num_deployment_http_error_requests_total",
                           {"", "404", "GET", "", ""})
                   .has_value());
}

TEST_F(ServeProxyTest, TheLongestMatchingPrefixWins) {
  Routes({Route("/", "root"), Route("/a", "app")});
  source_.Publish("root", "", MakeSet("d", {MakeReplica("root#d#1")}));
  source_.Publish("app", "", MakeSet("d", {MakeReplica("app#d#1")}));
  AnswerWithReplicaId();
  EXPECT_EQ(Fetch(Request("GET", "/a")).body, "app#d#1");
  EXPECT_EQ(Fetch(Request("GET", "/a/b")).body, "app#d#1");
  EXPECT_EQ(Fetch(Request("GET", "/ab")).body, "root#d#1");
  EXPECT_EQ(Fetch(Request("GET", "/")).body, "root#d#1");
}

TEST_F(ServeProxyTest, ARequestGoesToTheReplicaOnTheProxysNode) {
  Routes({Route("/", "app")});
  source_.Publish("app", "",
                  MakeSet("d", {MakeReplica("app#d#far", 5, "n2"),
                                MakeReplica("app#d#near", 5, "n1")}));  // the proxy is n1's
  AnswerWithReplicaId();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(Fetch(Request("GET", "/")).body, "app#d#near");
}

TEST_F(ServeProxyTest, ADrainingProxyFailsHealthzButServesAndCountsItsRequests) {
  Routes({Route("/", "app")});
  source_.Publish("app", "", MakeSet("d", {MakeReplica("app#d#1")}));
  proxy_->SetDraining(true);
  Reply health = Fetch(Request("GET", "/-/healthz"));
  EXPECT_EQ(health.status, 503);
  EXPECT_EQ(health.body, "This node is being drained.");

  Connection client(proxy_->port());
  client.Send(Request("GET", "/"));
  ASSERT_TRUE(WaitUntil([&] { return runtime_.stream_count() == 1; }));
  ASSERT_TRUE(WaitUntil([&] { return proxy_->ongoing_requests() == 1; }));
  runtime_.Item(0, First(200, {}, false, "served"));
  runtime_.End(0, absl::OkStatus());
  EXPECT_EQ(client.ReadAll().body, "served");
  ASSERT_TRUE(WaitUntil([&] { return proxy_->ongoing_requests() == 0; }));

  proxy_->SetDraining(false);
  EXPECT_EQ(Fetch(Request("GET", "/-/healthz")).status, 200);
}

TEST_F(ServeProxyTest, TheRequestTravelsAsTheReplicasFrame) {
  Routes({Route("/a", "app")});
  source_.Publish("app", "", MakeSet("d", {MakeReplica("app#d#1")}));
  runtime_.SetResponder([this](size_t index, const FakeReplicaRuntime::StreamRecord&) {
    runtime_.Item(index, First(201, {{"x-answer", "42"}}, false, "made"));
    runtime_.End(index, absl::OkStatus());
  });
  Reply reply =
      Fetch(Request("POST", "/a/b%20c?x=1&y=%32",
                    "X-Request-ID: rid-7\r\nserve_multiplexed_model_id: m1\r\n", "the body"));
  EXPECT_EQ(reply.status, 201);
  EXPECT_EQ(reply.headers["x-answer"], "42");
  EXPECT_EQ(reply.headers["x-request-id"], "rid-7");
  EXPECT_EQ(reply.body, "made");

  const FakeReplicaRuntime::StreamRecord stream = runtime_.stream(0);
  EXPECT_EQ(stream.replica_id, "app#d#1");
  EXPECT_EQ(stream.method, "handle_http");
  absl::StatusOr<FrameParts> frame = SplitFrame(stream.argument);
  ASSERT_TRUE(frame.ok()) << frame.status();
  EXPECT_EQ(frame->body, "the body");
  const nlohmann::json head = nlohmann::json::parse(frame->head);
  EXPECT_EQ(head["method"], "POST");
  EXPECT_EQ(head["path"], "/a/b c");
  EXPECT_EQ(head["raw_path"], "/a/b%20c");
  EXPECT_EQ(head["query_string"], "x=1&y=%32");
  EXPECT_EQ(head["http_version"], "1.1");
  EXPECT_EQ(head["route_prefix"], "/a");
  EXPECT_EQ(head["request_id"], "rid-7");
  EXPECT_EQ(head["multiplexed_model_id"], "m1");
  EXPECT_EQ(head["client"][0], "127.0.0.1");
  EXPECT_TRUE(head["client"][1].is_number_integer());
  EXPECT_THAT(head["headers"].dump(), HasSubstr(R"(["x-request-id","rid-7"])"));

  EXPECT_EQ(
      MetricValue(registry_, "ray_serve_num_http_requests_total", {"/a", "POST", "app", "201"}), 1);
  EXPECT_EQ(
      MetricValue(registry_, "ray_serve_http_request_latency_ms", {"POST", "/a", "app", "201"}), 1);
  // The request ends (the gauge goes down) when its stream does, just after the response.
  EXPECT_TRUE(WaitUntil([&] {
    return MetricValue(registry_, "ray_serve_num_ongoing_http_requests", {"n1", "10.0.0.1"}) == 0;
  }));
}

TEST_F(ServeProxyTest, AStreamedResponseIsChunkedAsItsItemsCome) {
  Routes({Route("/", "app")});
  source_.Publish("app", "", MakeSet("d", {MakeReplica("app#d#1")}));
  runtime_.SetResponder([this](size_t index, const FakeReplicaRuntime::StreamRecord&) {
    runtime_.Item(index, First(200, {{"content-type", "text/event-stream"}}, true, "data: 1\n\n"));
    runtime_.Item(index, "data: 2\n\n");
    runtime_.End(index, absl::OkStatus());
  });
  Reply reply = Fetch(Request("GET", "/events"));
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.headers["transfer-encoding"], "chunked");
  EXPECT_EQ(reply.headers["content-type"], "text/event-stream");
  EXPECT_EQ(reply.body, "data: 1\n\ndata: 2\n\n");
}

TEST_F(ServeProxyTest, ARejectionIsRoutedAgainAndNeverSeen) {
  Routes({Route("/", "app")});
  source_.Publish("app", "", MakeSet("d", {MakeReplica("app#d#1")}));
  runtime_.SetResponder([this](size_t index, const FakeReplicaRuntime::StreamRecord&) {
    if (index == 0) {
      runtime_.Item(index, First(503, {{"x-tessera-serve-rejected", "1"}}, false, ""));
    } else {
      runtime_.Item(index, First(200, {}, false, "second try"));
    }
    runtime_.End(index, absl::OkStatus());
  });
  Reply reply = Fetch(Request("GET", "/"));
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, "second try");
  EXPECT_EQ(runtime_.stream_count(), 2u);
}

TEST_F(ServeProxyTest, AStreamThatFailsBeforeItsHeadIs500) {
  Routes({Route("/", "app")});
  source_.Publish("app", "", MakeSet("d", {MakeReplica("app#d#1")}));
  runtime_.SetResponder([this](size_t index, const FakeReplicaRuntime::StreamRecord&) {
    runtime_.End(index, absl::InternalError("replica app#d#1 handle_http: ValueError: bad"));
  });
  Reply reply = Fetch(Request("GET", "/"));
  EXPECT_EQ(reply.status, 500);
  EXPECT_EQ(reply.body, "Internal Server Error");
  EXPECT_EQ(runtime_.stream_count(), 1u);
}

TEST_F(ServeProxyTest, AReplicaFoundDeadIsRoutedAroundAndTheRequestSentAgain) {
  Routes({Route("/", "app")});
  // app#d#1's shorter queue makes it the first choice; its actor is dead.
  runtime_.SetQueueLen("app#d#2", 3);
  source_.Publish("app", "", MakeSet("d", {MakeReplica("app#d#1"), MakeReplica("app#d#2")}));
  runtime_.SetResponder([this](size_t index, const FakeReplicaRuntime::StreamRecord& stream) {
    if (stream.replica_id == "app#d#1") {
      runtime_.End(index, absl::UnavailableError("replica app#d#1 handle_http: actor is dead"));
      return;
    }
    runtime_.Item(index, First(200, {}, false, stream.replica_id));
    runtime_.End(index, absl::OkStatus());
  });
  EXPECT_EQ(Fetch(Request("GET", "/")).body, "app#d#2");
  EXPECT_EQ(Fetch(Request("GET", "/")).body, "app#d#2");
  // The dead replica got the first request only; the replica set still names it.
  ASSERT_EQ(runtime_.stream_count(), 3u);
  EXPECT_EQ(runtime_.stream(0).replica_id, "app#d#1");
  EXPECT_EQ(runtime_.stream(1).replica_id, "app#d#2");
  EXPECT_EQ(runtime_.stream(2).replica_id, "app#d#2");
}

TEST_F(ServeProxyTest, PastMaxQueuedRequestsIs503WithRaysBackPressureText) {
  Routes({Route("/", "app")});
  source_.Publish("app", "", MakeSet("d", {}, /*max_queued_requests=*/1));
  Connection waiting(proxy_->port());
  waiting.Send(Request("GET", "/first"));
  ASSERT_TRUE(WaitUntil([&] { return proxy_->http_stats().requests == 1; }));
  // The router has the set (and its cap) once it reported the request waiting with no replica.
  ASSERT_TRUE(WaitUntil([&] { return !source_.reports().empty(); }));
  Reply refused = Fetch(Request("GET", "/second"));
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.body,
            "Request dropped due to backpressure (num_queued_requests=1, max_queued_requests=1).");
}

TEST_F(ServeProxyTest, AClientLeavingMidStreamCancelsItsStream) {
  Routes({Route("/", "app")});
  source_.Publish("app", "", MakeSet("d", {MakeReplica("app#d#1")}));
  runtime_.SetResponder([this](size_t index, const FakeReplicaRuntime::StreamRecord&) {
    runtime_.Item(index, First(200, {}, true, "data: 1\n\n"));
  });
  {
    Connection connection(proxy_->port());
    connection.Send(Request("GET", "/stream"));
    ASSERT_TRUE(connection.ReadUntil("data: 1\n\n"));
  }  // gone mid-stream
  ASSERT_TRUE(WaitUntil([&] { return runtime_.stream(0).cancelled; }));
  ASSERT_TRUE(WaitUntil([&] {
    return MetricValue(registry_, "ray_serve_num_http_error_requests_total",
                       {"/", "disconnection", "GET", "app"}) == 1;
  }));
  // Counted under the application's ingress deployment too.
  EXPECT_TRUE(WaitUntil([&] {
    return MetricValue(registry_, "ray_serve_num_deployment_http_error_requests_total",
                       {"d", "disconnection", "GET", "/", "app"}) == 1;
  }));
}

TEST_F(ServeProxyTest, ASlowClientHoldsBackTheNextItems) {
  Routes({Route("/", "app")});
  source_.Publish("app", "", MakeSet("d", {MakeReplica("app#d#1")}));
  // More than the kernel's socket buffers hold, in one item: the proxy must wait for the client.
  const std::string big(32 * 1024 * 1024, 'x');
  runtime_.SetResponder([&](size_t index, const FakeReplicaRuntime::StreamRecord&) {
    runtime_.Item(index, First(200, {}, true, ""));
    runtime_.Item(index, big);
    runtime_.Item(index, "tail");
    runtime_.End(index, absl::OkStatus());
  });
  Connection connection(proxy_->port(), /*receive_buffer=*/4096);
  connection.Send(Request("GET", "/big"));
  ASSERT_TRUE(WaitUntil(
      [&] { return runtime_.stream_count() == 1 && runtime_.stream(0).items_entered == 2; }));
  // The big item's delivery waits while the client reads nothing, so "tail" is not taken.
  EXPECT_EQ(runtime_.stream(0).items_returned, 1);
  Reply reply = connection.ReadAll();
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body.size(), big.size() + 4);
  EXPECT_EQ(runtime_.stream(0).items_returned, 3);
}

TEST(ServeProxyOptionsTest, RequiredPartsAreChecked) {
  FakeReplicaRuntime runtime;
  FakeReplicaSetSource source;
  EXPECT_EQ(ServeProxy::Start({.node_id = "n1", .runtime = &runtime}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ServeProxy::Start({.runtime = &runtime, .replica_sets = &source}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::serve

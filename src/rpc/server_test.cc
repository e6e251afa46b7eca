// A real gRPC server on loopback (port 0) with mutual TLS from the token: a client with the
// token served, every other client refused before a handler runs, unary and server-streaming
// alike.
#include "rpc/server.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "rpc/auth.h"
#include "rpc/channel.h"
#include "rpc/cluster_identity.h"
#include "rpc/retry.h"
#include "rpc/server_metrics.h"
#include "rpc/status_conversion.h"
#include "tessera/v1/node_agent.grpc.pb.h"

namespace tessera::rpc {
namespace {

constexpr char kToken[] = "0123456789abcdef";

// Counts handler runs so the tests can tell a rejected call never reached one.
class CountingAgent : public v1::NodeAgent::Service {
 public:
  grpc::Status KillWorker(grpc::ServerContext*, const v1::KillWorkerRequest* request,
                          v1::KillWorkerResponse*) override {
    ++calls;
    if (request->worker_id() == "bad") {
      return ToGrpcStatus(absl::InvalidArgumentError("worker_id: bad"));
    }
    return grpc::Status::OK;
  }
  grpc::Status WatchWorker(grpc::ServerContext*, const v1::WatchWorkerRequest*,
                           grpc::ServerWriter<v1::WorkerEvent>* writer) override {
    ++calls;
    for (int i = 0; i < 3; ++i) {
      v1::WorkerEvent event;
      event.set_stdout("line\n");
      writer->Write(event);
    }
    return grpc::Status::OK;
  }
  std::atomic<int> calls{0};
};

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.token = kToken;
    auto server = RpcServer::Start(options, {&service_});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    stub_ = StubFor(kToken);
  }

  // A client proving `token`.
  std::unique_ptr<v1::NodeAgent::Stub> StubFor(std::string_view token) {
    return v1::NodeAgent::NewStub(MakeChannel(server_->address(), token));
  }
  // A client with other credentials (plaintext, or TLS without a certificate).
  std::unique_ptr<v1::NodeAgent::Stub> StubWith(std::shared_ptr<grpc::ChannelCredentials> creds) {
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride(kClusterServerName);
    return v1::NodeAgent::NewStub(
        grpc::CreateCustomChannel(server_->address(), std::move(creds), args));
  }

  grpc::Status Kill(v1::NodeAgent::Stub& stub, std::string worker = "w1") {
    grpc::ClientContext context;
    ConfigureClientContext(&context, absl::Seconds(30));
    v1::KillWorkerRequest request;
    request.set_worker_id(worker);
    v1::KillWorkerResponse response;
    return stub.KillWorker(&context, request, &response);
  }

  grpc::Status Watch(v1::NodeAgent::Stub& stub, int* events) {
    grpc::ClientContext context;
    ConfigureClientContext(&context, absl::Seconds(30));
    v1::WatchWorkerRequest request;
    auto reader = stub.WatchWorker(&context, request);
    v1::WorkerEvent event;
    *events = 0;
    while (reader->Read(&event)) ++*events;
    return reader->Finish();
  }

  CountingAgent service_;
  std::unique_ptr<RpcServer> server_;
  std::unique_ptr<v1::NodeAgent::Stub> stub_;
};

TEST_F(ServerTest, BindsLoopbackOnAnEphemeralPort) {
  EXPECT_GT(server_->port(), 0);
  EXPECT_EQ(server_->address(), "127.0.0.1:" + std::to_string(server_->port()));
}

TEST_F(ServerTest, UnaryFromAClientWithTheTokenIsServed) {
  EXPECT_TRUE(Kill(*stub_).ok());
  EXPECT_EQ(service_.calls.load(), 1);
  // The handler's own status comes through with code and message.
  grpc::Status bad = Kill(*stub_, "bad");
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(bad.error_message(), "worker_id: bad");
}

TEST_F(ServerTest, ClientsWithoutTheTokenAreRefusedInTheHandshake) {
  // Another token, a shorter one, plaintext (what a client sending only a token header would
  // be), and TLS trusting the right authority but with no certificate of its own.
  auto other = StubFor("0123456789abcdeX");
  grpc::Status wrong = Kill(*other);
  EXPECT_TRUE(IsPeerAuthenticationFailure(wrong)) << wrong.error_message();
  EXPECT_EQ(FromGrpcStatus(wrong).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_FALSE(Kill(*StubFor("0123")).ok());
  EXPECT_FALSE(Kill(*StubWith(grpc::InsecureChannelCredentials())).ok());
  grpc::SslCredentialsOptions no_certificate;
  no_certificate.pem_root_certs = (*ClusterIdentity::ForToken(kToken))->authority_pem();
  EXPECT_FALSE(Kill(*StubWith(grpc::SslCredentials(no_certificate))).ok());
  EXPECT_EQ(service_.calls.load(), 0);
  // The server keeps serving good calls afterwards.
  EXPECT_TRUE(Kill(*stub_).ok());
}

TEST_F(ServerTest, StreamingIsCoveredToo) {
  int events = 0;
  grpc::Status ok = Watch(*stub_, &events);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(events, 3);
  EXPECT_EQ(service_.calls.load(), 1);

  grpc::Status plaintext = Watch(*StubWith(grpc::InsecureChannelCredentials()), &events);
  EXPECT_FALSE(plaintext.ok());
  EXPECT_EQ(events, 0);
  grpc::Status wrong = Watch(*StubFor("nope"), &events);
  EXPECT_TRUE(IsPeerAuthenticationFailure(wrong)) << wrong.error_message();
  EXPECT_EQ(events, 0);
  EXPECT_EQ(service_.calls.load(), 1);
}

TEST_F(ServerTest, RetryStopsAtAPeerThatFailsTheHandshake) {
  RetryOptions options;
  v1::KillWorkerRequest request;
  request.set_worker_id("w");
  v1::KillWorkerResponse response;
  absl::Status status =
      RetryUnary(options, &v1::NodeAgent::Stub::KillWorker, stub_.get(), request, &response);
  EXPECT_TRUE(status.ok()) << status;
  auto other = StubFor("wrong");
  RetryStats stats;
  status = RetryUnary(options, &v1::NodeAgent::Stub::KillWorker, other.get(), request, &response,
                      &stats);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated) << status;
  EXPECT_NE(status.message().find("did not prove it holds the cluster token"), std::string::npos);
  EXPECT_EQ(stats.attempts, 1);  // not retried
}

// A server that somehow lost its TLS credentials still runs no handler for an unproven peer.
TEST(AuthenticateServiceTest, HandlersRefuseAPeerWithoutAClusterCertificate) {
  CountingAgent service;
  ASSERT_TRUE(AuthenticateService(&service).ok());
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = v1::NodeAgent::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  ConfigureClientContext(&context, absl::Seconds(30));
  v1::KillWorkerRequest request;
  v1::KillWorkerResponse response;
  grpc::Status status = stub->KillWorker(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  EXPECT_EQ(service.calls.load(), 0);
  server->Shutdown();
}

TEST(ServerStartTest, TakenPortIsAnError) {
  CountingAgent first_service;
  ServerOptions options;
  options.token = kToken;
  auto first = RpcServer::Start(options, {&first_service});
  ASSERT_TRUE(first.ok()) << first.status();
  CountingAgent second_service;
  options.port = (*first)->port();
  auto second = RpcServer::Start(options, {&second_service});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
}

TEST(ServerStartTest, BadOptionsAreRefused) {
  CountingAgent service;
  ServerOptions options;
  EXPECT_EQ(RpcServer::Start(options, {&service}).status().code(),
            absl::StatusCode::kInvalidArgument);  // no token
  options.token = kToken;
  options.port = 70000;
  EXPECT_EQ(RpcServer::Start(options, {&service}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ServerStartTest, DeadPeerIsUnavailableAfterRetries) {
  // A port nobody listens on: bind one, then shut it down.
  int port = 0;
  {
    CountingAgent service;
    ServerOptions options;
    options.token = kToken;
    auto server = RpcServer::Start(options, {&service});
    ASSERT_TRUE(server.ok());
    port = (*server)->port();
  }
  auto stub = v1::NodeAgent::NewStub(MakeChannel("127.0.0.1:" + std::to_string(port), kToken));
  RetryOptions options;
  options.total_budget = absl::Milliseconds(300);
  options.attempt_timeout = absl::Milliseconds(200);
  RetryStats stats;
  v1::KillWorkerRequest request;
  v1::KillWorkerResponse response;
  absl::Status status = CallWithRetry(
      options,
      [&](grpc::ClientContext* context) { return stub->KillWorker(context, request, &response); },
      &stats);
  EXPECT_TRUE(status.code() == absl::StatusCode::kUnavailable ||
              status.code() == absl::StatusCode::kDeadlineExceeded)
      << status;
  EXPECT_GE(stats.attempts, 2);
}

// The value of one series of `name` in the registry (-1 when absent); for a histogram, its count.
double SeriesValue(const metrics::MetricRegistry& registry, const std::string& name,
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
  return -1;
}

TEST(RpcServerMetricsTest, EveryCallIsCountedByMethodAndCodeAndUnaryCallsAreTimed) {
  metrics::MetricRegistry registry;
  auto rpc_metrics = RpcServerMetrics::Create(registry);
  ASSERT_TRUE(rpc_metrics.ok()) << rpc_metrics.status();
  CountingAgent service;
  ServerOptions options;
  options.token = kToken;
  options.metrics = rpc_metrics->get();
  auto server = RpcServer::Start(options, {&service});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::NodeAgent::NewStub(MakeChannel((*server)->address(), kToken));
  auto kill = [&](const std::string& worker) {
    grpc::ClientContext context;
    ConfigureClientContext(&context, absl::Seconds(30));
    v1::KillWorkerRequest request;
    request.set_worker_id(worker);
    v1::KillWorkerResponse response;
    return stub->KillWorker(&context, request, &response);
  };
  ASSERT_TRUE(kill("w1").ok());
  ASSERT_TRUE(kill("w2").ok());
  ASSERT_EQ(kill("bad").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  {
    grpc::ClientContext context;
    ConfigureClientContext(&context, absl::Seconds(30));
    auto reader = stub->WatchWorker(&context, v1::WatchWorkerRequest());
    v1::WorkerEvent event;
    while (reader->Read(&event)) {
    }
    ASSERT_TRUE(reader->Finish().ok());
  }
  (*server)->Shutdown();
  (*server)->Wait();
  const std::string service_name = "tessera.v1.NodeAgent";
  EXPECT_EQ(
      SeriesValue(registry, "tessera_rpc_server_handled_total", {service_name, "KillWorker", "OK"}),
      2);
  EXPECT_EQ(SeriesValue(registry, "tessera_rpc_server_handled_total",
                        {service_name, "KillWorker", "INVALID_ARGUMENT"}),
            1);
  EXPECT_EQ(SeriesValue(registry, "tessera_rpc_server_handled_total",
                        {service_name, "WatchWorker", "OK"}),
            1);
  // Unary calls are timed, whatever their outcome; streams are not.
  EXPECT_EQ(
      SeriesValue(registry, "tessera_rpc_server_handling_seconds", {service_name, "KillWorker"}),
      3);
  EXPECT_EQ(
      SeriesValue(registry, "tessera_rpc_server_handling_seconds", {service_name, "WatchWorker"}),
      -1);
}

TEST(RpcServerMetricsTest, CodesHaveGrpcsNames) {
  EXPECT_EQ(GrpcCodeName(grpc::StatusCode::OK), "OK");
  EXPECT_EQ(GrpcCodeName(grpc::StatusCode::RESOURCE_EXHAUSTED), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(GrpcCodeName(static_cast<grpc::StatusCode>(99)), "UNKNOWN");
}

TEST(JoinHostPortTest, BracketsIpv6) {
  EXPECT_EQ(JoinHostPort("127.0.0.1", 80), "127.0.0.1:80");
  EXPECT_EQ(JoinHostPort("::1", 80), "[::1]:80");
  EXPECT_EQ(JoinHostPort("[::1]", 80), "[::1]:80");
}

}  // namespace
}  // namespace tessera::rpc

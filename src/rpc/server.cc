#include "rpc/server.h"

#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpc/grpc.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "rpc/auth.h"
#include "rpc/cluster_identity.h"
#include "rpc/server_metrics.h"

namespace tessera::rpc {

std::string JoinHostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos && (host.empty() || host.front() != '[')) {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || absl::StartsWith(host, "127.");
}

absl::StatusOr<std::unique_ptr<RpcServer>> RpcServer::Start(
    const ServerOptions& options, const std::vector<grpc::Service*>& services) {
  if (options.bind_address.empty()) return absl::InvalidArgumentError("empty bind address");
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("port ", options.port, " is out of range"));
  }
  if (options.token.empty()) return absl::InvalidArgumentError("empty cluster token");
  if (services.empty()) return absl::InvalidArgumentError("no services to serve");
  auto identity = ClusterIdentity::ForToken(options.token);
  if (!identity.ok()) return identity.status();
  for (grpc::Service* service : services) {
    absl::Status status = AuthenticateService(service);
    if (!status.ok()) return status;
  }

  grpc::ServerBuilder builder;
  // A port that is taken must be an error, not a second server sharing it.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Large HTTP/2 window and frames for bulk streams, as on the client side (rpc/channel.cc).
  builder.AddChannelArgument("grpc.http2.lookahead_bytes", 64 << 20);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 16 << 20);
  int port = 0;
  std::string listen = JoinHostPort(options.bind_address, options.port);
  builder.AddListeningPort(listen, (*identity)->ServerCredentials(), &port);
  for (grpc::Service* service : services) builder.RegisterService(service);
  // The sync server starts a thread when a call leaves it without an idle poller and ends one
  // that finishes a call while MAX_POLLERS others poll (default 2). With a few concurrent
  // clients that is a thread created and destroyed per call, which cost the head most of its
  // CPU under placement group load. Idle threads cost nothing: keep up to 16.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 2);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 16);
  if (options.metrics != nullptr) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(options.metrics->InterceptorFactory());
    builder.experimental().SetInterceptorCreators(std::move(creators));
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen));
  }
  std::string address = JoinHostPort(options.bind_address, port);
  return std::unique_ptr<RpcServer>(new RpcServer(std::move(server), port, std::move(address)));
}

RpcServer::~RpcServer() {
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
}

void RpcServer::Shutdown(absl::Duration grace) {
  server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(grace));
}

void RpcServer::Wait() { server_->Wait(); }

}  // namespace tessera::rpc

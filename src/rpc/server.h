// Starting a gRPC server the Tessera way: one bind address (127.0.0.1 unless asked otherwise), a
// port (0 = ephemeral, the bound one is reported), mutual TLS with the identity derived from the
// cluster token (rpc/cluster_identity.h), and the peer checked again in front of every method of
// every service (rpc/auth.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"

namespace tessera::rpc {

class RpcServerMetrics;

struct ServerOptions {
  std::string bind_address = "127.0.0.1";
  int port = 0;       // 0: an ephemeral port
  std::string token;  // required: the identity both ends derive
  // Counts and times every call (rpc/server_metrics.h); null: none. Must outlive the server.
  RpcServerMetrics* metrics = nullptr;
};

// host:port with IPv6 hosts bracketed ("[::1]:5000").
std::string JoinHostPort(const std::string& host, int port);
// Whether binding `host` serves this machine only: 127.0.0.0/8, ::1 or localhost (not a
// wildcard, not another address).
bool IsLoopbackHost(const std::string& host);

// Owns a started grpc::Server. Thread-safe: Shutdown and Wait may be called from any thread.
class RpcServer {
 public:
  // Authenticates every service (AuthenticateService), binds with the cluster's TLS identity and
  // starts serving. The services
  // must outlive the server and be synchronous. InvalidArgument for a bad option or service,
  // Unavailable when the address cannot be bound (e.g. the port is taken).
  static absl::StatusOr<std::unique_ptr<RpcServer>> Start(
      const ServerOptions& options, const std::vector<grpc::Service*>& services);

  ~RpcServer();  // shuts down (no grace) when still running

  int port() const { return port_; }
  // bind_address:port, the address clients on this host dial.
  const std::string& address() const { return address_; }
  // Stops accepting calls; calls still running get until `grace` to finish, then are cancelled.
  void Shutdown(absl::Duration grace = absl::Seconds(1));
  // Blocks until Shutdown has finished.
  void Wait();

 private:
  RpcServer(std::unique_ptr<grpc::Server> server, int port, std::string address)
      : server_(std::move(server)), port_(port), address_(std::move(address)) {}

  std::unique_ptr<grpc::Server> server_;
  int port_;
  std::string address_;
};

}  // namespace tessera::rpc

#include "rpc/channel.h"

#include <chrono>
#include <iostream>
#include <mutex>

#include "grpc/grpc.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "rpc/cluster_identity.h"
#include "rpc/token.h"

namespace tessera::rpc {

namespace {

// Credentials that trust no server: an authority made from a token of random bytes that is
// never kept, so no peer can hold it.
std::shared_ptr<grpc::ChannelCredentials> TrustNoOne() {
  static const std::shared_ptr<grpc::ChannelCredentials> credentials = [] {
    auto token = GenerateToken();
    auto identity = token.ok() ? ClusterIdentity::Derive(*token)
                               : absl::StatusOr<std::unique_ptr<ClusterIdentity>>(token.status());
    if (identity.ok()) return (*identity)->ChannelCredentials();
    // Without even that, trust an authority that is not a certificate: no handshake completes.
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = "none";
    return grpc::SslCredentials(options);
  }();
  return credentials;
}

}  // namespace

void KeepCallbackQueueForTheProcess() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto* channel = new std::shared_ptr<grpc::Channel>(grpc::CreateChannel(
        "unix:/nonexistent/tessera-callback-queue", grpc::InsecureChannelCredentials()));
    auto* stub = new grpc::GenericStub(*channel);
    auto* context = new grpc::ClientContext();
    context->set_deadline(std::chrono::system_clock::now());
    grpc::Slice empty("");
    auto* request = new grpc::ByteBuffer(&empty, 1);  // a valid (empty) message
    auto* response = new grpc::ByteBuffer();
    // Fails at once (no such socket, deadline now); only the queue it acquires matters. The
    // objects are never freed: the channel must outlive every other one.
    stub->UnaryCall(context, "/tessera.KeepQueue/None", grpc::StubOptions(), request, response,
                    [](const grpc::Status&) {});
  });
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, std::string_view token) {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  auto identity = ClusterIdentity::ForToken(token);
  if (identity.ok()) {
    credentials = (*identity)->ChannelCredentials();
  } else {
    std::cerr << "rpc: no cluster identity for the channel to " << address << ": "
              << identity.status().message() << "; its calls will fail\n";
    credentials = TrustNoOne();
  }
  grpc::ChannelArguments args;
  // Every process certificate carries one name, whatever address it serves.
  args.SetSslTargetNameOverride(kClusterServerName);
  // Retries are ours (rpc/retry.h), with deadlines per attempt; gRPC's own would double them.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  // A peer that restarts should be reachable again quickly, not after a long reconnect backoff.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  // Bulk streams (objects between node agents) need a large HTTP/2 window and frames: with
  // gRPC's defaults a 1 GiB object crawled at 0.17 GB/s on loopback, with these 1.0 GB/s. The
  // window is only filled while a stream is actually that far behind.
  args.SetInt("grpc.http2.lookahead_bytes", 64 << 20);
  args.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 16 << 20);
  return grpc::CreateCustomChannel(address, credentials, args);
}

}  // namespace tessera::rpc

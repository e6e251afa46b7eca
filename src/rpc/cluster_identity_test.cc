// The identity derived from the token, and what a squatter on a cluster address learns: a
// plain listener receives no token and no request, a TLS server made from another token is
// refused before the client sends anything of its own.
#include "rpc/cluster_identity.h"

#include <netinet/in.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "rpc/auth.h"
#include "rpc/channel.h"
#include "rpc/retry.h"
#include "rpc/server.h"
#include "rpc/status_conversion.h"
#include "tessera/v1/node_agent.grpc.pb.h"

namespace tessera::rpc {
namespace {

constexpr char kToken[] = "5f0c8d3e9a2b4c6d8e0f1a2b3c4d5e6f5f0c8d3e9a2b4c6d8e0f1a2b3c4d5e6f";

struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};

std::unique_ptr<X509, X509Free> ParsePem(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return std::unique_ptr<X509, X509Free>(cert);
}

TEST(ClusterIdentityTest, TheAuthorityIsTheSameBytesForOneTokenAndOtherForAnother) {
  auto a = ClusterIdentity::Derive(kToken);
  auto b = ClusterIdentity::Derive(kToken);
  auto other = ClusterIdentity::Derive("another-token");
  ASSERT_TRUE(a.ok() && b.ok() && other.ok());
  EXPECT_EQ((*a)->authority_pem(), (*b)->authority_pem());
  EXPECT_EQ((*a)->authority_fingerprint(), (*b)->authority_fingerprint());
  EXPECT_NE((*a)->authority_fingerprint(), (*other)->authority_fingerprint());
  EXPECT_EQ((*a)->authority_fingerprint().rfind("sha256:", 0), 0u);
  EXPECT_EQ((*a)->authority_fingerprint().size(), 7u + 64u);
  // Each process has a key and certificate of its own.
  EXPECT_NE((*a)->certificate_pem(), (*b)->certificate_pem());
  // Nothing derived shows the token.
  for (const std::string& text :
       {(*a)->authority_pem(), (*a)->certificate_pem(), (*a)->authority_fingerprint()}) {
    EXPECT_EQ(text.find(kToken), std::string::npos);
  }
}

TEST(ClusterIdentityTest, TheProcessCertificateIsSignedByTheAuthorityForTheClusterName) {
  auto identity = ClusterIdentity::Derive(kToken);
  auto other = ClusterIdentity::Derive("another-token");
  ASSERT_TRUE(identity.ok() && other.ok());
  auto authority = ParsePem((*identity)->authority_pem());
  auto cert = ParsePem((*identity)->certificate_pem());
  auto other_authority = ParsePem((*other)->authority_pem());
  ASSERT_TRUE(authority && cert && other_authority);
  EXPECT_EQ(X509_verify(cert.get(), X509_get0_pubkey(authority.get())), 1);
  EXPECT_NE(X509_verify(cert.get(), X509_get0_pubkey(other_authority.get())), 1);
  EXPECT_EQ(X509_check_host(cert.get(), kClusterServerName, 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_ca(authority.get()), 1);
  EXPECT_EQ(X509_check_ca(cert.get()), 0);
  // Valid now, and not for ever.
  EXPECT_LT(X509_cmp_current_time(X509_get0_notBefore(cert.get())), 0);
  EXPECT_GT(X509_cmp_current_time(X509_get0_notAfter(cert.get())), 0);
}

class CountingAgent : public v1::NodeAgent::Service {
 public:
  grpc::Status KillWorker(grpc::ServerContext*, const v1::KillWorkerRequest*,
                          v1::KillWorkerResponse*) override {
    ++calls;
    return grpc::Status::OK;
  }
  std::atomic<int> calls{0};
};

grpc::Status KillOn(const std::string& address, std::string_view token, std::string worker) {
  auto stub = v1::NodeAgent::NewStub(MakeChannel(address, token));
  grpc::ClientContext context;
  ConfigureClientContext(&context, absl::Seconds(3));
  v1::KillWorkerRequest request;
  request.set_worker_id(std::move(worker));
  v1::KillWorkerResponse response;
  return stub->KillWorker(&context, request, &response);
}

// Another local user binds the port a cluster process used to serve: whatever it answers, it
// must never see the token or a request.
TEST(SquatterTest, APlainListenerReceivesNeitherTheTokenNorTheRequest) {
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 8), 0);
  socklen_t length = sizeof(addr);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &length), 0);
  const std::string address = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));

  // The squatter speaks plaintext HTTP/2 as a server would (the client's preface is all it
  // gets if the client is willing), keeping every byte it receives.
  std::string received;
  std::atomic<bool> stop{false};
  std::thread squatter([&] {
    while (!stop) {
      timeval wait{0, 200000};
      fd_set ready;
      FD_ZERO(&ready);
      FD_SET(listener, &ready);
      if (select(listener + 1, &ready, nullptr, nullptr, &wait) <= 0) continue;
      int connection = accept(listener, nullptr, nullptr);
      if (connection < 0) continue;
      static const char kSettings[] = {0, 0, 0, 4, 0, 0, 0, 0, 0};  // an empty SETTINGS frame
      (void)!write(connection, kSettings, sizeof(kSettings));
      char buffer[4096];
      timeval patience{1, 0};
      setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof(patience));
      for (ssize_t n; (n = read(connection, buffer, sizeof(buffer))) > 0;) {
        received.append(buffer, static_cast<size_t>(n));
      }
      close(connection);
    }
  });
  grpc::Status status = KillOn(address, kToken, "squatted-request-marker");
  stop = true;
  squatter.join();
  close(listener);

  EXPECT_FALSE(status.ok());
  EXPECT_FALSE(received.empty());  // the client did connect: it sent a TLS hello
  EXPECT_EQ(received.find(kToken), std::string::npos);
  EXPECT_EQ(received.find("squatted-request-marker"), std::string::npos);
  EXPECT_EQ(received.find("KillWorker"), std::string::npos);
}

TEST(SquatterTest, ATlsServerFromAnotherTokenIsRefusedAndNeverCalled) {
  CountingAgent squatter;
  ServerOptions options;
  options.token = "the-squatters-own-token";
  auto server = RpcServer::Start(options, {&squatter});
  ASSERT_TRUE(server.ok()) << server.status();
  grpc::Status status = KillOn((*server)->address(), kToken, "w1");
  EXPECT_TRUE(IsPeerAuthenticationFailure(status)) << status.error_message();
  absl::Status converted = FromGrpcStatus(status);
  EXPECT_EQ(converted.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(converted.message().find((*server)->address()), std::string::npos) << converted;
  EXPECT_EQ(squatter.calls.load(), 0);
}

TEST(ClusterIdentityTest, AnEmptyTokenHasNoIdentityAndItsChannelReachesNoOne) {
  EXPECT_EQ(ClusterIdentity::ForToken("").status().code(), absl::StatusCode::kInvalidArgument);
  auto first = ClusterIdentity::ForToken(kToken);
  auto again = ClusterIdentity::ForToken(kToken);
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_EQ(first->get(), again->get());  // derived once per process
  CountingAgent agent;
  ServerOptions options;
  options.token = kToken;
  auto server = RpcServer::Start(options, {&agent});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_TRUE(KillOn((*server)->address(), kToken, "w1").ok());
  EXPECT_TRUE(IsPeerAuthenticationFailure(KillOn((*server)->address(), "", "w1")));
  EXPECT_EQ(agent.calls.load(), 1);
}

}  // namespace
}  // namespace tessera::rpc

// ClusterIdentity: the TLS identity a process derives from the cluster token, so that both ends
// of every gRPC connection prove they hold the token without ever sending it.
//
// From the token (HKDF-SHA256) comes one Ed25519 key, the cluster's certificate authority; its
// self-signed certificate is the same bytes in every process of the cluster (fixed serial, names
// and validity; Ed25519 signatures are deterministic). Each process then makes, in memory only,
// a key of its own and a certificate for it signed by that authority, named kClusterServerName.
// Servers require and verify a client certificate from the authority; clients verify the
// server's certificate before sending anything of their own (the client's certificate and every
// byte of every request come after the server has proved it holds the authority's signature and
// its key). So a process that does not
// hold the token, such as another local user who binds a dead head's port, cannot complete a
// handshake in either direction and learns nothing it could use.
//
// Lifetimes: the authority lives as long as the token (valid 2000-01-01 to 9999-12-31); a
// process's own certificate lives in its memory and dies with it (valid from a day before it
// was made, for ten years). Rotation is rotating the token: every process started with the new
// token trusts only certificates from the new authority.
//
// Thread-safe. ForToken derives once per token per process (a few hundred microseconds) and
// hands out the same shared identity afterwards.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace tessera::rpc {

// The name in every process certificate and the name clients check (the address is not: one
// certificate serves every address a process listens on).
inline constexpr char kClusterServerName[] = "tessera.cluster";

class ClusterIdentity {
 public:
  // The identity for `token` (printable ASCII, not empty), made on first use and then shared.
  // InvalidArgument for an empty token; Internal when the TLS library fails.
  static absl::StatusOr<std::shared_ptr<const ClusterIdentity>> ForToken(std::string_view token);

  // Makes a new identity without the cache (tests; ForToken is what processes use).
  static absl::StatusOr<std::unique_ptr<ClusterIdentity>> Derive(std::string_view token);

  // Client credentials: present this process's certificate, trust only the authority. One
  // object for every channel, so channels to one peer can share connections.
  const std::shared_ptr<grpc::ChannelCredentials>& ChannelCredentials() const {
    return channel_credentials_;
  }
  // Server credentials: present this process's certificate, require and verify the client's.
  std::shared_ptr<grpc::ServerCredentials> ServerCredentials() const;

  // PEM text of the authority's certificate, and of this process's certificate and key.
  const std::string& authority_pem() const { return authority_pem_; }
  const std::string& certificate_pem() const { return certificate_pem_; }
  // "sha256:<64 hex>" of the authority's DER certificate: names the cluster without revealing
  // anything about the token.
  const std::string& authority_fingerprint() const { return authority_fingerprint_; }

 private:
  ClusterIdentity() = default;
  std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials() const;

  std::string authority_pem_;
  std::string certificate_pem_;
  std::string private_key_pem_;
  std::string authority_fingerprint_;
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials_;
};

}  // namespace tessera::rpc

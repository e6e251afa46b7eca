// absl::Status <-> grpc::Status. Both use the canonical codes 0-16 with the same numbers, so the
// conversion keeps the code and the message exactly, except for a failed TLS handshake.
#pragma once

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace tessera::rpc {

// Thread-safe: pure functions.
grpc::Status ToGrpcStatus(const absl::Status& status);
// A code outside 0-16 (never sent by a gRPC peer) becomes UNKNOWN with the message kept. A
// peer that failed the TLS handshake (IsPeerAuthenticationFailure) becomes UNAUTHENTICATED,
// saying so.
absl::Status FromGrpcStatus(const grpc::Status& status);

// Whether a call failed because the peer did not prove it holds the cluster token: gRPC
// answers such a call UNAVAILABLE with the handshake's failure in its message.
bool IsPeerAuthenticationFailure(const grpc::Status& status);

}  // namespace tessera::rpc

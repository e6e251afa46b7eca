// Who may call: every server requires a peer that proved it holds the cluster token, and every
// client a server that proved the same, through mutual TLS with the identity both derive from
// the token (rpc/cluster_identity.h). The token itself never travels.
//
// Server side: the server's TLS credentials refuse, in the handshake, a client without a
// certificate from the cluster's authority. AuthenticateService also wraps every method handler
// of a synchronous service so that a call whose peer is not so authenticated (a server set up
// without those credentials by mistake) is answered UNAUTHENTICATED before the service's
// handler runs; unary and streaming methods alike. (Server interceptors cannot stop a handler
// from running, so the check sits in front of the handler itself.)
//
// Client side: ConfigureClientContext puts a deadline on a grpc::ClientContext; the channel
// (rpc/channel.h) carries the identity.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "grpcpp/impl/service_type.h"
#include "grpcpp/server_context.h"

namespace tessera::rpc {

// Whether the call's peer completed the handshake with a certificate of the cluster's
// authority. Thread-safe.
bool IsClusterPeer(const grpc::ServerContextBase& context);

// Installs the peer check in front of every method of `service`. Must be called before the
// service is registered with a server, once per service object. InvalidArgument (and nothing
// changed) for a service with asynchronous, callback or generic methods: only synchronous
// services are supported, so that no method can slip past the check. Not thread-safe: call
// while setting the server up.
absl::Status AuthenticateService(grpc::Service* service);

// Sets the deadline now + `timeout` (a non-positive or infinite timeout leaves no deadline;
// callers should always give one). Not thread-safe per context.
void ConfigureClientContext(grpc::ClientContext* context, absl::Duration timeout);

// A fresh context configured as above.
std::unique_ptr<grpc::ClientContext> MakeClientContext(absl::Duration timeout);

}  // namespace tessera::rpc

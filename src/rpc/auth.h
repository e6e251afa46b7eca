// Cluster-token authentication for every call (metadata "x-tessera-token").
//
// Server side: AuthenticateService wraps every method handler of a synchronous service so a call
// whose token is missing or wrong is answered UNAUTHENTICATED before the service's handler runs;
// unary and streaming methods alike. (gRPC's AuthMetadataProcessor does not run on insecure
// credentials, and server interceptors cannot stop a handler from running, so the check sits in
// front of the handler itself.)
//
// Client side: ConfigureClientContext puts the token and a deadline on a grpc::ClientContext.
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

inline constexpr char kTokenMetadataKey[] = "x-tessera-token";

// Whether the call's metadata carries exactly `token` (constant-time compare). Thread-safe.
bool HasValidToken(const grpc::ServerContextBase& context, std::string_view token);

// Installs the token check in front of every method of `service`. Must be called before the
// service is registered with a server, once per service object. InvalidArgument (and nothing
// changed) for a service with asynchronous, callback or generic methods: only synchronous
// services are supported, so that no method can slip past the check. `token` must not be empty.
// Not thread-safe: call while setting the server up.
absl::Status AuthenticateService(grpc::Service* service, const std::string& token);

// Adds the token metadata and sets the deadline now + `timeout` (a non-positive or infinite
// timeout leaves no deadline; callers should always give one). Not thread-safe per context.
void ConfigureClientContext(grpc::ClientContext* context, std::string_view token,
                            absl::Duration timeout);

// A fresh context configured as above.
std::unique_ptr<grpc::ClientContext> MakeClientContext(std::string_view token,
                                                       absl::Duration timeout);

}  // namespace tessera::rpc

// Client channels: one per peer address, kept and reused for every call to that peer (a channel
// multiplexes calls and reconnects by itself).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "grpcpp/channel.h"

namespace tessera::rpc {

// A mutual-TLS channel to host:port with the identity derived from `token`
// (rpc/cluster_identity.h): every connection it makes first checks that the peer holds the
// same token, and sends nothing of its own (not its certificate, not a request) to one that
// does not; such a call fails UNAVAILABLE with "Ssl handshake failed" in its message
// (FromGrpcStatus turns it into UNAUTHENTICATED naming the peer). The token is never sent.
// Thread-safe; the channel connects lazily, so this never blocks. Should the identity not be
// derivable (an empty token), the channel trusts no peer at all: every call fails the same way.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, std::string_view token);

}  // namespace tessera::rpc

// Client channels: one per peer address, kept and reused for every call to that peer (a channel
// multiplexes calls and reconnects by itself).
#pragma once

#include <memory>
#include <string>

#include "grpcpp/channel.h"

namespace tessera::rpc {

// An insecure channel to host:port (authentication is the per-call token). Thread-safe; the
// channel connects lazily, so this never blocks.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address);

}  // namespace tessera::rpc

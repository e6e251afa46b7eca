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

// Call before a callback-API call (`stub.async()->...`); cheap after the first call.
// gRPC 1.51 runs callback-API completions on a shared "alternative" completion queue whose
// threads it starts when the first channel makes a callback call and deletes when the last such
// channel goes. When that last channel is destroyed from inside a completion callback (a worker's
// channel dropped as its call ends), the queue is deleted under the thread still polling it, which
// then crashes in grpc_completion_queue_next. One channel that lives as long as the process and
// has made a callback call keeps that queue. Only processes that make callback calls (drivers and
// workers) take it: the queue's threads join the process's pollers, and in a process that makes
// only synchronous calls (the head, the agents) they would add a thread hop to every call.
void KeepCallbackQueueForTheProcess();

}  // namespace tessera::rpc

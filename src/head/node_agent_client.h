// NodeAgentClient: the head's side of the two-phase commit with one node agent (prepare, commit,
// cancel of bundle reservations). The head talks to agents only through this interface so unit
// tests can put in a fake that fails or times out; GrpcNodeAgentClient is the real one.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "rpc/retry.h"
#include "tessera/v1/node_agent.grpc.pb.h"

namespace tessera {

// Implementations are thread-safe.
class NodeAgentClient {
 public:
  virtual ~NodeAgentClient() = default;
  virtual absl::Status Prepare(const v1::PrepareBundlesRequest& request) = 0;
  virtual absl::Status Commit(const v1::CommitBundlesRequest& request) = 0;
  virtual absl::Status Cancel(const v1::CancelBundlesRequest& request) = 0;
};

// Makes the client for a node at its agent address; called once per registration.
using NodeAgentClientFactory = std::function<std::shared_ptr<NodeAgentClient>(
    const std::string& node_id, const std::string& address)>;

// The generated stub over one channel (reused for every call), each call with retry.rpc's
// deadline per attempt and backoff (prepare, commit and cancel are idempotent per bundle).
// Thread-safe.
class GrpcNodeAgentClient : public NodeAgentClient {
 public:
  GrpcNodeAgentClient(const std::string& address, std::string_view token, rpc::RetryOptions retry);
  absl::Status Prepare(const v1::PrepareBundlesRequest& request) override;
  absl::Status Commit(const v1::CommitBundlesRequest& request) override;
  absl::Status Cancel(const v1::CancelBundlesRequest& request) override;

 private:
  std::unique_ptr<v1::NodeAgent::Stub> stub_;
  rpc::RetryOptions retry_;
};

// A factory of GrpcNodeAgentClients proving `token` (rpc/channel.h), with these retry options.
NodeAgentClientFactory GrpcNodeAgentClientFactory(std::string token, rpc::RetryOptions retry);

}  // namespace tessera

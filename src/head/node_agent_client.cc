#include "head/node_agent_client.h"

#include "rpc/channel.h"

namespace tessera {

GrpcNodeAgentClient::GrpcNodeAgentClient(const std::string& address, std::string_view token,
                                         rpc::RetryOptions retry)
    : stub_(v1::NodeAgent::NewStub(rpc::MakeChannel(address, token))), retry_(std::move(retry)) {}

absl::Status GrpcNodeAgentClient::Prepare(const v1::PrepareBundlesRequest& request) {
  v1::PrepareBundlesResponse response;
  return rpc::RetryUnary(retry_, &v1::NodeAgent::Stub::PrepareBundles, stub_.get(), request,
                         &response);
}

absl::Status GrpcNodeAgentClient::Commit(const v1::CommitBundlesRequest& request) {
  v1::CommitBundlesResponse response;
  return rpc::RetryUnary(retry_, &v1::NodeAgent::Stub::CommitBundles, stub_.get(), request,
                         &response);
}

absl::Status GrpcNodeAgentClient::Cancel(const v1::CancelBundlesRequest& request) {
  v1::CancelBundlesResponse response;
  return rpc::RetryUnary(retry_, &v1::NodeAgent::Stub::CancelBundles, stub_.get(), request,
                         &response);
}

NodeAgentClientFactory GrpcNodeAgentClientFactory(std::string token, rpc::RetryOptions retry) {
  return [token = std::move(token), retry](const std::string&, const std::string& address) {
    return std::make_shared<GrpcNodeAgentClient>(address, token, retry);
  };
}

}  // namespace tessera

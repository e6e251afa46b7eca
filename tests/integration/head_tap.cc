#include "integration/head_tap.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "rpc/auth.h"
#include "rpc/channel.h"

namespace tessera::testing {
namespace {

// What the head may take of a caller's remaining time, leaving the tap room to answer first.
absl::Duration ForwardTimeout(const grpc::ServerContext& context) {
  const auto left = context.deadline() - std::chrono::system_clock::now();
  const absl::Duration remaining = absl::FromChrono(left);
  if (remaining > absl::Minutes(1)) return absl::Seconds(10);  // no deadline (or a far one)
  return std::max(remaining * 0.8 - absl::Milliseconds(20), absl::Milliseconds(1));
}

// The head could not be reached: ABORTED, so the agent retries the tap (see the header).
grpc::Status Unreached(const grpc::Status& status) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
      status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
    return status;
  }
  return grpc::Status(grpc::StatusCode::ABORTED,
                      absl::StrCat("the head tap cannot reach the head: ", status.error_message()));
}

}  // namespace

HeadTap::HeadTap(const std::string& head_address, std::string token)
    : token_(std::move(token)),
      head_(tessera::v1::HeadNodes::NewStub(rpc::MakeChannel(head_address, token_))) {}

HeadTap::~HeadTap() {
  if (server_ != nullptr) server_->Shutdown(absl::ZeroDuration());
}

absl::StatusOr<std::unique_ptr<HeadTap>> HeadTap::Start(const std::string& head_address,
                                                        const std::string& token) {
  std::unique_ptr<HeadTap> tap(new HeadTap(head_address, token));
  rpc::ServerOptions options;
  options.token = token;
  auto server = rpc::RpcServer::Start(options, {tap.get()});
  if (!server.ok()) return server.status();
  tap->server_ = std::move(*server);
  return tap;
}

void HeadTap::Record(tessera::v1::HeartbeatRequest report) {
  absl::MutexLock lock(&mu_);
  AgentReport& slot = reports_[report.node_id()];
  slot.at = absl::Now();
  slot.report = std::move(report);
}

std::map<std::string, AgentReport> HeadTap::Reports() const {
  absl::MutexLock lock(&mu_);
  return reports_;
}

grpc::Status HeadTap::RegisterNode(grpc::ServerContext* context,
                                   const tessera::v1::RegisterNodeRequest* request,
                                   tessera::v1::RegisterNodeResponse* response) {
  tessera::v1::HeartbeatRequest report;
  report.set_node_id(request->node().node_id());
  report.set_incarnation(request->node().incarnation());
  *report.mutable_leases() = request->leases();
  *report.mutable_bundles() = request->bundles();
  Record(std::move(report));
  grpc::ClientContext forward;
  rpc::ConfigureClientContext(&forward, ForwardTimeout(*context));
  return Unreached(head_->RegisterNode(&forward, *request, response));
}

grpc::Status HeadTap::Heartbeat(grpc::ServerContext* context,
                                const tessera::v1::HeartbeatRequest* request,
                                tessera::v1::HeartbeatResponse* response) {
  Record(*request);
  grpc::ClientContext forward;
  rpc::ConfigureClientContext(&forward, ForwardTimeout(*context));
  return Unreached(head_->Heartbeat(&forward, *request, response));
}

grpc::Status HeadTap::PickNode(grpc::ServerContext* context,
                               const tessera::v1::PickNodeRequest* request,
                               tessera::v1::PickNodeResponse* response) {
  grpc::ClientContext forward;
  rpc::ConfigureClientContext(&forward, ForwardTimeout(*context));
  return head_->PickNode(&forward, *request, response);
}

}  // namespace tessera::testing

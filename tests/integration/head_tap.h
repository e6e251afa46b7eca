// HeadTap: a pass-through between the node agents and the head that keeps what each agent last
// told the head about itself (its leases and the bundles it holds), so a test can hold the agents'
// own view against the head's. The agents dial the tap instead of the head; it serves the
// HeadNodes calls an agent makes (RegisterNode, Heartbeat, PickNode; no other service of the head)
// and forwards each, with the caller's token, to the head at a fixed address (a restarted head
// comes back on the same port), and the head's answers go back unchanged. A head that cannot be
// reached (killed, restarting) is answered ABORTED instead of UNAVAILABLE for RegisterNode and
// Heartbeat, and always before the agent's own deadline: an agent keeps dialling the tap rather
// than going to look for the head elsewhere (it would find head.address and bypass the tap).
//
// Thread-safe: gRPC's threads forward calls; Reports() may be called from any thread. Cost: one
// extra loopback hop per agent call.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rpc/server.h"
#include "tessera/v1/head.grpc.pb.h"

namespace tessera::testing {

// One agent's latest report, as its RegisterNode or Heartbeat carried it.
struct AgentReport {
  absl::Time at;  // when it arrived
  // Node id, incarnation, leases and bundles (a registration's copied in).
  tessera::v1::HeartbeatRequest report;
};

class HeadTap final : public tessera::v1::HeadNodes::Service {
 public:
  // Serves on an ephemeral loopback port; forwards to `head_address` with calls checked against
  // `token` (the cluster's).
  static absl::StatusOr<std::unique_ptr<HeadTap>> Start(const std::string& head_address,
                                                        const std::string& token);
  ~HeadTap() override;

  // The address the agents dial instead of the head's.
  const std::string& address() const { return server_->address(); }

  // Each node's latest report, by node id.
  std::map<std::string, AgentReport> Reports() const;

  grpc::Status RegisterNode(grpc::ServerContext* context,
                            const tessera::v1::RegisterNodeRequest* request,
                            tessera::v1::RegisterNodeResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const tessera::v1::HeartbeatRequest* request,
                         tessera::v1::HeartbeatResponse* response) override;
  grpc::Status PickNode(grpc::ServerContext* context, const tessera::v1::PickNodeRequest* request,
                        tessera::v1::PickNodeResponse* response) override;

 private:
  HeadTap(const std::string& head_address, std::string token);
  void Record(tessera::v1::HeartbeatRequest report);

  std::string token_;
  std::unique_ptr<tessera::v1::HeadNodes::Stub> head_;
  std::unique_ptr<rpc::RpcServer> server_;

  mutable absl::Mutex mu_;
  std::map<std::string, AgentReport> reports_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::testing

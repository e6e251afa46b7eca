// FakeHead: the head as a node agent sees it, for the agent's tests: a Head service that records
// registrations and heartbeats and answers PickNode with what the test says (serve it with
// rpc::RpcServer). Thread-safe: the fields are guarded by `mu`.
#pragma once

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "tessera/v1/head.grpc.pb.h"

namespace tessera::node_testing {

// The head as the agent sees it: records registrations and heartbeats; PickNode answers what the
// test says.
class FakeHead final : public v1::Head::Service {
 public:
  grpc::Status RegisterNode(grpc::ServerContext*, const v1::RegisterNodeRequest* request,
                            v1::RegisterNodeResponse* response) override {
    absl::MutexLock lock(&mu);
    registrations.push_back(*request);
    if (!refuse_registration.empty()) {
      return grpc::Status(grpc::StatusCode::ALREADY_EXISTS, refuse_registration);
    }
    response->set_heartbeat_interval_ms(20);
    response->set_dead_after_ms(1000);
    for (const v1::HeldBundle& b : release_on_register) *response->add_release() = b;
    release_on_register.clear();
    known = true;
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override {
    absl::MutexLock lock(&mu);
    heartbeats.push_back(*request);
    response->set_known(known);
    return grpc::Status::OK;
  }
  grpc::Status PickNode(grpc::ServerContext*, const v1::PickNodeRequest* request,
                        v1::PickNodeResponse* response) override {
    absl::MutexLock lock(&mu);
    picks.push_back(*request);
    *response = pick_answer;
    return grpc::Status::OK;
  }

  absl::Mutex mu;
  std::vector<v1::RegisterNodeRequest> registrations ABSL_GUARDED_BY(mu);
  std::vector<v1::HeartbeatRequest> heartbeats ABSL_GUARDED_BY(mu);
  std::vector<v1::PickNodeRequest> picks ABSL_GUARDED_BY(mu);
  std::vector<v1::HeldBundle> release_on_register ABSL_GUARDED_BY(mu);
  v1::PickNodeResponse pick_answer ABSL_GUARDED_BY(mu);
  bool known ABSL_GUARDED_BY(mu) = true;
  // Not empty: RegisterNode is refused with ALREADY_EXISTS and this message.
  std::string refuse_registration ABSL_GUARDED_BY(mu);
};

}  // namespace tessera::node_testing

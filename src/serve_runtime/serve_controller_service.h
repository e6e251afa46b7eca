// ServeControllerService: the HeadServe service of serve.proto, a thin gRPC front over the
// ServeController the head's process hosts. As the head's own fronts do, it checks each
// request's size first (the limits below: one line naming the limit and the value, before any
// lock), then calls the controller and maps its errors to gRPC codes with their one-line
// messages (INVALID_ARGUMENT, ALREADY_EXISTS for a route prefix taken, FAILED_PRECONDITION,
// NOT_FOUND, UNAVAILABLE when the state store refuses a goal). GetReplicas and GetRoutes are long
// polls whose wait is capped (kMaxReplicasWait), so a caller's thread on the head's server is
// never held longer. StatusJson is serve.status() for the head's HTTP route /api/v1/serve.
//
// Threading: thread-safe (the controller is). Cost: each call is its controller call's; the
// checks are O(the request's size).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "serve_runtime/serve_controller.h"
#include "tessera/v1/serve.grpc.pb.h"

namespace tessera::serve {

// --- request limits (as head/request_limits.h's: generous for real use) ---
// Applications in one DeployApplications or DeleteApplications request.
inline constexpr size_t kMaxServeApplicationsPerRequest = 1000;
// Deployments of one application.
inline constexpr size_t kMaxServeDeploymentsPerApplication = 1000;
// Characters in a route prefix and in the start options' root_path.
inline constexpr size_t kMaxRoutePrefixLength = 1024;
// Bytes of one deployment's user_config_json.
inline constexpr size_t kMaxUserConfigBytes = 1024 * 1024;
// Environment variables of one replica, and bytes of each one's value.
inline constexpr size_t kMaxReplicaEnvVars = 1024;
inline constexpr size_t kMaxEnvVarValueBytes = 128 * 1024;
// Entries of python_path, and characters of each entry and of python_executable.
inline constexpr size_t kMaxPythonPathEntries = 1024;
inline constexpr size_t kMaxPathLength = 4096;
// Samples in one ReportMetrics request.
inline constexpr size_t kMaxServeSamplesPerReport = 10000;
// The longest GetReplicas and GetRoutes wait, whatever the request asks.
inline constexpr absl::Duration kMaxReplicasWait = absl::Seconds(30);

// OK, or InvalidArgument with one line naming the limit and the value (names and ids are held
// to head/request_limits.h's kMaxNameLength, resources to its resource limits). Sizes only:
// the controller checks the content. replica_spec has no limit of its own: the server's
// message size bounds it.
absl::Status CheckServeRequest(const v1::DeployServeApplicationsRequest& request);
absl::Status CheckServeRequest(const v1::DeleteServeApplicationsRequest& request);
absl::Status CheckServeRequest(const v1::GetServeReplicasRequest& request);
absl::Status CheckServeRequest(const v1::ReportServeMetricsRequest& request);

class ServeControllerService final : public v1::HeadServe::Service {
 public:
  // `controller` must outlive the service.
  explicit ServeControllerService(ServeController& controller) : controller_(controller) {}

  grpc::Status DeployApplications(grpc::ServerContext*,
                                  const v1::DeployServeApplicationsRequest* request,
                                  v1::DeployServeApplicationsResponse* response) override;
  grpc::Status DeleteApplications(grpc::ServerContext*,
                                  const v1::DeleteServeApplicationsRequest* request,
                                  v1::DeleteServeApplicationsResponse* response) override;
  grpc::Status Shutdown(grpc::ServerContext*, const v1::ShutdownServeRequest* request,
                        v1::ShutdownServeResponse* response) override;
  grpc::Status GetStatus(grpc::ServerContext*, const v1::GetServeStatusRequest* request,
                         v1::ServeStatus* response) override;
  // wait_s: negative or not finite is INVALID_ARGUMENT; above kMaxReplicasWait it is capped.
  grpc::Status GetReplicas(grpc::ServerContext*, const v1::GetServeReplicasRequest* request,
                           v1::GetServeReplicasResponse* response) override;
  // The route table (the proxies of the nodes watch it); wait_s as GetReplicas's.
  grpc::Status GetRoutes(grpc::ServerContext*, const v1::GetServeRoutesRequest* request,
                         v1::GetServeRoutesResponse* response) override;
  // Every sample is checked (a source, counts finite and >= 0) before any is recorded.
  grpc::Status ReportMetrics(grpc::ServerContext*, const v1::ReportServeMetricsRequest* request,
                             v1::ReportServeMetricsResponse* response) override;

  // serve.status() as the head's HTTP API shows it (rpc::MessageJson of v1::ServeStatus).
  nlohmann::ordered_json StatusJson() const;

 private:
  ServeController& controller_;
};

}  // namespace tessera::serve

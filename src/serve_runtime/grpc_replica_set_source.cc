#include "serve_runtime/grpc_replica_set_source.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "base/ignore_status.h"
#include "grpcpp/client_context.h"
#include "rpc/auth.h"

namespace tessera::serve {
namespace {

// What a call may take beyond the time the controller holds a long poll: the round trip and a
// busy head.
constexpr absl::Duration kCallDeadline = absl::Seconds(10);
// A report is small and the next one comes in a few seconds: it may not hold its caller long.
constexpr absl::Duration kReportDeadline = absl::Seconds(2);

}  // namespace

GrpcReplicaSetSource::GrpcReplicaSetSource(std::shared_ptr<client::ClusterClient> head)
    : head_(std::move(head)) {}

absl::StatusOr<v1::GetServeReplicasResponse> GrpcReplicaSetSource::GetReplicas(
    const std::string& application, const std::string& deployment, uint64_t known_version,
    absl::Duration wait) {
  v1::GetServeReplicasRequest request;
  request.set_application(application);
  request.set_deployment(deployment);
  request.set_known_version(known_version);
  request.set_wait_s(absl::ToDoubleSeconds(std::max(wait, absl::ZeroDuration())));
  v1::GetServeReplicasResponse response;
  grpc::ClientContext context;
  // An infinite wait leaves the call without a deadline, as the controller holds it as long.
  rpc::ConfigureClientContext(&context, wait + kCallDeadline);
  const grpc::Status status = head_->head_serve().GetReplicas(&context, request, &response);
  if (!status.ok()) return client::FromGrpc(status, head_->HeadPeer());
  return response;
}

absl::StatusOr<RouteTable> GrpcReplicaSetSource::GetRoutes(uint64_t known_version,
                                                           absl::Duration wait) {
  v1::GetServeRoutesRequest request;
  request.set_known_version(known_version);
  request.set_wait_s(absl::ToDoubleSeconds(std::max(wait, absl::ZeroDuration())));
  v1::GetServeRoutesResponse response;
  grpc::ClientContext context;
  rpc::ConfigureClientContext(&context, wait + kCallDeadline);
  const grpc::Status status = head_->head_serve().GetRoutes(&context, request, &response);
  if (!status.ok()) return client::FromGrpc(status, head_->HeadPeer());
  return RouteTableFromProto(response);
}

void GrpcReplicaSetSource::Report(const v1::ServeAutoscalingSample& sample) {
  v1::ReportServeMetricsRequest request;
  *request.add_samples() = sample;
  v1::ReportServeMetricsResponse response;
  grpc::ClientContext context;
  rpc::ConfigureClientContext(&context, kReportDeadline);
  const grpc::Status status = head_->head_serve().ReportMetrics(&context, request, &response);
  IgnoreStatus(client::FromGrpc(status, head_->HeadPeer()),
               "a lost sample is replaced by the caller's next report");
}

}  // namespace tessera::serve

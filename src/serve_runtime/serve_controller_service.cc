// ServeControllerService (serve_controller_service.h): the size checks of its requests, then the
// controller's calls with their errors mapped.
#include "serve_runtime/serve_controller_service.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "head/request_limits.h"
#include "rpc/message_json.h"
#include "rpc/status_conversion.h"

namespace tessera::serve {
namespace {

using request_limits::kMaxNameLength;

// "<subject> <n> <things>; at most <max> are allowed", as the head's request limits say it.
absl::Status AtMost(std::string_view subject, size_t n, std::string_view things, size_t max) {
  if (n <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(ToAbsl(subject), " has ", n, " ", ToAbsl(things),
                                                 "; at most ", max, " are allowed"));
}

absl::Status Chars(std::string_view field, std::string_view value, size_t max) {
  return AtMost(field, value.size(), "characters", max);
}

absl::Status CheckAmounts(std::string_view field,
                          const google::protobuf::Map<std::string, double>& amounts) {
  TESSERA_RETURN_IF_ERROR(
      AtMost(field, amounts.size(), "resources", request_limits::kMaxResourcesPerBundle));
  for (const auto& [name, amount] : amounts) {
    TESSERA_RETURN_IF_ERROR(Chars(absl::StrCat(ToAbsl(field), ": a resource name"), name,
                                  request_limits::kMaxResourceNameLength));
  }
  return absl::OkStatus();
}

absl::Status CheckResources(const std::string& where, const v1::ServeReplicaResources& resources) {
  TESSERA_RETURN_IF_ERROR(CheckAmounts(absl::StrCat(where, "resources"), resources.amounts()));
  TESSERA_RETURN_IF_ERROR(
      Chars(absl::StrCat(where, "accelerator_type"), resources.accelerator_type(), kMaxNameLength));
  TESSERA_RETURN_IF_ERROR(AtMost(absl::StrCat(where, "resources"), resources.env_vars_size(),
                                 "env_vars", kMaxReplicaEnvVars));
  for (const auto& [name, value] : resources.env_vars()) {
    TESSERA_RETURN_IF_ERROR(
        Chars(absl::StrCat(where, "an env_vars name"), name, request_limits::kMaxKvKeyBytes));
    TESSERA_RETURN_IF_ERROR(AtMost(absl::StrCat(where, "an env_vars value"), value.size(), "bytes",
                                   kMaxEnvVarValueBytes));
  }
  TESSERA_RETURN_IF_ERROR(AtMost(absl::StrCat(where, "placement_group_bundles"),
                                 resources.placement_group_bundles_size(), "bundles",
                                 request_limits::kMaxBundlesPerPlacementGroup));
  for (const v1::ServeBundle& bundle : resources.placement_group_bundles()) {
    TESSERA_RETURN_IF_ERROR(CheckAmounts(absl::StrCat(where, "a bundle"), bundle.amounts()));
  }
  TESSERA_RETURN_IF_ERROR(
      CheckAmounts(absl::StrCat(where, "slice.per_host"), resources.slice().per_host()));
  // A topology has 2 or 3 dims; the controller reads the shape itself.
  TESSERA_RETURN_IF_ERROR(
      AtMost(absl::StrCat(where, "slice.shape"), resources.slice().shape().dims_size(), "dims", 3));
  return Chars(absl::StrCat(where, "placement_group_strategy"),
               resources.placement_group_strategy(), kMaxNameLength);
}

absl::Status CheckDeployment(std::string_view app, const v1::ServeDeploymentSpec& deployment) {
  const std::string where =
      absl::StrCat("application ", Quote(app.substr(0, kMaxNameLength)), ", deployment ");
  TESSERA_RETURN_IF_ERROR(Chars(absl::StrCat(where, "name"), deployment.name(), kMaxNameLength));
  const std::string of = absl::StrCat(where, Quote(deployment.name()), ": ");
  TESSERA_RETURN_IF_ERROR(
      Chars(absl::StrCat(of, "code_version"), deployment.code_version(), kMaxNameLength));
  TESSERA_RETURN_IF_ERROR(AtMost(absl::StrCat(of, "user_config_json"),
                                 deployment.user_config_json().size(), "bytes",
                                 kMaxUserConfigBytes));
  return CheckResources(of, deployment.resources());
}

absl::Status CheckApplication(const v1::ServeApplicationSpec& app) {
  TESSERA_RETURN_IF_ERROR(Chars("an application name", app.name(), kMaxNameLength));
  const std::string where = absl::StrCat("application ", Quote(app.name()));
  TESSERA_RETURN_IF_ERROR(
      Chars(absl::StrCat(where, ": route_prefix"), app.route_prefix(), kMaxRoutePrefixLength));
  TESSERA_RETURN_IF_ERROR(
      Chars(absl::StrCat(where, ": ingress_deployment"), app.ingress_deployment(), kMaxNameLength));
  TESSERA_RETURN_IF_ERROR(
      AtMost(where, app.deployments_size(), "deployments", kMaxServeDeploymentsPerApplication));
  for (const v1::ServeDeploymentSpec& deployment : app.deployments()) {
    TESSERA_RETURN_IF_ERROR(CheckDeployment(app.name(), deployment));
  }
  return absl::OkStatus();
}

absl::Status CheckStart(const v1::ServeStartOptions& start) {
  TESSERA_RETURN_IF_ERROR(Chars("start options: http_host", start.http_host(), kMaxNameLength));
  TESSERA_RETURN_IF_ERROR(
      Chars("start options: root_path", start.root_path(), kMaxRoutePrefixLength));
  TESSERA_RETURN_IF_ERROR(
      Chars("start options: proxy_location", start.proxy_location(), kMaxNameLength));
  TESSERA_RETURN_IF_ERROR(
      Chars("start options: python_executable", start.python_executable(), kMaxPathLength));
  TESSERA_RETURN_IF_ERROR(AtMost("start options: python_path", start.python_path_size(), "entries",
                                 kMaxPythonPathEntries));
  for (const std::string& entry : start.python_path()) {
    TESSERA_RETURN_IF_ERROR(Chars("start options: a python_path entry", entry, kMaxPathLength));
  }
  return absl::OkStatus();
}

// A sample's content: counts the autoscaling signal can add up.
absl::Status CheckSample(const v1::ServeAutoscalingSample& sample) {
  if (sample.source().empty()) {
    return absl::InvalidArgumentError("an autoscaling sample needs its source");
  }
  for (const double count : {sample.ongoing_requests(), sample.queued_requests()}) {
    if (!std::isfinite(count) || count < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "an autoscaling sample's request counts must be finite and 0 or more, got ", count));
    }
  }
  return absl::OkStatus();
}

grpc::Status Invalid(const absl::Status& status) { return rpc::ToGrpcStatus(status); }

// A long poll's wait: wait_s seconds, at most kMaxReplicasWait; InvalidArgument when it is
// negative or not finite.
absl::StatusOr<absl::Duration> LongPollWait(double wait_s) {
  if (!std::isfinite(wait_s) || wait_s < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("wait_s must be a finite number of seconds, 0 or more, got ", wait_s));
  }
  return std::min(absl::Seconds(wait_s), kMaxReplicasWait);
}

}  // namespace

absl::Status CheckServeRequest(const v1::DeployServeApplicationsRequest& request) {
  TESSERA_RETURN_IF_ERROR(CheckStart(request.start()));
  TESSERA_RETURN_IF_ERROR(AtMost("the request", request.applications_size(), "applications",
                                 kMaxServeApplicationsPerRequest));
  for (const v1::ServeApplicationSpec& app : request.applications()) {
    TESSERA_RETURN_IF_ERROR(CheckApplication(app));
  }
  return absl::OkStatus();
}

absl::Status CheckServeRequest(const v1::DeleteServeApplicationsRequest& request) {
  TESSERA_RETURN_IF_ERROR(
      AtMost("the request", request.names_size(), "applications", kMaxServeApplicationsPerRequest));
  for (const std::string& name : request.names()) {
    TESSERA_RETURN_IF_ERROR(Chars("an application name", name, kMaxNameLength));
  }
  return absl::OkStatus();
}

absl::Status CheckServeRequest(const v1::GetServeReplicasRequest& request) {
  TESSERA_RETURN_IF_ERROR(Chars("application", request.application(), kMaxNameLength));
  return Chars("deployment", request.deployment(), kMaxNameLength);
}

absl::Status CheckServeRequest(const v1::ReportServeMetricsRequest& request) {
  TESSERA_RETURN_IF_ERROR(
      AtMost("the report", request.samples_size(), "samples", kMaxServeSamplesPerReport));
  for (const v1::ServeAutoscalingSample& sample : request.samples()) {
    TESSERA_RETURN_IF_ERROR(Chars("a sample's application", sample.application(), kMaxNameLength));
    TESSERA_RETURN_IF_ERROR(Chars("a sample's deployment", sample.deployment(), kMaxNameLength));
    TESSERA_RETURN_IF_ERROR(Chars("a sample's source", sample.source(), kMaxNameLength));
  }
  return absl::OkStatus();
}

grpc::Status ServeControllerService::DeployApplications(
    grpc::ServerContext*, const v1::DeployServeApplicationsRequest* request,
    v1::DeployServeApplicationsResponse*) {
  if (absl::Status limits = CheckServeRequest(*request); !limits.ok()) return Invalid(limits);
  return rpc::ToGrpcStatus(controller_.Deploy(*request));
}

grpc::Status ServeControllerService::DeleteApplications(
    grpc::ServerContext*, const v1::DeleteServeApplicationsRequest* request,
    v1::DeleteServeApplicationsResponse*) {
  if (absl::Status limits = CheckServeRequest(*request); !limits.ok()) return Invalid(limits);
  return rpc::ToGrpcStatus(controller_.Delete(
      std::vector<std::string>(request->names().begin(), request->names().end())));
}

grpc::Status ServeControllerService::Shutdown(grpc::ServerContext*, const v1::ShutdownServeRequest*,
                                              v1::ShutdownServeResponse*) {
  return rpc::ToGrpcStatus(controller_.Shutdown());
}

grpc::Status ServeControllerService::GetStatus(grpc::ServerContext*,
                                               const v1::GetServeStatusRequest*,
                                               v1::ServeStatus* response) {
  *response = controller_.Status();
  return grpc::Status::OK;
}

grpc::Status ServeControllerService::GetReplicas(grpc::ServerContext*,
                                                 const v1::GetServeReplicasRequest* request,
                                                 v1::GetServeReplicasResponse* response) {
  if (absl::Status limits = CheckServeRequest(*request); !limits.ok()) return Invalid(limits);
  const absl::StatusOr<absl::Duration> wait = LongPollWait(request->wait_s());
  if (!wait.ok()) return Invalid(wait.status());
  absl::StatusOr<v1::GetServeReplicasResponse> replicas = controller_.GetReplicas(
      request->application(), request->deployment(), request->known_version(), *wait);
  if (!replicas.ok()) return rpc::ToGrpcStatus(replicas.status());
  *response = *std::move(replicas);
  return grpc::Status::OK;
}

grpc::Status ServeControllerService::GetRoutes(grpc::ServerContext*,
                                               const v1::GetServeRoutesRequest* request,
                                               v1::GetServeRoutesResponse* response) {
  const absl::StatusOr<absl::Duration> wait = LongPollWait(request->wait_s());
  if (!wait.ok()) return Invalid(wait.status());
  absl::StatusOr<RouteTable> table = controller_.GetRoutes(request->known_version(), *wait);
  if (!table.ok()) return rpc::ToGrpcStatus(table.status());
  *response = RouteTableToProto(*table);
  return grpc::Status::OK;
}

grpc::Status ServeControllerService::ReportMetrics(grpc::ServerContext*,
                                                   const v1::ReportServeMetricsRequest* request,
                                                   v1::ReportServeMetricsResponse*) {
  if (absl::Status limits = CheckServeRequest(*request); !limits.ok()) return Invalid(limits);
  for (const v1::ServeAutoscalingSample& sample : request->samples()) {
    if (absl::Status bad = CheckSample(sample); !bad.ok()) return Invalid(bad);
  }
  for (const v1::ServeAutoscalingSample& sample : request->samples()) controller_.Report(sample);
  return grpc::Status::OK;
}

nlohmann::ordered_json ServeControllerService::StatusJson() const {
  return rpc::MessageJson(controller_.Status());
}

}  // namespace tessera::serve

#include "serve/application_state.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/string_util.h"

namespace tessera::serve {
namespace {

// Ray's DEPLOYMENT_STATUS_RANKING_ORDER: the lowest rank decides the application's status.
int Rank(const DeploymentStatusInfo& info) {
  switch (info.status) {
    case DeploymentStatus::kDeployFailed: return 0;
    case DeploymentStatus::kUnhealthy: return 1;
    case DeploymentStatus::kUpdating: return 2;
    case DeploymentStatus::kUpscaling:
    case DeploymentStatus::kDownscaling:
      return info.status_trigger == DeploymentStatusTrigger::kAutoscaling ? 3 : 2;
    case DeploymentStatus::kHealthy: return 3;
  }
  return 3;
}

// The names of the deployments with `status`, as Python prints a list of strings:
// ['a', 'b'].
std::string NamesWith(const std::vector<DeploymentStatusInfo>& deployments,
                      DeploymentStatus status) {
  std::vector<std::string> quoted;
  for (const DeploymentStatusInfo& info : deployments) {
    if (info.status == status) quoted.push_back(absl::StrCat("'", info.name, "'"));
  }
  return absl::StrCat("[", absl::StrJoin(quoted, ", "), "]");
}

absl::Status BadPrefix(std::string_view route_prefix, std::string_view rule) {
  return absl::InvalidArgumentError(
      absl::StrCat("Got \"", ToAbsl(route_prefix), "\" for route_prefix. ", ToAbsl(rule)));
}

}  // namespace

ApplicationStatusInfo ApplicationStatusFromDeployments(
    const std::vector<DeploymentStatusInfo>& deployments, bool deleting) {
  if (deleting) return {ApplicationStatus::kDeleting, ""};
  if (deployments.empty()) return {ApplicationStatus::kDeploying, ""};
  const auto first =
      std::min_element(deployments.begin(), deployments.end(),
                       [](const DeploymentStatusInfo& a, const DeploymentStatusInfo& b) {
                         return Rank(a) < Rank(b);
                       });
  switch (Rank(*first)) {
    case 0:
      return {ApplicationStatus::kDeployFailed,
              absl::StrCat("Failed to update the deployments ",
                           NamesWith(deployments, DeploymentStatus::kDeployFailed), ".")};
    case 1:
      return {ApplicationStatus::kUnhealthy,
              absl::StrCat("The deployments ", NamesWith(deployments, DeploymentStatus::kUnhealthy),
                           " are UNHEALTHY.")};
    case 2: return {ApplicationStatus::kDeploying, ""};
    default: return {ApplicationStatus::kRunning, ""};
  }
}

absl::Status ValidateRoutePrefix(std::string_view route_prefix) {
  if (route_prefix.empty() || route_prefix.front() != '/') {
    return BadPrefix(route_prefix, "Route prefix must start with \"/\".");
  }
  if (route_prefix.size() > 1 && route_prefix.back() == '/') {
    return BadPrefix(route_prefix,
                     "Route prefix cannot end with \"/\" unless the entire prefix is just \"/\".");
  }
  if (route_prefix.find_first_of("{}") != std::string_view::npos) {
    return BadPrefix(route_prefix,
                     "Route prefix cannot contain wildcards, so it cannot contain \"{\" or \"}\".");
  }
  return absl::OkStatus();
}

absl::Status CheckRoutePrefix(std::string_view app_name,
                              const std::optional<std::string>& route_prefix,
                              const std::vector<ApplicationRoute>& others) {
  if (!route_prefix.has_value()) return absl::OkStatus();
  if (absl::Status status = ValidateRoutePrefix(*route_prefix); !status.ok()) return status;
  for (const ApplicationRoute& other : others) {
    if (other.app_name == app_name || other.deleting || other.route_prefix != route_prefix) {
      continue;
    }
    return absl::AlreadyExistsError(
        absl::StrCat("Prefix ", *route_prefix, " is being used by application \"", other.app_name,
                     "\". Failed to deploy application \"", ToAbsl(app_name), "\"."));
  }
  return absl::OkStatus();
}

}  // namespace tessera::serve

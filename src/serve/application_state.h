// An application's status from its deployments' (docs/serve.md), and the rules of route
// prefixes, as Ray Serve's `application_state.py` and `schema.py` have them.
//
// Status: the deployment that ranks first decides (Ray's DEPLOYMENT_STATUS_RANKING_ORDER):
//   DEPLOY_FAILED                                   -> DEPLOY_FAILED, naming the failed ones
//   UNHEALTHY                                       -> UNHEALTHY, naming the unhealthy ones
//   UPDATING, or UP/DOWNSCALING from a config change -> DEPLOYING
//   HEALTHY, or UP/DOWNSCALING from autoscaling     -> RUNNING
// An application being deleted is DELETING whatever its deployments say.
//
// Route prefixes: a prefix starts with "/", does not end with "/" unless it is "/", and has no
// "{" or "}"; no two live applications share one (an application being deleted gives its
// prefix up). An application without a prefix (None) is not exposed over HTTP and never
// conflicts.
//
// Thread-safe: pure functions. Cost: linear in the deployments, or in the applications.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "serve/serve_states.h"

namespace tessera::serve {

struct ApplicationStatusInfo {
  ApplicationStatus status = ApplicationStatus::kNotStarted;
  std::string message;

  bool operator==(const ApplicationStatusInfo&) const = default;
};

// The status of an application whose deployments report `deployments`. With none (its
// deployments are still being built), DEPLOYING.
ApplicationStatusInfo ApplicationStatusFromDeployments(
    const std::vector<DeploymentStatusInfo>& deployments, bool deleting);

// OK, or InvalidArgument with Ray's words for the first rule `route_prefix` breaks.
absl::Status ValidateRoutePrefix(std::string_view route_prefix);

// Another application's route, for the uniqueness check.
struct ApplicationRoute {
  std::string app_name;
  std::optional<std::string> route_prefix;
  bool deleting = false;
};

// OK when `app_name` may take `route_prefix`: InvalidArgument when the prefix breaks a rule,
// AlreadyExists (Ray's words) when another live application in `others` holds it. `others`
// may include `app_name` itself (a redeploy): it is skipped.
absl::Status CheckRoutePrefix(std::string_view app_name,
                              const std::optional<std::string>& route_prefix,
                              const std::vector<ApplicationRoute>& others);

}  // namespace tessera::serve

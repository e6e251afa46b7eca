// The states of serving, with Ray Serve's words (docs/serve.md): a replica's, a deployment's (its
// status and the trigger that explains it), an application's and a proxy's, and the status a
// deployment reports (`serve.status()`'s per-deployment entry). Name(X) gives the word Ray
// shows ("RUNNING", "CONFIG_UPDATE_STARTED", ...), XFromName reads one back (nullopt for any
// other text: the words are case-sensitive, as Ray's enum values are).
//
// Thread-safe: values and pure functions. Cost: a name is a table lookup; reading one back
// compares against every word of its enum (at most ten).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace tessera::serve {

enum class ReplicaState {
  kStarting,          // its actor is being placed or constructed
  kUpdating,          // running `reconfigure` for a new user_config
  kRecovering,        // the controller restarted and is re-attaching to it
  kRunning,           // serving
  kStopping,          // draining and shutting down
  kPendingMigration,  // its node is draining; a replacement starts first
};

enum class DeploymentStatus {
  kUpdating,
  kHealthy,
  kUnhealthy,
  kUpscaling,
  kDownscaling,
  kDeployFailed,
};

// Why a deployment has its status.
enum class DeploymentStatusTrigger {
  kUnspecified,
  kConfigUpdateStarted,
  kConfigUpdateCompleted,
  kUpscaleCompleted,
  kDownscaleCompleted,
  kAutoscaling,
  kReplicaStartupFailed,
  kHealthCheckFailed,
  kInternalError,
  kDeleting,
};

enum class ApplicationStatus {
  kNotStarted,
  kDeploying,
  kDeployFailed,
  kRunning,
  kUnhealthy,
  kDeleting,
};

enum class ProxyStatus {
  kStarting,
  kHealthy,
  kUnhealthy,
  kDraining,
  kDrained,
};

std::string_view Name(ReplicaState state);
std::string_view Name(DeploymentStatus status);
std::string_view Name(DeploymentStatusTrigger trigger);
std::string_view Name(ApplicationStatus status);
std::string_view Name(ProxyStatus status);

std::optional<ReplicaState> ReplicaStateFromName(std::string_view name);
std::optional<DeploymentStatus> DeploymentStatusFromName(std::string_view name);
std::optional<DeploymentStatusTrigger> DeploymentStatusTriggerFromName(std::string_view name);
std::optional<ApplicationStatus> ApplicationStatusFromName(std::string_view name);
std::optional<ProxyStatus> ProxyStatusFromName(std::string_view name);

// One deployment's entry of `serve.status()`.
struct DeploymentStatusInfo {
  std::string name;
  DeploymentStatus status = DeploymentStatus::kUpdating;
  DeploymentStatusTrigger status_trigger = DeploymentStatusTrigger::kConfigUpdateStarted;
  std::string message;
  // Replicas by state word ("RUNNING": 2, ...); states with no replica are left out.
  std::map<std::string, int> replica_states;

  bool operator==(const DeploymentStatusInfo&) const = default;
};

}  // namespace tessera::serve

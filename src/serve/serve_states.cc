#include "serve/serve_states.h"

#include <array>
#include <cstddef>

namespace tessera::serve {
namespace {

// Each enum's words in its declaration order, so a value's word is the entry at its number.
constexpr std::array<std::string_view, 6> kReplicaStates = {
    "STARTING", "UPDATING", "RECOVERING", "RUNNING", "STOPPING", "PENDING_MIGRATION"};
constexpr std::array<std::string_view, 6> kDeploymentStatuses = {
    "UPDATING", "HEALTHY", "UNHEALTHY", "UPSCALING", "DOWNSCALING", "DEPLOY_FAILED"};
constexpr std::array<std::string_view, 10> kDeploymentStatusTriggers = {
    "UNSPECIFIED",
    "CONFIG_UPDATE_STARTED",
    "CONFIG_UPDATE_COMPLETED",
    "UPSCALE_COMPLETED",
    "DOWNSCALE_COMPLETED",
    "AUTOSCALING",
    "REPLICA_STARTUP_FAILED",
    "HEALTH_CHECK_FAILED",
    "INTERNAL_ERROR",
    "DELETING",
};
constexpr std::array<std::string_view, 6> kApplicationStatuses = {
    "NOT_STARTED", "DEPLOYING", "DEPLOY_FAILED", "RUNNING", "UNHEALTHY", "DELETING"};
constexpr std::array<std::string_view, 5> kProxyStatuses = {"STARTING", "HEALTHY", "UNHEALTHY",
                                                            "DRAINING", "DRAINED"};

// A word for every value: adding a value without its word fails here.
static_assert(kReplicaStates.size() == static_cast<size_t>(ReplicaState::kPendingMigration) + 1);
static_assert(kDeploymentStatuses.size() ==
              static_cast<size_t>(DeploymentStatus::kDeployFailed) + 1);
static_assert(kDeploymentStatusTriggers.size() ==
              static_cast<size_t>(DeploymentStatusTrigger::kDeleting) + 1);
static_assert(kApplicationStatuses.size() == static_cast<size_t>(ApplicationStatus::kDeleting) + 1);
static_assert(kProxyStatuses.size() == static_cast<size_t>(ProxyStatus::kDrained) + 1);

template <typename Enum, size_t N>
std::string_view WordOf(const std::array<std::string_view, N>& words, Enum value) {
  const auto index = static_cast<size_t>(value);
  return index < N ? words[index] : std::string_view("UNKNOWN");
}

template <typename Enum, size_t N>
std::optional<Enum> ValueOf(const std::array<std::string_view, N>& words, std::string_view name) {
  for (size_t i = 0; i < N; ++i) {
    if (words[i] == name) return static_cast<Enum>(i);
  }
  return std::nullopt;
}

}  // namespace

std::string_view Name(ReplicaState state) { return WordOf(kReplicaStates, state); }
std::string_view Name(DeploymentStatus status) { return WordOf(kDeploymentStatuses, status); }
std::string_view Name(DeploymentStatusTrigger trigger) {
  return WordOf(kDeploymentStatusTriggers, trigger);
}
std::string_view Name(ApplicationStatus status) { return WordOf(kApplicationStatuses, status); }
std::string_view Name(ProxyStatus status) { return WordOf(kProxyStatuses, status); }

std::optional<ReplicaState> ReplicaStateFromName(std::string_view name) {
  return ValueOf<ReplicaState>(kReplicaStates, name);
}
std::optional<DeploymentStatus> DeploymentStatusFromName(std::string_view name) {
  return ValueOf<DeploymentStatus>(kDeploymentStatuses, name);
}
std::optional<DeploymentStatusTrigger> DeploymentStatusTriggerFromName(std::string_view name) {
  return ValueOf<DeploymentStatusTrigger>(kDeploymentStatusTriggers, name);
}
std::optional<ApplicationStatus> ApplicationStatusFromName(std::string_view name) {
  return ValueOf<ApplicationStatus>(kApplicationStatuses, name);
}
std::optional<ProxyStatus> ProxyStatusFromName(std::string_view name) {
  return ValueOf<ProxyStatus>(kProxyStatuses, name);
}

}  // namespace tessera::serve

#include "serve/application_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "serve/serve_states.h"

namespace tessera::serve {
namespace {

DeploymentStatusInfo Deployment(
    std::string name, DeploymentStatus status,
    DeploymentStatusTrigger trigger = DeploymentStatusTrigger::kUnspecified) {
  DeploymentStatusInfo info;
  info.name = std::move(name);
  info.status = status;
  info.status_trigger = trigger;
  return info;
}

// --- Status ranking -------------------------------------------------------------------------

TEST(ApplicationStatus, AllHealthyIsRunning) {
  const ApplicationStatusInfo info = ApplicationStatusFromDeployments(
      {Deployment("a", DeploymentStatus::kHealthy), Deployment("b", DeploymentStatus::kHealthy)},
      false);
  EXPECT_EQ(info, (ApplicationStatusInfo{ApplicationStatus::kRunning, ""}));
}

TEST(ApplicationStatus, DeployFailedRanksFirstAndNamesTheFailedDeployments) {
  const ApplicationStatusInfo info =
      ApplicationStatusFromDeployments({Deployment("a", DeploymentStatus::kUnhealthy),
                                        Deployment("b", DeploymentStatus::kDeployFailed),
                                        Deployment("c", DeploymentStatus::kUpdating),
                                        Deployment("d", DeploymentStatus::kDeployFailed)},
                                       false);
  EXPECT_EQ(info.status, ApplicationStatus::kDeployFailed);
  EXPECT_EQ(info.message, "Failed to update the deployments ['b', 'd'].");
}

TEST(ApplicationStatus, UnhealthyRanksAboveUpdating) {
  const ApplicationStatusInfo info = ApplicationStatusFromDeployments(
      {Deployment("a", DeploymentStatus::kUpdating), Deployment("b", DeploymentStatus::kUnhealthy)},
      false);
  EXPECT_EQ(info.status, ApplicationStatus::kUnhealthy);
  EXPECT_EQ(info.message, "The deployments ['b'] are UNHEALTHY.");
}

TEST(ApplicationStatus, UpdatingOrScalingFromAConfigChangeIsDeploying) {
  EXPECT_EQ(ApplicationStatusFromDeployments({Deployment("a", DeploymentStatus::kHealthy),
                                              Deployment("b", DeploymentStatus::kUpdating)},
                                             false)
                .status,
            ApplicationStatus::kDeploying);
  EXPECT_EQ(
      ApplicationStatusFromDeployments({Deployment("a", DeploymentStatus::kUpscaling,
                                                   DeploymentStatusTrigger::kConfigUpdateStarted)},
                                       false)
          .status,
      ApplicationStatus::kDeploying);
  EXPECT_EQ(
      ApplicationStatusFromDeployments({Deployment("a", DeploymentStatus::kDownscaling,
                                                   DeploymentStatusTrigger::kConfigUpdateStarted)},
                                       false)
          .status,
      ApplicationStatus::kDeploying);
}

TEST(ApplicationStatus, AutoscalingIsStillRunning) {
  EXPECT_EQ(
      ApplicationStatusFromDeployments(
          {Deployment("a", DeploymentStatus::kUpscaling, DeploymentStatusTrigger::kAutoscaling),
           Deployment("b", DeploymentStatus::kDownscaling, DeploymentStatusTrigger::kAutoscaling)},
          false)
          .status,
      ApplicationStatus::kRunning);
}

TEST(ApplicationStatus, DeletingWinsAndNoDeploymentsYetIsDeploying) {
  EXPECT_EQ(ApplicationStatusFromDeployments({Deployment("a", DeploymentStatus::kUnhealthy)}, true)
                .status,
            ApplicationStatus::kDeleting);
  EXPECT_EQ(ApplicationStatusFromDeployments({}, false).status, ApplicationStatus::kDeploying);
}

// --- Route prefixes -------------------------------------------------------------------------

TEST(RoutePrefix, AcceptsRootAndPaths) {
  EXPECT_TRUE(ValidateRoutePrefix("/").ok());
  EXPECT_TRUE(ValidateRoutePrefix("/api").ok());
  EXPECT_TRUE(ValidateRoutePrefix("/api/v1").ok());
}

TEST(RoutePrefix, RejectsEachBrokenRuleWithRaysWords) {
  EXPECT_EQ(ValidateRoutePrefix("api").message(),
            "Got \"api\" for route_prefix. Route prefix must start with \"/\".");
  EXPECT_EQ(ValidateRoutePrefix("").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateRoutePrefix("/api/").message(),
            "Got \"/api/\" for route_prefix. Route prefix cannot end with \"/\" unless the "
            "entire prefix is just \"/\".");
  EXPECT_EQ(ValidateRoutePrefix("/api/{id}").message(),
            "Got \"/api/{id}\" for route_prefix. Route prefix cannot contain wildcards, so it "
            "cannot contain \"{\" or \"}\".");
  EXPECT_EQ(ValidateRoutePrefix("/a}").code(), absl::StatusCode::kInvalidArgument);
}

TEST(RoutePrefix, IsUniqueAcrossLiveApplications) {
  const std::vector<ApplicationRoute> others = {
      {.app_name = "one", .route_prefix = "/a"},
      {.app_name = "two", .route_prefix = "/b", .deleting = true},
      {.app_name = "three", .route_prefix = std::nullopt},
  };
  const absl::Status taken = CheckRoutePrefix("new", std::string("/a"), others);
  EXPECT_EQ(taken.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(taken.message(),
            "Prefix /a is being used by application \"one\". Failed to deploy application "
            "\"new\".");
  // The application itself (a redeploy), one being deleted, and no prefix never conflict.
  EXPECT_TRUE(CheckRoutePrefix("one", std::string("/a"), others).ok());
  EXPECT_TRUE(CheckRoutePrefix("new", std::string("/b"), others).ok());
  EXPECT_TRUE(CheckRoutePrefix("new", std::nullopt, others).ok());
  EXPECT_EQ(CheckRoutePrefix("new", std::string("/c/"), others).code(),
            absl::StatusCode::kInvalidArgument);
}

// --- The states' words ----------------------------------------------------------------------

TEST(ServeStates, NamesAreRaysWords) {
  EXPECT_EQ(Name(ReplicaState::kPendingMigration), "PENDING_MIGRATION");
  EXPECT_EQ(Name(DeploymentStatus::kDeployFailed), "DEPLOY_FAILED");
  EXPECT_EQ(Name(DeploymentStatusTrigger::kReplicaStartupFailed), "REPLICA_STARTUP_FAILED");
  EXPECT_EQ(Name(ApplicationStatus::kNotStarted), "NOT_STARTED");
  EXPECT_EQ(Name(ProxyStatus::kDrained), "DRAINED");
}

template <typename Enum>
void ExpectRoundTrip(int count, std::optional<Enum> (*from_name)(std::string_view)) {
  for (int i = 0; i < count; ++i) {
    const Enum value = static_cast<Enum>(i);
    EXPECT_EQ(from_name(Name(value)), value) << Name(value);
  }
  EXPECT_FALSE(from_name("running").has_value());  // the words are case-sensitive
  EXPECT_FALSE(from_name("NOT_A_STATE").has_value());
}

TEST(ServeStates, EveryNameReadsBack) {
  ExpectRoundTrip<ReplicaState>(6, &ReplicaStateFromName);
  ExpectRoundTrip<DeploymentStatus>(6, &DeploymentStatusFromName);
  ExpectRoundTrip<DeploymentStatusTrigger>(10, &DeploymentStatusTriggerFromName);
  ExpectRoundTrip<ApplicationStatus>(6, &ApplicationStatusFromName);
  ExpectRoundTrip<ProxyStatus>(5, &ProxyStatusFromName);
}

}  // namespace
}  // namespace tessera::serve

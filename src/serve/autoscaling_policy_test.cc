#include "serve/autoscaling_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace tessera::serve {
namespace {

using ::testing::HasSubstr;

const absl::Time kStart = absl::FromUnixSeconds(1'700'000'000);

absl::Time At(double seconds) { return kStart + absl::Seconds(seconds); }

AutoscalingInput In(int running, int target, double total, absl::Time now) {
  return AutoscalingInput{.running_replicas = running,
                          .target_replicas = target,
                          .total_ongoing_requests = total,
                          .now = now};
}

AutoscalingConfig Config(int min, int max) {
  AutoscalingConfig config;
  config.min_replicas = min;
  config.max_replicas = max;
  return config;
}

AutoscalingConfig NoDelays(int min, int max) {
  AutoscalingConfig config = Config(min, max);
  config.upscale_delay_s = 0;
  config.downscale_delay_s = 0;
  return config;
}

// --- Step 1: cold start ---------------------------------------------------------------------

TEST(AutoscalingDecider, ColdStartWithQueuedRequestsScalesAtOnce) {
  AutoscalingDecider decider(Config(0, 10));  // upscale_delay_s 30 is not waited for
  EXPECT_EQ(decider.Decide(In(0, 0, 5, At(0))), 1);
}

TEST(AutoscalingDecider, ColdStartTakesTheCeilingOfTheUpscalingFactor) {
  AutoscalingConfig config = Config(0, 10);
  config.upscaling_factor = 2.5;
  AutoscalingDecider decider(config);
  EXPECT_EQ(decider.Decide(In(0, 0, 1, At(0))), 3);
  // A target already above it stands.
  EXPECT_EQ(decider.Decide(In(0, 4, 1, At(0))), 4);
}

TEST(AutoscalingDecider, NoReplicasAndNoRequestsKeepsTheTarget) {
  AutoscalingDecider decider(Config(0, 10));
  EXPECT_EQ(decider.Decide(In(0, 0, 0, At(0))), 0);
  // Replicas still starting (none running yet) are not scaled down meanwhile.
  EXPECT_EQ(decider.Decide(In(0, 3, 0, At(1000))), 3);
}

// --- Step 2: the desired count --------------------------------------------------------------

TEST(AutoscalingDecider, ScalesToTheRatioOfOngoingToTargetRequests) {
  AutoscalingDecider decider(NoDelays(1, 10));
  // 10 ongoing over 2 replicas that should hold 2 each: 5 replicas.
  EXPECT_EQ(decider.Decide(In(2, 2, 10, At(0))), 5);
  EXPECT_EQ(decider.last_desired(), 5);
  // 3 ongoing over 4: ceil(1.5) = 2.
  EXPECT_EQ(decider.Decide(In(4, 4, 3, At(0))), 2);
}

TEST(AutoscalingDecider, GainAppliesToTheDifferenceFromTheCurrentCount) {
  AutoscalingConfig config = NoDelays(1, 20);
  config.upscaling_factor = 0.5;
  AutoscalingDecider decider(config);
  // Desired 10 from 2: 2 + 0.5 × 8 = 6.
  EXPECT_EQ(decider.Decide(In(2, 2, 20, At(0))), 6);
  EXPECT_EQ(decider.Decide(In(4, 4, 9, At(0))), 5);  // desired 4.5: 4 + 0.25 → 5
}

TEST(AutoscalingDecider, SmallDownscalingFactorStillStepsDownByOne) {
  AutoscalingConfig config = NoDelays(1, 10);
  config.downscaling_factor = 0.1;
  AutoscalingDecider decider(config);
  // Desired 4 from 5: 5 − 0.1 rounds back up to 5, so the nudge makes it 4.
  EXPECT_EQ(decider.Decide(In(5, 5, 8, At(0))), 4);
}

TEST(AutoscalingDecider, SmallUpscalingFactorStillStepsUpByOne) {
  AutoscalingConfig config = NoDelays(1, 10);
  config.upscaling_factor = 0.1;
  AutoscalingDecider decider(config);
  // Desired 4.5 from 4: 4 + 0.05 rounds up to 5.
  EXPECT_EQ(decider.Decide(In(4, 4, 9, At(0))), 5);
}

TEST(AutoscalingDecider, NoNudgeWhenTheWishRoundsToTheCurrentCount) {
  AutoscalingConfig config = NoDelays(1, 10);
  config.downscaling_factor = 0.1;
  AutoscalingDecider decider(config);
  // Desired 4.5 from 5: ceil(4.5) is not below 5, so it stays.
  EXPECT_EQ(decider.Decide(In(5, 5, 9, At(0))), 5);
}

TEST(AutoscalingDecider, ClampsToMinAndMax) {
  AutoscalingDecider decider(NoDelays(2, 4));
  EXPECT_EQ(decider.Decide(In(2, 2, 100, At(0))), 4);
  EXPECT_EQ(decider.Decide(In(3, 3, 0, At(0))), 2);
}

// --- Step 3: delays in wall-clock time ------------------------------------------------------

TEST(AutoscalingDecider, UpscaleWaitsUpscaleDelayOfWallClockTime) {
  AutoscalingDecider decider(Config(1, 10));  // upscale_delay_s 30
  EXPECT_EQ(decider.Decide(In(2, 2, 10, At(0))), 2);
  EXPECT_EQ(decider.Decide(In(2, 2, 10, At(29.9))), 2);
  EXPECT_EQ(decider.Decide(In(2, 2, 10, At(30))), 5);
}

TEST(AutoscalingDecider, DelayCountsTimeNotDecisions) {
  // Two decisions 30 s apart are enough (counting control loops would need 300).
  AutoscalingDecider decider(Config(1, 10));
  EXPECT_EQ(decider.Decide(In(2, 2, 10, At(0))), 2);
  EXPECT_EQ(decider.Decide(In(2, 2, 10, At(30))), 5);
}

TEST(AutoscalingDecider, OppositeDecisionRestartsTheWait) {
  AutoscalingConfig config = Config(1, 10);
  config.downscale_delay_s = 30;
  AutoscalingDecider decider(config);
  EXPECT_EQ(decider.Decide(In(3, 3, 12, At(0))), 3);   // up (6) starts waiting
  EXPECT_EQ(decider.Decide(In(3, 3, 2, At(20))), 3);   // down (1): the up wait is gone
  EXPECT_EQ(decider.Decide(In(3, 3, 12, At(40))), 3);  // up again, from 40 s
  EXPECT_EQ(decider.Decide(In(3, 3, 12, At(69))), 3);
  EXPECT_EQ(decider.Decide(In(3, 3, 12, At(70))), 6);
}

TEST(AutoscalingDecider, DecisionToStayRestartsTheWait) {
  AutoscalingDecider decider(Config(1, 10));
  EXPECT_EQ(decider.Decide(In(3, 3, 12, At(0))), 3);
  EXPECT_EQ(decider.Decide(In(3, 3, 6, At(10))), 3);  // exactly on target
  EXPECT_EQ(decider.Decide(In(3, 3, 12, At(35))), 3);
  EXPECT_EQ(decider.Decide(In(3, 3, 12, At(65))), 6);
}

TEST(AutoscalingDecider, DownscaleWaitsDownscaleDelay) {
  AutoscalingDecider decider(Config(1, 10));  // downscale_delay_s 600
  EXPECT_EQ(decider.Decide(In(4, 4, 2, At(0))), 4);
  EXPECT_EQ(decider.Decide(In(4, 4, 2, At(599))), 4);
  EXPECT_EQ(decider.Decide(In(4, 4, 2, At(600))), 1);
}

TEST(AutoscalingDecider, ScalingToZeroTakesTwoStages) {
  AutoscalingConfig config = Config(0, 10);
  config.downscale_to_zero_delay_s = 60;
  AutoscalingDecider decider(config);
  // From 3 with nothing to do: down to 1 (not 0) after downscale_delay_s.
  EXPECT_EQ(decider.Decide(In(3, 3, 0, At(0))), 3);
  EXPECT_EQ(decider.Decide(In(3, 3, 0, At(600))), 1);
  // From 1 to 0 after downscale_to_zero_delay_s, counted from the first 1 → 0 decision.
  EXPECT_EQ(decider.Decide(In(1, 1, 0, At(601))), 1);
  EXPECT_EQ(decider.Decide(In(1, 1, 0, At(660))), 1);
  EXPECT_EQ(decider.Decide(In(1, 1, 0, At(661))), 0);
}

TEST(AutoscalingDecider, ZeroWithoutItsOwnDelayWaitsTheDownscaleDelay) {
  AutoscalingDecider decider(Config(0, 10));
  EXPECT_EQ(decider.Decide(In(1, 1, 0, At(0))), 1);
  EXPECT_EQ(decider.Decide(In(1, 1, 0, At(599))), 1);
  EXPECT_EQ(decider.Decide(In(1, 1, 0, At(600))), 0);
}

// --- target_capacity ------------------------------------------------------------------------

TEST(CapacityAdjustedReplicas, ScalesAndRoundsHalfUpAsRayDoes) {
  EXPECT_EQ(CapacityAdjustedReplicas(10, std::nullopt), 10);
  EXPECT_EQ(CapacityAdjustedReplicas(10, 100.0), 10);
  EXPECT_EQ(CapacityAdjustedReplicas(10, 0.0), 0);
  EXPECT_EQ(CapacityAdjustedReplicas(0, 50.0), 0);
  EXPECT_EQ(CapacityAdjustedReplicas(3, 50.0), 2);   // 1.5 → 2
  EXPECT_EQ(CapacityAdjustedReplicas(7, 35.0), 2);   // 2.45 → 2
  EXPECT_EQ(CapacityAdjustedReplicas(5, 10.0), 1);   // 0.5 → 1
  EXPECT_EQ(CapacityAdjustedReplicas(1, 10.0), 1);   // 0.1 → 0, but at least 1
  EXPECT_EQ(CapacityAdjustedReplicas(10, 25.0), 3);  // 2.5 → 3
}

TEST(AutoscalingDecider, TargetCapacityScalesTheBounds) {
  AutoscalingDecider decider(NoDelays(2, 10), TargetCapacity{.percent = 50.0});
  EXPECT_EQ(decider.LowerBound(), 1);
  EXPECT_EQ(decider.UpperBound(), 5);
  EXPECT_EQ(decider.Decide(In(2, 2, 100, At(0))), 5);
}

TEST(AutoscalingDecider, CapacityGoingUpFloorsAtInitialReplicas) {
  AutoscalingConfig config = NoDelays(1, 10);
  config.initial_replicas = 6;
  AutoscalingDecider rising(config, TargetCapacity{50.0, TargetCapacityDirection::kUp});
  EXPECT_EQ(rising.LowerBound(), 3);
  AutoscalingDecider falling(config, TargetCapacity{50.0, TargetCapacityDirection::kDown});
  EXPECT_EQ(falling.LowerBound(), 1);
}

// --- The config -----------------------------------------------------------------------------

TEST(AutoscalingConfig, DefaultsAreRays) {
  const AutoscalingConfig config;
  EXPECT_EQ(config.min_replicas, 1);
  EXPECT_EQ(config.max_replicas, 1);
  EXPECT_FALSE(config.initial_replicas.has_value());
  EXPECT_EQ(config.target_ongoing_requests, 2.0);
  EXPECT_EQ(config.look_back_period_s, 30.0);
  EXPECT_EQ(config.upscale_delay_s, 30.0);
  EXPECT_EQ(config.downscale_delay_s, 600.0);
  EXPECT_EQ(config.aggregation_function, "mean");
  EXPECT_EQ(config.UpscalingFactor(), 1.0);
  EXPECT_EQ(config.DownscalingFactor(), 1.0);
  EXPECT_TRUE(config.Validate().ok());
}

TEST(AutoscalingConfig, AutoNumReplicasDefaults) {
  const AutoscalingConfig config = AutoscalingConfig::AutoDefault();
  EXPECT_EQ(config.min_replicas, 1);
  EXPECT_EQ(config.max_replicas, 100);
  EXPECT_EQ(config.target_ongoing_requests, 2.0);
  EXPECT_TRUE(config.Validate().ok());
}

TEST(AutoscalingConfig, FactorsFallBackThroughTheDeprecatedOnes) {
  AutoscalingConfig config;
  config.smoothing_factor = 2;
  EXPECT_EQ(config.UpscalingFactor(), 2);
  config.upscale_smoothing_factor = 3;
  EXPECT_EQ(config.UpscalingFactor(), 3);
  config.upscaling_factor = 4;
  EXPECT_EQ(config.UpscalingFactor(), 4);
  config.downscale_smoothing_factor = 0.5;
  EXPECT_EQ(config.DownscalingFactor(), 0.5);
}

struct BadConfig {
  std::string name;
  void (*change)(AutoscalingConfig&);
  std::string message;
};

TEST(AutoscalingConfig, ValidateNamesTheFieldInOneLine) {
  const BadConfig cases[] = {
      {"negative min", [](AutoscalingConfig& c) { c.min_replicas = -1; },
       "autoscaling_config.min_replicas must be 0 or more, got -1"},
      {"zero max", [](AutoscalingConfig& c) { c.max_replicas = 0; },
       "autoscaling_config.max_replicas must be 1 or more, got 0"},
      {"max below min",
       [](AutoscalingConfig& c) {
         c.min_replicas = 3;
         c.max_replicas = 2;
       },
       "autoscaling_config.max_replicas (2) must be greater than or equal to min_replicas (3)"},
      {"initial below min",
       [](AutoscalingConfig& c) {
         c.min_replicas = 2;
         c.max_replicas = 5;
         c.initial_replicas = 1;
       },
       "autoscaling_config.min_replicas (2) must be less than or equal to initial_replicas (1)"},
      {"initial above max",
       [](AutoscalingConfig& c) {
         c.max_replicas = 5;
         c.initial_replicas = 6;
       },
       "autoscaling_config.max_replicas (5) must be greater than or equal to initial_replicas "
       "(6)"},
      {"zero target", [](AutoscalingConfig& c) { c.target_ongoing_requests = 0; },
       "autoscaling_config.target_ongoing_requests must be greater than 0, got 0"},
      {"zero look back", [](AutoscalingConfig& c) { c.look_back_period_s = 0; },
       "autoscaling_config.look_back_period_s must be greater than 0, got 0"},
      {"NaN factor",
       [](AutoscalingConfig& c) { c.upscaling_factor = std::numeric_limits<double>::quiet_NaN(); },
       "autoscaling_config.upscaling_factor must be greater than 0, got nan"},
      {"negative delay", [](AutoscalingConfig& c) { c.downscale_delay_s = -1; },
       "autoscaling_config.downscale_delay_s must be 0 or more, got -1"},
      {"negative zero delay", [](AutoscalingConfig& c) { c.downscale_to_zero_delay_s = -5; },
       "autoscaling_config.downscale_to_zero_delay_s must be 0 or more, got -5"},
      {"unknown aggregation", [](AutoscalingConfig& c) { c.aggregation_function = "avg"; },
       "autoscaling_config.aggregation_function must be one of mean, max, min, got \"avg\""},
  };
  for (const BadConfig& bad : cases) {
    AutoscalingConfig config;
    bad.change(config);
    const absl::Status status = config.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad.name;
    EXPECT_EQ(status.message(), bad.message) << bad.name;
  }
}

// --- The signal -----------------------------------------------------------------------------

TEST(AutoscalingMetrics, SumsEachSourcesMeanOverTheWindow) {
  AutoscalingMetrics metrics(absl::Seconds(30));
  ASSERT_TRUE(metrics.Record("handle-a", At(0), 2).ok());
  ASSERT_TRUE(metrics.Record("handle-a", At(10), 4).ok());
  ASSERT_TRUE(metrics.Record("handle-b", At(5), 1).ok());
  EXPECT_DOUBLE_EQ(metrics.TotalOngoing(At(20)), 3 + 1);
}

TEST(AutoscalingMetrics, SamplesOlderThanTheWindowDropOut) {
  AutoscalingMetrics metrics(absl::Seconds(30));
  ASSERT_TRUE(metrics.Record("handle-a", At(0), 10).ok());
  ASSERT_TRUE(metrics.Record("handle-a", At(20), 2).ok());
  EXPECT_DOUBLE_EQ(metrics.TotalOngoing(At(29)), 6);
  EXPECT_DOUBLE_EQ(metrics.TotalOngoing(At(31)), 2);  // the sample at 0 is out
}

TEST(AutoscalingMetrics, ASourceThatStoppedReportingIsForgotten) {
  AutoscalingMetrics metrics(absl::Seconds(30));
  ASSERT_TRUE(metrics.Record("replica-1", At(0), 3).ok());
  ASSERT_TRUE(metrics.Record("replica-2", At(25), 1).ok());
  EXPECT_DOUBLE_EQ(metrics.TotalOngoing(At(40)), 1);
  EXPECT_EQ(metrics.source_count(), 1u);
  metrics.Forget("replica-2");
  EXPECT_EQ(metrics.source_count(), 0u);
}

TEST(AutoscalingMetrics, LateSamplesKeepTheirPlace) {
  AutoscalingMetrics metrics(absl::Seconds(30));
  ASSERT_TRUE(metrics.Record("handle-a", At(20), 4).ok());
  ASSERT_TRUE(metrics.Record("handle-a", At(5), 100).ok());  // arrives late, and is old
  ASSERT_TRUE(metrics.Record("handle-a", At(25), 2).ok());
  EXPECT_DOUBLE_EQ(metrics.TotalOngoing(At(36)), 3);  // the late one left the window first
}

TEST(AutoscalingMetrics, BadSamplesAreRejectedAndNotKept) {
  AutoscalingMetrics metrics(absl::Seconds(30));
  EXPECT_EQ(metrics.Record("", At(0), 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(metrics.Record("h", At(0), -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(metrics.Record("h", At(0), std::nan("")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(metrics.Record("h", At(0), -1).message()), HasSubstr("\"h\""));
  EXPECT_EQ(metrics.source_count(), 0u);
  EXPECT_EQ(metrics.TotalOngoing(At(1)), 0);
}

}  // namespace
}  // namespace tessera::serve

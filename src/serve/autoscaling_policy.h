// Autoscaling of one deployment (docs/serve.md), as Ray Serve's default policy does it:
//
//   AutoscalingConfig     every option of Ray's `AutoscalingConfig`, with its default, and the
//                         checks Ray makes (Validate: InvalidArgument, one line naming the field)
//   AutoscalingMetrics    the signal: samples of ongoing (queued + running) requests per source
//                         (a handle or a replica), kept for look_back_period_s; the total is the
//                         sum over sources of each source's mean in that window
//   AutoscalingDecider    the decision: from the running replicas R, the total ongoing requests N
//                         and the current target, the new target
//
// The decision (Ray's `autoscaling_policy.py`, newest rules):
//   1. R = 0 (cold start): N > 0 gives max(ceil(upscaling_factor), target) at once, with no
//      delay; N = 0 keeps the target.
//   2. ratio = N / (target_ongoing_requests × R), desired = R × ratio, and the gain applied to
//      the difference: ceil(R + f × (desired − R)), f the upscaling factor when desired > R
//      and the downscaling factor otherwise; when ceil(desired) < R but the gain leaves R
//      unchanged, one fewer (so a small factor still gets down). Clamped to [min, max] after
//      target_capacity (CapacityAdjustedReplicas).
//   3. A change waits in wall-clock time: scale up once upscale_delay_s have passed since the
//      first of an unbroken run of up decisions, down after downscale_delay_s
//      (downscale_to_zero_delay_s, when set, for 1 → 0). A decision the other way, or one to
//      stay, starts the wait again. A downscale to a non-zero count never goes below 1: 0 is
//      reached from 1 only, so scaling to zero takes two waits.
//
// Threading: values and single-owner objects, not thread-safe: the controller's one lock guards
// each deployment's (DeploymentStateMachine holds one of each). Everything is pure: times are
// passed in. Cost: Decide is O(1); Record is O(1) for a sample in time order (a late one is
// put in its place: O(samples of its source)); TotalOngoing is O(samples kept), each sample
// dropped once.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"

namespace tessera::serve {

// The policy Ray runs unless a deployment names another (Tessera's module path).
inline constexpr std::string_view kDefaultAutoscalingPolicy =
    "tessera.serve.autoscaling_policy:default_autoscaling_policy";

struct AutoscalingConfig {
  int min_replicas = 1;                            // >= 0
  std::optional<int> initial_replicas;             // unset: min_replicas; min <= initial <= max
  int max_replicas = 1;                            // >= 1, >= min_replicas
  double target_ongoing_requests = 2.0;            // > 0
  double metrics_interval_s = 10.0;                // > 0; deprecated, kept for configs that set it
  double look_back_period_s = 30.0;                // > 0
  double smoothing_factor = 1.0;                   // > 0; deprecated
  std::optional<double> upscale_smoothing_factor;  // > 0; deprecated
  std::optional<double> downscale_smoothing_factor;  // > 0; deprecated
  std::optional<double> upscaling_factor;            // > 0; unset: the smoothing factors
  std::optional<double> downscaling_factor;          // > 0
  double upscale_delay_s = 30.0;                     // >= 0
  double downscale_delay_s = 600.0;                  // >= 0
  std::optional<double> downscale_to_zero_delay_s;   // >= 0; unset: downscale_delay_s
  std::string aggregation_function = "mean";         // "mean" | "max" | "min"
  // A policy other than the default is run by the host (a user function); Decide is the
  // default policy.
  std::string policy_function = std::string(kDefaultAutoscalingPolicy);

  bool operator==(const AutoscalingConfig&) const = default;

  // What `num_replicas="auto"` starts from (Ray's AutoscalingConfig.default()): min 1, max 100,
  // target_ongoing_requests 2; the user's autoscaling_config keys are laid over it by the caller.
  static AutoscalingConfig AutoDefault();

  // OK, or InvalidArgument naming the first field that breaks a rule above (NaN breaks every
  // rule).
  absl::Status Validate() const;

  // The factor applied to an upscale: upscaling_factor, else upscale_smoothing_factor, else
  // smoothing_factor (as Ray's get_upscaling_factor); likewise for a downscale.
  double UpscalingFactor() const;
  double DownscalingFactor() const;
};

// Which way the cluster's target_capacity last moved (Ray's TargetCapacityDirection): while it
// goes up, an autoscaling deployment's floor is its initial_replicas rather than min_replicas.
enum class TargetCapacityDirection { kUnset, kUp, kDown };

// `target_capacity` (0 to 100 percent of every deployment's replica counts; unset: 100).
struct TargetCapacity {
  std::optional<double> percent;
  TargetCapacityDirection direction = TargetCapacityDirection::kUnset;

  bool operator==(const TargetCapacity&) const = default;
};

// `num_replicas` scaled by `target_capacity_percent` as Ray does it: unset or 100 leaves it;
// 0 (or num_replicas 0) gives 0; otherwise num_replicas × percent / 100 rounded half up, and at
// least 1.
int CapacityAdjustedReplicas(int num_replicas, std::optional<double> target_capacity_percent);

// The autoscaling signal of one deployment.
class AutoscalingMetrics {
 public:
  explicit AutoscalingMetrics(absl::Duration look_back = absl::Seconds(30));

  void set_look_back(absl::Duration look_back) { look_back_ = look_back; }

  // One sample of `ongoing_requests` (queued + running) seen by `source` at `time`.
  // InvalidArgument, and nothing kept, for an empty source or a negative or NaN count.
  absl::Status Record(std::string_view source, absl::Time time, double ongoing_requests);

  // The sum over sources of each source's mean over the samples taken after now − look_back.
  // Samples older than that are dropped, and a source left with none is forgotten (it stopped
  // reporting a window ago).
  double TotalOngoing(absl::Time now);

  // Forgets a source at once (a replica that stopped).
  void Forget(std::string_view source);
  void Clear() { sources_.clear(); }
  size_t source_count() const { return sources_.size(); }

 private:
  struct Sample {
    absl::Time time;
    double value = 0;
  };

  absl::Duration look_back_;
  absl::flat_hash_map<std::string, std::deque<Sample>> sources_;  // each in time order
};

// What one decision looks at.
struct AutoscalingInput {
  int running_replicas = 0;           // R: RUNNING replicas, any version
  int target_replicas = 0;            // the deployment's target now
  double total_ongoing_requests = 0;  // N: AutoscalingMetrics::TotalOngoing
  absl::Time now;
};

// The default policy with its delays. The config must be valid (AutoscalingConfig::Validate).
class AutoscalingDecider {
 public:
  explicit AutoscalingDecider(AutoscalingConfig config, TargetCapacity capacity = {});

  // The new target (== input.target_replicas while a change waits out its delay). Every call
  // is one decision: a run of same-direction decisions measures its delay from its first call.
  int Decide(const AutoscalingInput& input);

  // The last decision's count before its delay and before clamping (the policy's own
  // wish): what the "desired replicas" gauge shows.
  int last_desired() const { return last_desired_; }

  // [LowerBound, UpperBound]: min and max after target_capacity; while capacity goes up, the
  // floor is initial_replicas (when set) after target_capacity.
  int LowerBound() const;
  int UpperBound() const;
  int ApplyBounds(int replicas) const;
  bool IsWithinBounds(int replicas) const { return ApplyBounds(replicas) == replicas; }

  const AutoscalingConfig& config() const { return config_; }

 private:
  enum class Direction { kNone, kUp, kDown };

  // Step 2: the wish for R > 0 replicas, clamped.
  int Desired(const AutoscalingInput& input);
  // Step 3: `desired` once its wait is over, else the current target.
  int AfterDelay(int desired, int target, absl::Time now);

  AutoscalingConfig config_;
  TargetCapacity capacity_;
  Direction waiting_ = Direction::kNone;
  absl::Time waiting_since_ = absl::InfinitePast();
  int last_desired_ = 0;
};

}  // namespace tessera::serve

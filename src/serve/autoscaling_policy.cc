#include "serve/autoscaling_policy.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/string_util.h"

namespace tessera::serve {
namespace {

// Counts far past any cluster's replicas: a huge or infinite wish is clamped here before it
// becomes an int, and then by max_replicas.
constexpr double kCountLimit = 1 << 30;

int CeilToInt(double value) {
  return static_cast<int>(std::clamp(std::ceil(value), -kCountLimit, kCountLimit));
}

// NaN fails every comparison, so each rule is written as "not (the rule holds)".
absl::Status GreaterThanZero(std::string_view field, double value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("autoscaling_config.", ToAbsl(field), " must be greater than 0, got ", value));
}

absl::Status NotNegative(std::string_view field, double value) {
  if (value >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("autoscaling_config.", ToAbsl(field), " must be 0 or more, got ", value));
}

absl::Status CheckReplicaCounts(const AutoscalingConfig& config) {
  if (config.min_replicas < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "autoscaling_config.min_replicas must be 0 or more, got ", config.min_replicas));
  }
  if (config.max_replicas < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "autoscaling_config.max_replicas must be 1 or more, got ", config.max_replicas));
  }
  if (config.max_replicas < config.min_replicas) {
    return absl::InvalidArgumentError(absl::StrCat(
        "autoscaling_config.max_replicas (", config.max_replicas,
        ") must be greater than or equal to min_replicas (", config.min_replicas, ")"));
  }
  if (!config.initial_replicas.has_value()) return absl::OkStatus();
  const int initial = *config.initial_replicas;
  if (initial < config.min_replicas) {
    return absl::InvalidArgumentError(
        absl::StrCat("autoscaling_config.min_replicas (", config.min_replicas,
                     ") must be less than or equal to initial_replicas (", initial, ")"));
  }
  if (initial > config.max_replicas) {
    return absl::InvalidArgumentError(
        absl::StrCat("autoscaling_config.max_replicas (", config.max_replicas,
                     ") must be greater than or equal to initial_replicas (", initial, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckOptionalGreaterThanZero(std::string_view field, std::optional<double> value) {
  return value.has_value() ? GreaterThanZero(field, *value) : absl::OkStatus();
}

absl::Status CheckFactorsAndTimes(const AutoscalingConfig& config) {
  const std::pair<std::string_view, double> positive[] = {
      {"target_ongoing_requests", config.target_ongoing_requests},
      {"metrics_interval_s", config.metrics_interval_s},
      {"look_back_period_s", config.look_back_period_s},
      {"smoothing_factor", config.smoothing_factor},
  };
  for (const auto& [field, value] : positive) {
    if (absl::Status status = GreaterThanZero(field, value); !status.ok()) return status;
  }
  const std::pair<std::string_view, std::optional<double>> optional_positive[] = {
      {"upscale_smoothing_factor", config.upscale_smoothing_factor},
      {"downscale_smoothing_factor", config.downscale_smoothing_factor},
      {"upscaling_factor", config.upscaling_factor},
      {"downscaling_factor", config.downscaling_factor},
  };
  for (const auto& [field, value] : optional_positive) {
    if (absl::Status status = CheckOptionalGreaterThanZero(field, value); !status.ok()) {
      return status;
    }
  }
  if (absl::Status status = NotNegative("upscale_delay_s", config.upscale_delay_s); !status.ok()) {
    return status;
  }
  if (absl::Status status = NotNegative("downscale_delay_s", config.downscale_delay_s);
      !status.ok()) {
    return status;
  }
  if (config.downscale_to_zero_delay_s.has_value()) {
    return NotNegative("downscale_to_zero_delay_s", *config.downscale_to_zero_delay_s);
  }
  return absl::OkStatus();
}

}  // namespace

AutoscalingConfig AutoscalingConfig::AutoDefault() {
  AutoscalingConfig config;
  config.min_replicas = 1;
  config.max_replicas = 100;
  config.target_ongoing_requests = 2.0;
  return config;
}

absl::Status AutoscalingConfig::Validate() const {
  if (absl::Status status = CheckReplicaCounts(*this); !status.ok()) return status;
  if (absl::Status status = CheckFactorsAndTimes(*this); !status.ok()) return status;
  if (aggregation_function != "mean" && aggregation_function != "max" &&
      aggregation_function != "min") {
    return absl::InvalidArgumentError(
        absl::StrCat("autoscaling_config.aggregation_function must be one of mean, max, min, got ",
                     Quote(aggregation_function)));
  }
  if (policy_function.empty()) {
    return absl::InvalidArgumentError("autoscaling_config.policy_function must not be empty");
  }
  return absl::OkStatus();
}

double AutoscalingConfig::UpscalingFactor() const {
  if (upscaling_factor.has_value()) return *upscaling_factor;
  return upscale_smoothing_factor.value_or(smoothing_factor);
}

double AutoscalingConfig::DownscalingFactor() const {
  if (downscaling_factor.has_value()) return *downscaling_factor;
  return downscale_smoothing_factor.value_or(smoothing_factor);
}

int CapacityAdjustedReplicas(int num_replicas, std::optional<double> target_capacity_percent) {
  if (!target_capacity_percent.has_value() || *target_capacity_percent == 100) {
    return num_replicas;
  }
  if (*target_capacity_percent == 0 || num_replicas == 0) return 0;
  // Ray rounds the exact decimal quotient half up; deciding on the remainder of the product
  // (rather than rounding product / 100) keeps a quotient just under .5 from rounding up.
  const double product = num_replicas * *target_capacity_percent;
  double whole = std::floor(product / 100);
  if (product - whole * 100 >= 50) whole += 1;
  return std::max(1, CeilToInt(whole));
}

AutoscalingMetrics::AutoscalingMetrics(absl::Duration look_back) : look_back_(look_back) {}

absl::Status AutoscalingMetrics::Record(std::string_view source, absl::Time time,
                                        double ongoing_requests) {
  if (source.empty()) {
    return absl::InvalidArgumentError("an autoscaling sample needs a source (a handle or replica)");
  }
  if (!(ongoing_requests >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("autoscaling sample from ", Quote(source),
                                                   ": ongoing requests must be 0 or more, got ",
                                                   ongoing_requests));
  }
  std::deque<Sample>& samples = sources_[std::string(source)];
  const Sample sample{time, ongoing_requests};
  if (samples.empty() || samples.back().time <= time) {
    samples.push_back(sample);
  } else {
    // A late sample (pushes from one source can arrive out of order): kept in time order so
    // the oldest are always at the front.
    auto later = std::upper_bound(samples.begin(), samples.end(), time,
                                  [](absl::Time t, const Sample& s) { return t < s.time; });
    samples.insert(later, sample);
  }
  return absl::OkStatus();
}

double AutoscalingMetrics::TotalOngoing(absl::Time now) {
  const absl::Time cutoff = now - look_back_;
  double total = 0;
  for (auto it = sources_.begin(); it != sources_.end();) {
    std::deque<Sample>& samples = it->second;
    while (!samples.empty() && samples.front().time <= cutoff) samples.pop_front();
    if (samples.empty()) {
      sources_.erase(it++);
      continue;
    }
    double sum = 0;
    for (const Sample& sample : samples) sum += sample.value;
    total += sum / static_cast<double>(samples.size());
    ++it;
  }
  return total;
}

void AutoscalingMetrics::Forget(std::string_view source) { sources_.erase(ToAbsl(source)); }

AutoscalingDecider::AutoscalingDecider(AutoscalingConfig config, TargetCapacity capacity)
    : config_(std::move(config)), capacity_(capacity) {}

int AutoscalingDecider::LowerBound() const {
  if (config_.initial_replicas.has_value() && capacity_.direction == TargetCapacityDirection::kUp) {
    return CapacityAdjustedReplicas(*config_.initial_replicas, capacity_.percent);
  }
  return CapacityAdjustedReplicas(config_.min_replicas, capacity_.percent);
}

int AutoscalingDecider::UpperBound() const {
  return CapacityAdjustedReplicas(config_.max_replicas, capacity_.percent);
}

int AutoscalingDecider::ApplyBounds(int replicas) const {
  return std::max(LowerBound(), std::min(UpperBound(), replicas));
}

int AutoscalingDecider::Decide(const AutoscalingInput& input) {
  if (input.running_replicas <= 0) {
    // Cold start: requests are waiting at their callers and nothing serves them, so no delay.
    if (input.total_ongoing_requests > 0) {
      last_desired_ = std::max(CeilToInt(config_.UpscalingFactor()), input.target_replicas);
      return ApplyBounds(last_desired_);
    }
    // No replica runs yet (or any more) and nothing waits: the target stands. At a target of
    // 0 this is a decision to stay, which ends any wait.
    last_desired_ = input.target_replicas;
    if (input.target_replicas == 0) waiting_ = Direction::kNone;
    return ApplyBounds(input.target_replicas);
  }
  return ApplyBounds(AfterDelay(Desired(input), input.target_replicas, input.now));
}

int AutoscalingDecider::Desired(const AutoscalingInput& input) {
  const double running = input.running_replicas;
  const double ratio = input.total_ongoing_requests / (config_.target_ongoing_requests * running);
  const double desired = running * ratio;
  const double delta = desired - running;
  const double factor = delta > 0 ? config_.UpscalingFactor() : config_.DownscalingFactor();
  int scaled = CeilToInt(running + factor * delta);
  // A downscaling factor below 1 can leave a small drop rounded back up to R: step down by one
  // so that the deployment still gets down.
  if (CeilToInt(desired) < input.running_replicas && scaled == input.running_replicas) --scaled;
  last_desired_ = scaled;
  return ApplyBounds(scaled);
}

int AutoscalingDecider::AfterDelay(int desired, int target, absl::Time now) {
  const Direction direction = desired > target   ? Direction::kUp
                              : desired < target ? Direction::kDown
                                                 : Direction::kNone;
  if (direction != waiting_) {
    waiting_ = direction;
    waiting_since_ = now;
  }
  if (direction == Direction::kNone) return target;
  absl::Duration delay;
  if (direction == Direction::kUp) {
    delay = absl::Seconds(config_.upscale_delay_s);
  } else if (target == 1) {
    delay = absl::Seconds(config_.downscale_to_zero_delay_s.value_or(config_.downscale_delay_s));
  } else {
    // Zero only from one: a drop from more than one replica stops at one, and the last one
    // goes after its own wait.
    delay = absl::Seconds(config_.downscale_delay_s);
    desired = std::max(1, desired);
  }
  if (now - waiting_since_ < delay) return target;
  waiting_ = Direction::kNone;
  return desired;
}

}  // namespace tessera::serve

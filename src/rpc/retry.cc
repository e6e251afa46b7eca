#include "rpc/retry.h"

#include <algorithm>
#include <optional>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "rpc/auth.h"
#include "rpc/status_conversion.h"

namespace tessera::rpc {

bool IsRetryable(const grpc::Status& status) {
  const grpc::StatusCode code = status.error_code();
  return (code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED) &&
         !IsPeerAuthenticationFailure(status);
}

absl::Status CallWithRetry(const RetryOptions& options,
                           absl::FunctionRef<grpc::Status(grpc::ClientContext*)> attempt,
                           RetryStats* stats) {
  Clock* clock = options.clock != nullptr ? options.clock : Clock::Real();
  // Seeding a generator costs a system call: only a call that retries makes one.
  std::optional<absl::BitGen> bitgen;
  auto uniform = [&]() -> double {
    if (options.random) return options.random();
    if (!bitgen.has_value()) bitgen.emplace();
    return absl::Uniform<double>(*bitgen, 0.0, 1.0);
  };
  const absl::Time end = clock->Now() + options.total_budget;
  absl::Duration backoff = options.initial_backoff;
  RetryStats local;
  grpc::Status last;
  while (true) {
    absl::Duration remaining = end - clock->Now();
    absl::Duration timeout = std::min(options.attempt_timeout, remaining);
    if (local.attempts > 0 && timeout <= absl::ZeroDuration()) break;
    // The first attempt always runs, even with an empty budget, with a sane deadline.
    if (timeout <= absl::ZeroDuration()) timeout = options.attempt_timeout;
    ++local.attempts;
    grpc::ClientContext context;
    ConfigureClientContext(&context, timeout);
    last = attempt(&context);
    if (last.ok() || !IsRetryable(last)) break;
    double factor = 1.0 + options.jitter * (2.0 * uniform() - 1.0);
    absl::Duration wait = backoff * std::max(0.0, factor);
    remaining = end - clock->Now();
    if (remaining <= wait) break;  // nothing left for another attempt after this wait
    clock->SleepFor(wait);
    local.waited += wait;
    backoff = std::min(backoff * 2, options.max_backoff);
  }
  if (stats != nullptr) *stats = local;
  absl::Status status = FromGrpcStatus(last);
  if (!status.ok() && IsRetryable(last) && local.attempts > 1) {
    return absl::Status(status.code(),
                        absl::StrCat(status.message(), " (after ", local.attempts, " attempts)"));
  }
  return status;
}

}  // namespace tessera::rpc

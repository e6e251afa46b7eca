// Calling an RPC with retries: a deadline per attempt, and on UNAVAILABLE or DEADLINE_EXCEEDED a
// new attempt after an exponential backoff with jitter (50 ms doubling to 1 s), until an overall
// budget runs out. Only for calls that are idempotent by nature or carry a request_id
// (docs/cluster-runtime.md).
#pragma once

#include <cstdint>
#include <functional>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"

namespace tessera::rpc {

struct RetryOptions {
  absl::Duration attempt_timeout = absl::Seconds(2);
  // No attempt starts after the budget, and the last one's deadline is cut to it.
  absl::Duration total_budget = absl::Seconds(10);
  absl::Duration initial_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(1);
  // Each wait is backoff * (1 + u), u uniform in [-jitter, +jitter].
  double jitter = 0.2;
  Clock* clock = nullptr;  // nullptr: the real clock
  // Draws u's uniform source in [0, 1); nullptr: a per-call random generator. Tests pin it.
  std::function<double()> random;
};

// Whether a status is worth another attempt: UNAVAILABLE or DEADLINE_EXCEEDED, but not a peer
// that failed the TLS handshake (IsPeerAuthenticationFailure): trying it again proves nothing.
bool IsRetryable(const grpc::Status& status);

// What happened over all attempts.
struct RetryStats {
  int attempts = 0;
  absl::Duration waited = absl::ZeroDuration();  // total backoff
};

// Runs `attempt` with a fresh ClientContext per try (deadline set) until it returns a
// status that is not retryable or the budget is spent; returns the last status, converted.
// Thread-safe as long as `attempt` is.
absl::Status CallWithRetry(const RetryOptions& options,
                           absl::FunctionRef<grpc::Status(grpc::ClientContext*)> attempt,
                           RetryStats* stats = nullptr);

// Convenience for a generated stub's unary method:
//   RetryUnary(options, &Stub::PrepareBundles, stub, request, &response)
template <typename Stub, typename Request, typename Response>
absl::Status RetryUnary(const RetryOptions& options,
                        grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&,
                                                     Response*),
                        Stub* stub, const Request& request, Response* response,
                        RetryStats* stats = nullptr) {
  return CallWithRetry(
      options,
      [&](grpc::ClientContext* context) {
        response->Clear();
        return (stub->*method)(context, request, response);
      },
      stats);
}

}  // namespace tessera::rpc

// RpcServerMetrics: what a process's gRPC servers did, by method, for its /metrics:
//   tessera_rpc_server_handled_total{service, method, code}   calls that ended, by status code
//   tessera_rpc_server_handling_seconds{service, method}      time to answer a unary call
// (streams are counted when they end, not timed: their length is their client's). Fed by a
// gRPC server interceptor (ServerOptions::metrics), so every method of every service is covered
// with no code in the handlers; "/tessera.v1.HeadNodes/Heartbeat" is service
// "tessera.v1.HeadNodes", method "Heartbeat".
//
// Thread-safe. Cost per call: one interceptor object, two family lookups (~120 ns each) and a
// counter increment and a histogram observation (metrics/metric_registry.h).
#pragma once

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/support/server_interceptor.h"
#include "grpcpp/support/status.h"
#include "metrics/metric_registry.h"

namespace tessera::rpc {

class RpcServerMetrics {
 public:
  // Registers the two families in `registry` (which must outlive this object); AlreadyExists
  // when it has other families of those names.
  static absl::StatusOr<std::unique_ptr<RpcServerMetrics>> Create(
      metrics::MetricRegistry& registry);

  // One call of `full_method` ("/package.Service/Method") ended with `code` after `elapsed`;
  // `unary` calls are also timed.
  void Record(std::string_view full_method, bool unary, grpc::StatusCode code,
              absl::Duration elapsed);

  // For grpc::ServerBuilder::experimental().SetInterceptorCreators: each call gets an
  // interceptor that calls Record when its status is sent (or, cancelled, when it ends).
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> InterceptorFactory();

 private:
  RpcServerMetrics(metrics::CounterFamily* handled, metrics::HistogramFamily* latency)
      : handled_(handled), latency_(latency) {}

  metrics::CounterFamily* const handled_;
  metrics::HistogramFamily* const latency_;
};

// "OK", "CANCELLED", "UNAVAILABLE", ...: a status code as gRPC's documentation spells it.
std::string_view GrpcCodeName(grpc::StatusCode code);

}  // namespace tessera::rpc

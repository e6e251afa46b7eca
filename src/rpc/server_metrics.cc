#include "rpc/server_metrics.h"

#include <string>
#include <utility>

#include "absl/time/clock.h"
#include "base/status_macros.h"

namespace tessera::rpc {
namespace {

using grpc::experimental::InterceptionHookPoints;

// "/tessera.v1.HeadNodes/Heartbeat" -> {"tessera.v1.HeadNodes", "Heartbeat"}; a name of another
// shape is all method, with no service.
std::pair<std::string_view, std::string_view> SplitMethod(std::string_view full) {
  if (!full.empty() && full.front() == '/') full.remove_prefix(1);
  const size_t slash = full.find('/');
  if (slash == std::string_view::npos) return {"", full};
  return {full.substr(0, slash), full.substr(slash + 1)};
}

class MetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(RpcServerMetrics* metrics, grpc::experimental::ServerRpcInfo* info)
      : metrics_(metrics),
        method_(info->method() == nullptr ? "" : info->method()),
        unary_(info->type() == grpc::experimental::ServerRpcInfo::Type::UNARY),
        start_(absl::Now()) {}

  // A call that ends without a status sent (its client went away) counts as cancelled.
  ~MetricsInterceptor() override {
    if (!recorded_)
      metrics_->Record(method_, unary_, grpc::StatusCode::CANCELLED, absl::Now() - start_);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) &&
        !recorded_) {
      recorded_ = true;
      metrics_->Record(method_, unary_, methods->GetSendStatus().error_code(),
                       absl::Now() - start_);
    }
    methods->Proceed();
  }

 private:
  RpcServerMetrics* const metrics_;
  const std::string method_;
  const bool unary_;
  const absl::Time start_;
  bool recorded_ = false;
};

class MetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit MetricsInterceptorFactory(RpcServerMetrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new MetricsInterceptor(metrics_, info);
  }

 private:
  RpcServerMetrics* const metrics_;
};

}  // namespace

std::string_view GrpcCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

absl::StatusOr<std::unique_ptr<RpcServerMetrics>> RpcServerMetrics::Create(
    metrics::MetricRegistry& registry) {
  TESSERA_ASSIGN_OR_RETURN(
      metrics::CounterFamily * handled,
      registry.AddCounter({.name = "tessera_rpc_server_handled_total",
                           .help = "gRPC calls this process served that ended, by method and "
                                   "status code.",
                           .label_names = {"service", "method", "code"}}));
  TESSERA_ASSIGN_OR_RETURN(
      metrics::HistogramFamily * latency,
      registry.AddHistogram({.name = "tessera_rpc_server_handling_seconds",
                             .help = "Time this process took to answer a unary gRPC call, by "
                                     "method.",
                             .label_names = {"service", "method"}},
                            metrics::LatencySecondsBuckets()));
  return std::unique_ptr<RpcServerMetrics>(new RpcServerMetrics(handled, latency));
}

void RpcServerMetrics::Record(std::string_view full_method, bool unary, grpc::StatusCode code,
                              absl::Duration elapsed) {
  const auto [service, method] = SplitMethod(full_method);
  if (auto counter = handled_->WithLabels({service, method, GrpcCodeName(code)}); counter.ok()) {
    (*counter)->Increment();
  }
  if (!unary) return;
  if (auto histogram = latency_->WithLabels({service, method}); histogram.ok()) {
    (*histogram)->Observe(absl::ToDoubleSeconds(elapsed));
  }
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
RpcServerMetrics::InterceptorFactory() {
  return std::make_unique<MetricsInterceptorFactory>(this);
}

}  // namespace tessera::rpc

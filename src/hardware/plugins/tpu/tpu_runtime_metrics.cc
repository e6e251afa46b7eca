#include "hardware/plugins/tpu/tpu_runtime_metrics.h"

#include <chrono>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/credentials.h"
#include "hardware/plugins/tpu/proto/tpu_metric_service.grpc.pb.h"

namespace tessera {
namespace {

namespace rpc = ::tpu::monitoring::runtime;

constexpr char kHbmUsage[] = "tpu.runtime.hbm.memory.usage.bytes";
constexpr char kHbmTotal[] = "tpu.runtime.hbm.memory.total.bytes";
constexpr char kDutyCycle[] = "tpu.runtime.tensorcore.dutycycle.percent";
constexpr char kHbmUtilization[] = "tpu.runtime.hbm.utilization.percent";
// A program that starts after a failed attempt is seen within this long.
constexpr int kMaxReconnectBackoffMs = 5000;

// The device id of a metric: the attribute's integer (as tpu-info reads it), a decimal string, or
// a "device_ordinal" / "device-id" entry of a key-value list (newer libtpu).
std::optional<int> DeviceIdOf(const rpc::AttrValue& value) {
  switch (value.attr_case()) {
    case rpc::AttrValue::kIntAttr:
      if (value.int_attr() >= 0 && value.int_attr() < (1 << 20)) {
        return static_cast<int>(value.int_attr());
      }
      return std::nullopt;
    case rpc::AttrValue::kStringAttr: {
      int id = 0;
      if (absl::SimpleAtoi(value.string_attr(), &id) && id >= 0) return id;
      return std::nullopt;
    }
    case rpc::AttrValue::kKvlistAttr:
      for (const rpc::Attribute& a : value.kvlist_attr().attributes()) {
        if (a.key() == "device_ordinal" || a.key() == "device-id" || a.key() == "device_id") {
          return DeviceIdOf(a.value());
        }
      }
      return std::nullopt;
    default: return std::nullopt;
  }
}

std::optional<double> GaugeValue(const rpc::Metric& m) {
  if (!m.has_gauge()) return std::nullopt;
  switch (m.gauge().value_case()) {
    case rpc::Gauge::kAsInt: return static_cast<double>(m.gauge().as_int());
    case rpc::Gauge::kAsDouble: return m.gauge().as_double();
    default: return std::nullopt;
  }
}

bool ServerAbsent(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace

struct TpuRuntimeMetricsClient::Stub {
  std::unique_ptr<rpc::RuntimeMetricService::Stub> service;
};

TpuRuntimeMetricsClient::TpuRuntimeMetricsClient(std::string address)
    : address_(std::move(address)), stub_(std::make_unique<Stub>()) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kMaxReconnectBackoffMs);
  stub_->service = rpc::RuntimeMetricService::NewStub(
      grpc::CreateCustomChannel(address_, grpc::experimental::LocalCredentials(LOCAL_TCP), args));
}

TpuRuntimeMetricsClient::~TpuRuntimeMetricsClient() = default;

absl::StatusOr<std::map<int, TpuDeviceFigures>> TpuRuntimeMetricsClient::Read(
    absl::Duration timeout, std::vector<std::string>* warnings) {
  std::map<int, TpuDeviceFigures> figures;
  struct Wanted {
    const char* name;
    void (*store)(TpuDeviceFigures&, double);
  };
  const Wanted wanted[] = {
      {kHbmUsage,
       [](TpuDeviceFigures& f, double v) { f.hbm_used_bytes = static_cast<uint64_t>(v); }},
      {kHbmTotal,
       [](TpuDeviceFigures& f, double v) { f.hbm_total_bytes = static_cast<uint64_t>(v); }},
      {kDutyCycle, [](TpuDeviceFigures& f, double v) { f.duty_cycle_percent = v; }},
      {kHbmUtilization, [](TpuDeviceFigures& f, double v) { f.hbm_utilization_percent = v; }},
  };
  bool any_answer = false;
  for (const Wanted& w : wanted) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
    rpc::MetricRequest request;
    request.set_metric_name(w.name);
    rpc::MetricResponse response;
    const grpc::Status status = stub_->service->GetRuntimeMetric(&context, request, &response);
    if (!status.ok()) {
      if (!any_answer && ServerAbsent(status.error_code())) {
        return absl::UnavailableError(absl::StrCat("no libtpu metric server answered at ", address_,
                                                   " (", status.error_message(),
                                                   "); is a TPU program running?"));
      }
      warnings->push_back(absl::StrCat("libtpu at ", address_, " does not serve ", w.name, ": ",
                                       status.error_message()));
      continue;
    }
    any_answer = true;
    for (const rpc::Metric& m : response.metric().metrics()) {
      const std::optional<int> id = DeviceIdOf(m.attribute().value());
      const std::optional<double> value = GaugeValue(m);
      if (!id || !value || *value < 0) {
        warnings->push_back(absl::StrCat("libtpu at ", address_, ": a ", w.name,
                                         " value without a device id or a number; skipped"));
        continue;
      }
      w.store(figures[*id], *value);
    }
  }
  return figures;
}

}  // namespace tessera

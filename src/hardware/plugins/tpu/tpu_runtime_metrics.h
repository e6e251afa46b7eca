// TpuRuntimeMetricsClient: asks one libtpu runtime-metric server
// (tpu.monitoring.runtime.RuntimeMetricService/GetRuntimeMetric, served while a JAX or
// PyTorch/XLA program holds the chips, at localhost:8431 unless TPU_RUNTIME_METRICS_PORTS says
// otherwise) for the per-device figures Tessera reports:
//   tpu.runtime.hbm.memory.usage.bytes / .total.bytes   HBM used / total, bytes
//   tpu.runtime.tensorcore.dutycycle.percent            TensorCore duty cycle, %
//   tpu.runtime.hbm.utilization.percent                 HBM bandwidth utilization, %
// The channel uses gRPC local credentials, as tpu-info does. Each metric is one RPC bounded by the
// caller's timeout. Not thread-safe: one owner (the TPU telemetry reader).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tessera {

// What one server said about one device (libtpu's device id).
struct TpuDeviceFigures {
  std::optional<uint64_t> hbm_used_bytes;
  std::optional<uint64_t> hbm_total_bytes;
  std::optional<double> duty_cycle_percent;
  std::optional<double> hbm_utilization_percent;
};

class TpuRuntimeMetricsClient {
 public:
  // `address` is "host:port". Connecting is lazy: nothing happens until Read.
  explicit TpuRuntimeMetricsClient(std::string address);
  ~TpuRuntimeMetricsClient();

  const std::string& address() const { return address_; }

  // The figures by device id. Unavailable / DeadlineExceeded when no server answers (no TPU
  // program is running); a metric this libtpu does not serve is absent, with a line in `warnings`.
  absl::StatusOr<std::map<int, TpuDeviceFigures>> Read(absl::Duration timeout,
                                                       std::vector<std::string>* warnings);

 private:
  struct Stub;
  std::string address_;
  std::unique_ptr<Stub> stub_;
};

}  // namespace tessera

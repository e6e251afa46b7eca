// The tpu family's telemetry reader: libtpu's runtime-metric servers (tpu_runtime_metrics.h),
// which answer only while a JAX or PyTorch/XLA program holds the chips. A TPU's driver exposes
// no load, power or temperature in sysfs, so without a server every figure is absent.
//   HBM usage / total (bytes)       -> memory_used_bytes, memory_total_bytes
//   TensorCore duty cycle (%)       -> duty_cycle_ratio
//   HBM bandwidth utilization (%)   -> memory_bandwidth_ratio
// Servers: TelemetryOptions::tpu_metric_servers; else, on the live machine, localhost at each
// port of TPU_RUNTIME_METRICS_PORTS (default 8431); none on a fake tree. libtpu's device id is
// taken to be the chip index (Device attribute "chip"): on a host where one process holds every
// chip they are the same. Every resource unit of a chip reports that chip's figures. An id that
// two servers both report is ambiguous (one process per chip, each numbering its chip 0) and is
// dropped with a warning.
// Not thread-safe (one reader, one caller). A Read costs one RPC per figure and server, each
// bounded by TelemetryOptions::rpc_timeout; an absent server fails fast (connection refused).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hardware/telemetry_reader.h"

namespace tessera {

std::unique_ptr<TelemetryReader> MakeTpuTelemetryReader(const TelemetryContext& context);

// The servers a reader on `context` asks, as described above.
std::vector<std::string> TpuMetricServers(const TelemetryContext& context);

}  // namespace tessera

// TelemetryReader: one accelerator family's source of live device figures (device_telemetry.h),
// opened once per host through AcceleratorPlugin::OpenTelemetry and read every few seconds.
// A reader keeps what makes repeated reads cheap or possible: an open NVML session, a libtpu
// channel, the previous sample of counters that figures are derived from (power from an energy
// counter, NVIDIA GPM activity between two samples).
//
//   auto reader = plugin.OpenTelemetry(TelemetryContext{Sysroot("/"), env, {}});
//   FamilyTelemetry now = reader->Read(devices, absl::Now());  // total: never fails
//
// Not thread-safe: one caller drives a reader; a Read costs a few file reads or library calls
// per device (libtpu: one RPC per figure, bounded by TelemetryOptions::rpc_timeout).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "hardware/device.h"
#include "hardware/device_telemetry.h"
#include "hardware/environment.h"
#include "hardware/sysroot.h"

namespace tessera {

struct TelemetryOptions {
  // Path or soname of the NVML library; "" means the search detection uses (nvidia_detect.h).
  std::string nvml_library;
  // libtpu runtime-metric servers, "host:port". Empty: localhost at every port of
  // TPU_RUNTIME_METRICS_PORTS (default 8431) on the live machine, and none on a fake tree.
  std::vector<std::string> tpu_metric_servers;
  // How long one libtpu call may take; past it the figure is absent from that reading.
  absl::Duration rpc_timeout = absl::Milliseconds(250);
};

// The host a reader reads: copied into the reader, which outlives the caller's values.
struct TelemetryContext {
  Sysroot sysroot;
  Environment env;  // the node agent's (TESSERA_NVML_LIBRARY, TPU_RUNTIME_METRICS_PORTS)
  TelemetryOptions options;
};

class TelemetryReader {
 public:
  virtual ~TelemetryReader() = default;

  // One reading of `devices`, devices that this family's Detect returned on this host. Total:
  // one entry per device, in order; a device of another family, or one the source does not know,
  // gets no figures and a warning. `now` is the caller's monotonic clock; figures made from two
  // samples use the time between readings and are absent from a device's first reading.
  virtual FamilyTelemetry Read(std::span<const Device> devices, absl::Time now) = 0;
};

// A reader that reports no figures for any device and `why` (one line, e.g. "device figures come
// from HLML, which Tessera does not load yet") as the family warning of every reading.
std::unique_ptr<TelemetryReader> MakeNoTelemetryReader(std::string family, std::string why);

// --- Helpers for readers ---

// An entry for `device` with no figures yet.
DeviceTelemetry EmptyTelemetry(const Device& device);

// The entries of a reading in which nothing could be read: every device empty, `why` the family
// warning.
FamilyTelemetry NothingRead(std::span<const Device> devices, std::string why);

// True when `device` is of `family`; otherwise adds "<family> reader: device <f>/<i> is not
// a <family> device" to `out` and returns false.
bool CheckFamily(const Device& device, std::string_view family, DeviceTelemetry& out);

// `percent` / 100 when it lies in [0, 100]; otherwise nullopt and the warning
// "<what> <percent> is not a percentage" on `out`.
std::optional<double> RatioFromPercent(double percent, std::string_view what, DeviceTelemetry& out);

}  // namespace tessera

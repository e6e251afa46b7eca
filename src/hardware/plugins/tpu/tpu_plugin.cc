#include "hardware/plugins/tpu/tpu_plugin.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hardware/plugins/tpu/tpu_detection.h"
#include "hardware/plugins/tpu/tpu_error_reader.h"
#include "hardware/plugins/tpu/tpu_isolation.h"
#include "hardware/plugins/tpu/tpu_telemetry.h"

namespace tessera {
namespace {

// Stateless; thread-safe.
class TpuPlugin final : public AcceleratorPlugin {
 public:
  std::string_view family() const override { return "tpu"; }
  std::string_view resource_name() const override { return "TPU"; }
  std::string_view visible_devices_env() const override { return kTpuVisibleChips; }

  Detection Detect(const DetectionContext& context) const override { return DetectTpus(context); }

  // libtpu runs on power-of-two chip sets of a host (reference §6).
  absl::Status ValidateQuantity(const Quantity& quantity) const override {
    const bool ok = quantity.IsInteger() &&
                    (quantity == Quantity::FromInt(1) || quantity == Quantity::FromInt(2) ||
                     quantity == Quantity::FromInt(4) || quantity == Quantity::FromInt(8));
    if (ok) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("TPU requests must be 1, 2, 4 or 8 chips, got ", quantity.ToString()));
  }

  absl::StatusOr<std::vector<int>> ParseMask(std::string_view value,
                                             const std::vector<Device>& devices) const override {
    return ParseTpuMask(value, devices);
  }

  // Without the devices the unit-to-chip collapse is unknown: indices are written as given.
  // IsolationEnv, which has the devices, collapses units to chips.
  std::string FormatMask(std::span<const int> physical_indices) const override {
    return absl::StrJoin(physical_indices, ",");
  }

  EnvChanges IsolationEnv(std::span<const int> assigned,
                          const std::vector<Device>& devices) const override {
    return TpuIsolationEnv(assigned, devices);
  }

  std::unique_ptr<TelemetryReader> OpenTelemetry(const TelemetryContext& context) const override {
    return MakeTpuTelemetryReader(context);
  }

  std::unique_ptr<DeviceErrorReader> OpenErrorWatch(
      const DeviceErrorContext& context) const override {
    return MakeTpuErrorReader(context);
  }
};

}  // namespace

std::unique_ptr<AcceleratorPlugin> MakeTpuPlugin() { return std::make_unique<TpuPlugin>(); }

}  // namespace tessera

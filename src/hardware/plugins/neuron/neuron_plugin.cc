#include "hardware/plugins/neuron/neuron_plugin.h"

#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "hardware/plugins/common/index_list.h"
#include "hardware/plugins/common/quantity_rules.h"
#include "hardware/plugins/neuron/neuron_detection.h"
#include "hardware/plugins/neuron/neuron_error_reader.h"
#include "hardware/plugins/neuron/neuron_telemetry.h"

namespace tessera {
namespace {

// Thread-safe: stateless.
class NeuronPlugin final : public AcceleratorPlugin {
 public:
  std::string_view family() const override { return "neuron"; }
  std::string_view resource_name() const override { return "neuron_cores"; }
  std::string_view visible_devices_env() const override { return "NEURON_RT_VISIBLE_CORES"; }

  Detection Detect(const DetectionContext& context) const override {
    return DetectNeuronCores(context);
  }

  absl::Status ValidateQuantity(const Quantity& quantity) const override {
    return ValidateWholeQuantity(resource_name(), quantity);
  }

  // The Neuron runtime accepts "0,1", "0-3" and mixes of both.
  absl::StatusOr<std::vector<int>> ParseMask(std::string_view value,
                                             const std::vector<Device>&) const override {
    const std::string_view trimmed = Trim(value);
    if (MaskSelectsNoDevice(trimmed)) return std::vector<int>();
    auto list = ParseIndexList(trimmed, {.allow_ranges = true});
    if (!list.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("NEURON_RT_VISIBLE_CORES: ", list.status().message()));
    }
    return list;
  }

  std::unique_ptr<TelemetryReader> OpenTelemetry(const TelemetryContext& context) const override {
    return MakeNeuronTelemetryReader(context);
  }

  std::unique_ptr<DeviceErrorReader> OpenErrorWatch(
      const DeviceErrorContext& context) const override {
    return MakeNeuronErrorReader(context);
  }
};

}  // namespace

std::unique_ptr<AcceleratorPlugin> MakeNeuronPlugin() { return std::make_unique<NeuronPlugin>(); }

}  // namespace tessera

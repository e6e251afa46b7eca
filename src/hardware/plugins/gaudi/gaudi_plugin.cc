#include "hardware/plugins/gaudi/gaudi_plugin.h"

#include "hardware/plugins/common/quantity_rules.h"
#include "hardware/plugins/gaudi/gaudi_detection.h"

namespace tessera {
namespace {

// Thread-safe: stateless. Masks use the default comma list of module ids.
class GaudiPlugin final : public AcceleratorPlugin {
 public:
  std::string_view family() const override { return "gaudi"; }
  std::string_view resource_name() const override { return "HPU"; }
  std::string_view visible_devices_env() const override { return "HABANA_VISIBLE_MODULES"; }

  Detection Detect(const DetectionContext& context) const override {
    return DetectGaudiDevices(context);
  }

  absl::Status ValidateQuantity(const Quantity& quantity) const override {
    return ValidateWholeQuantity(resource_name(), quantity);
  }

  // Gaudi's figures (utilization .aip, memory, power, temperature) come from HLML
  // (hlml_device_get_*, libhlml.so); habanalabs' sysfs attributes name the card, not its load.
  // Until Tessera loads HLML, every figure is absent.
  std::unique_ptr<TelemetryReader> OpenTelemetry(
      const TelemetryContext& /*context*/) const override {
    return MakeNoTelemetryReader(
        std::string(family()),
        "device figures come from HLML (libhlml.so), which Tessera does not load yet; "
        "none reported");
  }
};

}  // namespace

std::unique_ptr<AcceleratorPlugin> MakeGaudiPlugin() { return std::make_unique<GaudiPlugin>(); }

}  // namespace tessera

#include "hardware/plugins/gaudi/gaudi_plugin.h"

namespace tessera {
namespace {

class GaudiPlugin final : public AcceleratorPlugin {
 public:
  std::string_view family() const override { return "gaudi"; }
  std::string_view resource_name() const override { return "HPU"; }
  std::string_view visible_devices_env() const override { return "HABANA_VISIBLE_MODULES"; }
  Detection Detect(const DetectionContext&) const override { return {}; }
  absl::Status ValidateQuantity(const Quantity&) const override { return absl::OkStatus(); }
};

}  // namespace

std::unique_ptr<AcceleratorPlugin> MakeGaudiPlugin() { return std::make_unique<GaudiPlugin>(); }

}  // namespace tessera

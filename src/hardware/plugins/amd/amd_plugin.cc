#include "hardware/plugins/amd/amd_plugin.h"

namespace tessera {
namespace {

class AmdPlugin final : public AcceleratorPlugin {
 public:
  std::string_view family() const override { return "amd"; }
  std::string_view resource_name() const override { return "GPU"; }
  std::string_view visible_devices_env() const override { return "HIP_VISIBLE_DEVICES"; }
  Detection Detect(const DetectionContext&) const override { return {}; }
  absl::Status ValidateQuantity(const Quantity&) const override { return absl::OkStatus(); }
};

}  // namespace

std::unique_ptr<AcceleratorPlugin> MakeAmdPlugin() { return std::make_unique<AmdPlugin>(); }

}  // namespace tessera

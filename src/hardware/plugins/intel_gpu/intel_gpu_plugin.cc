#include "hardware/plugins/intel_gpu/intel_gpu_plugin.h"

namespace tessera {
namespace {

class IntelGpuPlugin final : public AcceleratorPlugin {
 public:
  std::string_view family() const override { return "intel-gpu"; }
  std::string_view resource_name() const override { return "GPU"; }
  std::string_view visible_devices_env() const override { return "ONEAPI_DEVICE_SELECTOR"; }
  Detection Detect(const DetectionContext&) const override { return {}; }
  absl::Status ValidateQuantity(const Quantity&) const override { return absl::OkStatus(); }
};

}  // namespace

std::unique_ptr<AcceleratorPlugin> MakeIntelGpuPlugin() { return std::make_unique<IntelGpuPlugin>(); }

}  // namespace tessera

#include "hardware/plugins/nvidia/nvidia_plugin.h"

namespace tessera {
namespace {

class NvidiaPlugin final : public AcceleratorPlugin {
 public:
  std::string_view family() const override { return "nvidia"; }
  std::string_view resource_name() const override { return "GPU"; }
  std::string_view visible_devices_env() const override { return "CUDA_VISIBLE_DEVICES"; }
  Detection Detect(const DetectionContext&) const override { return {}; }
  absl::Status ValidateQuantity(const Quantity&) const override { return absl::OkStatus(); }
};

}  // namespace

std::unique_ptr<AcceleratorPlugin> MakeNvidiaPlugin() { return std::make_unique<NvidiaPlugin>(); }

}  // namespace tessera

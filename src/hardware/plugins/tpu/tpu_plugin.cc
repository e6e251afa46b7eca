#include "hardware/plugins/tpu/tpu_plugin.h"

namespace tessera {
namespace {

class TpuPlugin final : public AcceleratorPlugin {
 public:
  std::string_view family() const override { return "tpu"; }
  std::string_view resource_name() const override { return "TPU"; }
  std::string_view visible_devices_env() const override { return "TPU_VISIBLE_CHIPS"; }
  Detection Detect(const DetectionContext&) const override { return {}; }
  absl::Status ValidateQuantity(const Quantity&) const override { return absl::OkStatus(); }
};

}  // namespace

std::unique_ptr<AcceleratorPlugin> MakeTpuPlugin() { return std::make_unique<TpuPlugin>(); }

}  // namespace tessera

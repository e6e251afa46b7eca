#include "hardware/plugins/neuron/neuron_plugin.h"

namespace tessera {
namespace {

class NeuronPlugin final : public AcceleratorPlugin {
 public:
  std::string_view family() const override { return "neuron"; }
  std::string_view resource_name() const override { return "neuron_cores"; }
  std::string_view visible_devices_env() const override { return "NEURON_RT_VISIBLE_CORES"; }
  Detection Detect(const DetectionContext&) const override { return {}; }
  absl::Status ValidateQuantity(const Quantity&) const override { return absl::OkStatus(); }
};

}  // namespace

std::unique_ptr<AcceleratorPlugin> MakeNeuronPlugin() { return std::make_unique<NeuronPlugin>(); }

}  // namespace tessera

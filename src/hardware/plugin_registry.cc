#include "hardware/plugin_registry.h"

#include <memory>

#include "hardware/plugins/amd/amd_plugin.h"
#include "hardware/plugins/gaudi/gaudi_plugin.h"
#include "hardware/plugins/intel_gpu/intel_gpu_plugin.h"
#include "hardware/plugins/neuron/neuron_plugin.h"
#include "hardware/plugins/nvidia/nvidia_plugin.h"
#include "hardware/plugins/tpu/tpu_plugin.h"

namespace tessera {

const std::vector<const AcceleratorPlugin*>& AcceleratorPlugins() {
  static const auto* const plugins = [] {
    static const std::unique_ptr<AcceleratorPlugin> owned[] = {
        MakeNvidiaPlugin(), MakeAmdPlugin(),    MakeIntelGpuPlugin(),
        MakeTpuPlugin(),    MakeNeuronPlugin(), MakeGaudiPlugin(),
    };
    auto* list = new std::vector<const AcceleratorPlugin*>();
    for (const auto& p : owned) list->push_back(p.get());
    return list;
  }();
  return *plugins;
}

const AcceleratorPlugin* FindAcceleratorPlugin(std::string_view family) {
  for (const AcceleratorPlugin* p : AcceleratorPlugins()) {
    if (p->family() == family) return p;
  }
  return nullptr;
}

}  // namespace tessera

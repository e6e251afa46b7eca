#include "scheduling/resource_families.h"

#include "hardware/plugin_registry.h"

namespace tessera {

const AcceleratorPlugin* FamilyOwningResource(std::string_view resource) {
  for (const AcceleratorPlugin* plugin : AcceleratorPlugins()) {
    if (plugin->resource_name() == resource) return plugin;
  }
  return nullptr;
}

bool IsUnitInstanceResource(std::string_view resource) {
  const AcceleratorPlugin* plugin = FamilyOwningResource(resource);
  return plugin != nullptr && plugin->unit_instance();
}

}  // namespace tessera

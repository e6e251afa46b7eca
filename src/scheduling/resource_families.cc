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

bool IsAcceleratorResource(std::string_view resource) {
  return resource.starts_with(kAcceleratorTypeResourcePrefix) ||
         FamilyOwningResource(resource) != nullptr;
}

}  // namespace tessera

#include "hardware/plugins/nvidia/nvml_library.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

// dlsym into a typed function pointer; true when found.
template <typename Fn>
bool Lookup(void* handle, const char* symbol, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(handle, symbol));
  return *out != nullptr;
}

}  // namespace

absl::StatusOr<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Open(const std::string& path_or_soname) {
  dlerror();
  // RTLD_LOCAL: NVML's symbols must not leak into the global namespace of the process.
  void* handle = dlopen(path_or_soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::NotFoundError(absl::StrCat("cannot load ", path_or_soname, ": ",
                                            why != nullptr ? why : "unknown dlopen error"));
  }
  std::unique_ptr<NvmlLibrary> lib(new NvmlLibrary(handle, path_or_soname));
  struct Required {
    const char* symbol;
    bool found;
  };
  const Required required[] = {
      {"nvmlInit_v2", Lookup(handle, "nvmlInit_v2", &lib->init)},
      {"nvmlShutdown", Lookup(handle, "nvmlShutdown", &lib->shutdown)},
      {"nvmlSystemGetDriverVersion",
       Lookup(handle, "nvmlSystemGetDriverVersion", &lib->driver_version)},
      {"nvmlDeviceGetCount_v2", Lookup(handle, "nvmlDeviceGetCount_v2", &lib->device_count)},
      {"nvmlDeviceGetHandleByIndex_v2",
       Lookup(handle, "nvmlDeviceGetHandleByIndex_v2", &lib->handle_by_index)},
      {"nvmlDeviceGetName", Lookup(handle, "nvmlDeviceGetName", &lib->name)},
      {"nvmlDeviceGetUUID", Lookup(handle, "nvmlDeviceGetUUID", &lib->uuid)},
      {"nvmlDeviceGetMemoryInfo", Lookup(handle, "nvmlDeviceGetMemoryInfo", &lib->memory_info)},
      {"nvmlDeviceGetPciInfo_v3", Lookup(handle, "nvmlDeviceGetPciInfo_v3", &lib->pci_info)},
  };
  for (const Required& r : required) {
    if (!r.found) {
      return absl::FailedPreconditionError(
          absl::StrCat(path_or_soname, " lacks the entry point ", r.symbol));
    }
  }
  auto optional = [&](const char* symbol, auto* out) {
    if (!Lookup(handle, symbol, out)) lib->missing_optional_.push_back(symbol);
  };
  optional("nvmlErrorString", &lib->error_string);
  optional("nvmlDeviceGetNvLinkState", &lib->nvlink_state);
  optional("nvmlDeviceGetNvLinkVersion", &lib->nvlink_version);
  optional("nvmlDeviceGetNvLinkRemotePciInfo_v2", &lib->nvlink_remote_pci);
  optional("nvmlDeviceGetNvLinkRemoteDeviceType", &lib->nvlink_remote_type);
  optional("nvmlDeviceGetGpuFabricInfo", &lib->fabric_info);
  optional("nvmlDeviceGetUtilizationRates", &lib->utilization_rates);
  optional("nvmlDeviceGetPowerUsage", &lib->power_usage);
  optional("nvmlDeviceGetTotalEnergyConsumption", &lib->total_energy);
  optional("nvmlDeviceGetTemperatureV", &lib->temperature_v);
  optional("nvmlDeviceGetTemperature", &lib->temperature);
  optional("nvmlGpmQueryDeviceSupport", &lib->gpm_query_support);
  optional("nvmlGpmSampleAlloc", &lib->gpm_sample_alloc);
  optional("nvmlGpmSampleFree", &lib->gpm_sample_free);
  optional("nvmlGpmSampleGet", &lib->gpm_sample_get);
  optional("nvmlGpmMetricsGet", &lib->gpm_metrics_get);
  return lib;
}

NvmlLibrary::~NvmlLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

std::string NvmlLibrary::ErrorString(nvml::nvmlReturn_t code) const {
  if (error_string != nullptr) {
    if (const char* text = error_string(code); text != nullptr) {
      return absl::StrCat(text, " (", code, ")");
    }
  }
  return absl::StrCat("NVML error ", code);
}

}  // namespace tessera

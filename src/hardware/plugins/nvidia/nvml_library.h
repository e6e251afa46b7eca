// NvmlLibrary: NVML opened with dlopen and its entry points looked up, never linked, so Tessera
// builds and runs on machines without the NVIDIA driver. Entry points that every NVML since the
// r3xx drivers has are required; newer ones (NVLink queries, GPU fabric info, GPM, the
// telemetry queries) are optional and null when the driver is too old. Thread-safe after Open:
// immutable; NVML itself is thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hardware/plugins/nvidia/nvml_api.h"

namespace tessera {

class NvmlLibrary {
 public:
  // Opens `path_or_soname` ("libnvidia-ml.so.1" searches the loader path; a path with a '/' is
  // opened as is). NotFound when it cannot be loaded, FailedPrecondition when a required entry
  // point is missing; the message says which.
  static absl::StatusOr<std::unique_ptr<NvmlLibrary>> Open(const std::string& path_or_soname);

  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;
  ~NvmlLibrary();  // dlclose

  const std::string& path() const { return path_; }
  // "Driver Not Loaded (9)": nvmlErrorString when the library has it, else the number.
  std::string ErrorString(nvml::nvmlReturn_t code) const;
  // Names of optional entry points this library lacks (older drivers), for evidence.
  const std::vector<std::string>& missing_optional() const { return missing_optional_; }

  // Required.
  nvml::InitFn init = nullptr;                               // nvmlInit_v2
  nvml::ShutdownFn shutdown = nullptr;                       // nvmlShutdown
  nvml::SystemGetDriverVersionFn driver_version = nullptr;   // nvmlSystemGetDriverVersion
  nvml::DeviceGetCountFn device_count = nullptr;             // nvmlDeviceGetCount_v2
  nvml::DeviceGetHandleByIndexFn handle_by_index = nullptr;  // nvmlDeviceGetHandleByIndex_v2
  nvml::DeviceGetNameFn name = nullptr;                      // nvmlDeviceGetName
  nvml::DeviceGetUuidFn uuid = nullptr;                      // nvmlDeviceGetUUID
  nvml::DeviceGetMemoryInfoFn memory_info = nullptr;         // nvmlDeviceGetMemoryInfo
  nvml::DeviceGetPciInfoFn pci_info = nullptr;               // nvmlDeviceGetPciInfo_v3
  // Optional: null when missing.
  nvml::ErrorStringFn error_string = nullptr;                        // nvmlErrorString
  nvml::DeviceGetNvLinkStateFn nvlink_state = nullptr;               // nvmlDeviceGetNvLinkState
  nvml::DeviceGetNvLinkVersionFn nvlink_version = nullptr;           // nvmlDeviceGetNvLinkVersion
  nvml::DeviceGetNvLinkRemotePciInfoFn nvlink_remote_pci = nullptr;  // ..._v2
  nvml::DeviceGetNvLinkRemoteDeviceTypeFn nvlink_remote_type = nullptr;
  nvml::DeviceGetGpuFabricInfoFn fabric_info = nullptr;  // nvmlDeviceGetGpuFabricInfo
  // Optional telemetry entry points.
  nvml::DeviceGetUtilizationRatesFn utilization_rates = nullptr;  // nvmlDeviceGetUtilizationRates
  nvml::DeviceGetPowerUsageFn power_usage = nullptr;              // nvmlDeviceGetPowerUsage
  nvml::DeviceGetTotalEnergyConsumptionFn total_energy = nullptr;
  nvml::DeviceGetTemperatureVFn temperature_v = nullptr;      // nvmlDeviceGetTemperatureV
  nvml::DeviceGetTemperatureFn temperature = nullptr;         // deprecated; when V is missing
  nvml::GpmQueryDeviceSupportFn gpm_query_support = nullptr;  // the GPM set: all or none used
  nvml::GpmSampleAllocFn gpm_sample_alloc = nullptr;
  nvml::GpmSampleFreeFn gpm_sample_free = nullptr;
  nvml::GpmSampleGetFn gpm_sample_get = nullptr;
  nvml::GpmMetricsGetFn gpm_metrics_get = nullptr;

  // Whether the library has every GPM entry point.
  bool has_gpm() const {
    return gpm_query_support != nullptr && gpm_sample_alloc != nullptr &&
           gpm_sample_free != nullptr && gpm_sample_get != nullptr && gpm_metrics_get != nullptr;
  }

 private:
  NvmlLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}

  void* handle_;
  std::string path_;
  std::vector<std::string> missing_optional_;
};

}  // namespace tessera

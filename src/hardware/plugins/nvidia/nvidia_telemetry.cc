#include "hardware/plugins/nvidia/nvidia_telemetry.h"

#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "hardware/plugins/nvidia/nvidia_detect.h"
#include "hardware/plugins/nvidia/nvml_library.h"
#include "hardware/plugins/nvidia/nvml_probe.h"

namespace tessera {
namespace {

using nvml::NVML_ERROR_NOT_SUPPORTED;
using nvml::NVML_ERROR_UNINITIALIZED;
using nvml::NVML_SUCCESS;
using nvml::nvmlReturn_t;

constexpr std::string_view kFamily = "nvidia";
// NVML's GPM refresh interval: samples closer than this give no meaningful metrics.
constexpr absl::Duration kMinGpmInterval = absl::Milliseconds(100);

std::string FromBuffer(const char* buffer, size_t size) {
  return std::string(buffer, strnlen(buffer, size));
}

class NvmlTelemetryReader final : public TelemetryReader {
 public:
  explicit NvmlTelemetryReader(TelemetryContext context) : context_(std::move(context)) {}
  ~NvmlTelemetryReader() override { Close(); }

  FamilyTelemetry Read(std::span<const Device> devices, absl::Time now) override {
    if (lib_ == nullptr) {
      if (absl::Status opened = Open(); !opened.ok()) {
        FamilyTelemetry out = NothingRead(
            devices,
            absl::StrCat("NVML not available (", opened.message(), "): no NVIDIA device figures"));
        for (size_t i = 0; i < devices.size(); ++i) {
          CheckFamily(devices[i], kFamily, out.devices[i]);
        }
        return out;
      }
    }
    FamilyTelemetry out;
    for (const Device& device : devices) {
      DeviceTelemetry t = EmptyTelemetry(device);
      if (CheckFamily(device, kFamily, t)) {
        if (Gpu* gpu = Find(device)) {
          t.source = "nvml";
          ReadGpu(*gpu, now, t);
        } else {
          t.warnings.push_back(
              absl::StrCat("GPU ", device.index, " (",
                           device.pci_bus_id.empty() ? device.uuid : device.pci_bus_id,
                           "): NVML does not report this device"));
        }
      }
      out.devices.push_back(std::move(t));
    }
    if (session_lost_) {
      out.warnings.push_back(
          "NVML reported itself uninitialised; the session is reopened on the "
          "next reading");
      Close();
    }
    return out;
  }

 private:
  struct Gpu {
    nvml::nvmlDevice_t handle = nullptr;
    unsigned int nvml_index = 0;
    bool gpm = false;  // GPM supported and its samples allocated
    nvml::nvmlGpmSample_t previous{nullptr};
    nvml::nvmlGpmSample_t current{nullptr};
    std::optional<absl::Time> previous_at;  // when `previous` holds a sample
  };

  absl::Status Open() {
    std::string why;
    std::optional<std::string> library =
        NvmlLibraryFor(context_.sysroot, context_.env, context_.options.nvml_library, &why);
    if (!library) return absl::NotFoundError(why);
    auto opened = NvmlLibrary::Open(*library);
    if (!opened.ok()) return opened.status();
    std::unique_ptr<NvmlLibrary> lib = std::move(*opened);
    if (nvmlReturn_t rc = lib->init(); rc != NVML_SUCCESS) {
      return absl::UnavailableError(absl::StrCat("nvmlInit_v2 failed: ", lib->ErrorString(rc)));
    }
    unsigned int count = 0;
    if (nvmlReturn_t rc = lib->device_count(&count); rc != NVML_SUCCESS) {
      lib->shutdown();
      return absl::UnavailableError(
          absl::StrCat("nvmlDeviceGetCount_v2 failed: ", lib->ErrorString(rc)));
    }
    lib_ = std::move(lib);
    session_lost_ = false;
    gpus_.reserve(count);
    for (unsigned int i = 0; i < count; ++i) {
      Gpu gpu;
      gpu.nvml_index = i;
      if (lib_->handle_by_index(i, &gpu.handle) != NVML_SUCCESS) continue;
      nvml::nvmlPciInfo_t pci{};
      if (lib_->pci_info(gpu.handle, &pci) == NVML_SUCCESS) {
        const std::string bus = NormalizeNvmlBusId(FromBuffer(pci.busId, sizeof(pci.busId)));
        if (!bus.empty()) by_bus_[bus] = gpus_.size();
      }
      char uuid[nvml::NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
      if (lib_->uuid(gpu.handle, uuid, sizeof(uuid)) == NVML_SUCCESS) {
        by_uuid_[FromBuffer(uuid, sizeof(uuid))] = gpus_.size();
      }
      gpu.gpm = SetUpGpm(gpu);
      gpus_.push_back(gpu);
    }
    return absl::OkStatus();
  }

  // Whether GPM works on `gpu`; allocates its two sample buffers when it does.
  bool SetUpGpm(Gpu& gpu) {
    if (!lib_->has_gpm()) return false;
    nvml::nvmlGpmSupport_t support{};
    support.version = nvml::NVML_GPM_SUPPORT_VERSION;
    if (lib_->gpm_query_support(gpu.handle, &support) != NVML_SUCCESS ||
        support.isSupportedDevice == 0) {
      return false;
    }
    if (lib_->gpm_sample_alloc(&gpu.previous) != NVML_SUCCESS) return false;
    if (lib_->gpm_sample_alloc(&gpu.current) != NVML_SUCCESS) {
      lib_->gpm_sample_free(gpu.previous);
      gpu.previous.handle = nullptr;
      return false;
    }
    return true;
  }

  void Close() {
    if (lib_ == nullptr) return;
    for (Gpu& gpu : gpus_) {
      if (gpu.previous.handle != nullptr) lib_->gpm_sample_free(gpu.previous);
      if (gpu.current.handle != nullptr) lib_->gpm_sample_free(gpu.current);
    }
    gpus_.clear();
    by_bus_.clear();
    by_uuid_.clear();
    lib_->shutdown();
    lib_.reset();
  }

  Gpu* Find(const Device& device) {
    if (auto it = by_bus_.find(device.pci_bus_id); it != by_bus_.end()) return &gpus_[it->second];
    if (device.uuid.empty()) return nullptr;
    if (auto it = by_uuid_.find(device.uuid); it != by_uuid_.end()) return &gpus_[it->second];
    return nullptr;
  }

  // True on success. NOT_SUPPORTED is silent; other errors are warnings on `t`.
  bool Check(nvmlReturn_t rc, std::string_view call, DeviceTelemetry& t) {
    if (rc == NVML_SUCCESS) return true;
    if (rc == NVML_ERROR_UNINITIALIZED) session_lost_ = true;
    if (rc != NVML_ERROR_NOT_SUPPORTED) {
      t.warnings.push_back(
          absl::StrCat("GPU ", t.index, ": ", ToAbsl(call), " failed: ", lib_->ErrorString(rc)));
    }
    return false;
  }

  void ReadGpu(Gpu& gpu, absl::Time now, DeviceTelemetry& t) {
    const NvmlLibrary& lib = *lib_;
    if (lib.utilization_rates != nullptr) {
      nvml::nvmlUtilization_t u{};
      if (Check(lib.utilization_rates(gpu.handle, &u), "nvmlDeviceGetUtilizationRates", t)) {
        t.utilization_ratio = RatioFromPercent(u.gpu, "utilization.gpu", t);
        t.memory_busy_ratio = RatioFromPercent(u.memory, "utilization.memory", t);
      }
    }
    nvml::nvmlMemory_t memory{};
    if (Check(lib.memory_info(gpu.handle, &memory), "nvmlDeviceGetMemoryInfo", t)) {
      t.memory_used_bytes = memory.used;
      t.memory_total_bytes = memory.total;
    }
    if (lib.power_usage != nullptr) {
      unsigned int milliwatts = 0;
      if (Check(lib.power_usage(gpu.handle, &milliwatts), "nvmlDeviceGetPowerUsage", t)) {
        t.power_watts = milliwatts / 1000.0;
      }
    }
    if (lib.total_energy != nullptr) {
      unsigned long long millijoules = 0;
      if (Check(lib.total_energy(gpu.handle, &millijoules), "nvmlDeviceGetTotalEnergyConsumption",
                t)) {
        t.energy_joules = static_cast<double>(millijoules) / 1000.0;
      }
    }
    ReadTemperature(gpu, t);
    if (gpu.gpm) ReadGpm(gpu, now, t);
  }

  void ReadTemperature(Gpu& gpu, DeviceTelemetry& t) {
    const NvmlLibrary& lib = *lib_;
    if (lib.temperature_v != nullptr) {
      nvml::nvmlTemperature_t temperature{};
      temperature.version = nvml::nvmlTemperature_v1;
      temperature.sensorType = nvml::NVML_TEMPERATURE_GPU;
      if (Check(lib.temperature_v(gpu.handle, &temperature), "nvmlDeviceGetTemperatureV", t)) {
        t.temperature_celsius = temperature.temperature;
      }
      return;
    }
    if (lib.temperature != nullptr) {
      unsigned int celsius = 0;
      if (Check(lib.temperature(gpu.handle, nvml::NVML_TEMPERATURE_GPU, &celsius),
                "nvmlDeviceGetTemperature", t)) {
        t.temperature_celsius = celsius;
      }
    }
  }

  void ReadGpm(Gpu& gpu, absl::Time now, DeviceTelemetry& t) {
    const NvmlLibrary& lib = *lib_;
    if (!gpu.previous_at) {
      if (Check(lib.gpm_sample_get(gpu.handle, gpu.previous), "nvmlGpmSampleGet", t)) {
        gpu.previous_at = now;
      }
      return;
    }
    if (now - *gpu.previous_at < kMinGpmInterval) return;  // too soon: keep the older sample
    if (!Check(lib.gpm_sample_get(gpu.handle, gpu.current), "nvmlGpmSampleGet", t)) {
      gpu.previous_at.reset();
      return;
    }
    if (metrics_ == nullptr) metrics_ = std::make_unique<nvml::nvmlGpmMetricsGet_t>();
    nvml::nvmlGpmMetricsGet_t& get = *metrics_;
    constexpr unsigned int kIds[] = {nvml::NVML_GPM_METRIC_SM_UTIL,
                                     nvml::NVML_GPM_METRIC_ANY_TENSOR_UTIL,
                                     nvml::NVML_GPM_METRIC_DRAM_BW_UTIL};
    get.version = nvml::NVML_GPM_METRICS_GET_VERSION;
    get.numMetrics = 3;
    get.sample1 = gpu.previous;
    get.sample2 = gpu.current;
    for (unsigned int i = 0; i < 3; ++i) {
      get.metrics[i] = nvml::nvmlGpmMetric_t{};
      get.metrics[i].metricId = kIds[i];
    }
    // The new sample starts the next interval whatever the metrics call says.
    std::swap(gpu.previous, gpu.current);
    gpu.previous_at = now;
    if (!Check(lib.gpm_metrics_get(&get), "nvmlGpmMetricsGet", t)) return;
    std::optional<double>* targets[] = {&t.sm_activity_ratio, &t.tensor_activity_ratio,
                                        &t.memory_bandwidth_ratio};
    constexpr std::string_view kNames[] = {"GPM SM_UTIL", "GPM ANY_TENSOR_UTIL",
                                           "GPM DRAM_BW_UTIL"};
    for (unsigned int i = 0; i < 3; ++i) {
      const nvml::nvmlGpmMetric_t& m = get.metrics[i];
      if (!Check(m.nvmlReturn, kNames[i], t)) continue;
      *targets[i] = RatioFromPercent(m.value, kNames[i], t);
    }
  }

  const TelemetryContext context_;
  std::unique_ptr<NvmlLibrary> lib_;  // open and initialised, or null
  bool session_lost_ = false;
  std::vector<Gpu> gpus_;
  std::map<std::string, size_t> by_bus_;                // sysfs bus id -> gpus_ position
  std::map<std::string, size_t> by_uuid_;               // GPU-<uuid> -> gpus_ position
  std::unique_ptr<nvml::nvmlGpmMetricsGet_t> metrics_;  // 13 KB, reused
};

}  // namespace

std::unique_ptr<TelemetryReader> MakeNvidiaTelemetryReader(const TelemetryContext& context) {
  return std::make_unique<NvmlTelemetryReader>(context);
}

}  // namespace tessera

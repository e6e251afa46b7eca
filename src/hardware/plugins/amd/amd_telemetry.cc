#include "hardware/plugins/amd/amd_telemetry.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "hardware/plugins/common/telemetry_files.h"

namespace tessera {
namespace {

constexpr std::string_view kFamily = "amd";

class AmdTelemetryReader final : public TelemetryReader {
 public:
  explicit AmdTelemetryReader(Sysroot sysroot) : sysroot_(std::move(sysroot)) {}

  FamilyTelemetry Read(std::span<const Device> devices, absl::Time /*now*/) override {
    FamilyTelemetry out;
    for (const Device& device : devices) {
      DeviceTelemetry t = EmptyTelemetry(device);
      if (CheckFamily(device, kFamily, t)) ReadGpu(device, t);
      out.devices.push_back(std::move(t));
    }
    return out;
  }

 private:
  void ReadGpu(const Device& device, DeviceTelemetry& t) const {
    const std::string dir = absl::StrCat("/sys/bus/pci/devices/", device.pci_bus_id);
    if (device.pci_bus_id.empty() || !sysroot_.IsDirectory(dir)) {
      t.warnings.push_back(absl::StrCat("GPU ", device.index, ": no sysfs directory ", dir));
      return;
    }
    t.source = "sysfs";
    t.utilization_ratio = ReadPercentAttribute(sysroot_, dir + "/gpu_busy_percent", t);
    t.memory_busy_ratio = ReadPercentAttribute(sysroot_, dir + "/mem_busy_percent", t);
    t.memory_used_bytes = ReadUnsignedAttribute(sysroot_, dir + "/mem_info_vram_used", t);
    t.memory_total_bytes = ReadUnsignedAttribute(sysroot_, dir + "/mem_info_vram_total", t);
    const std::optional<std::string> hwmon = FindHwmonDir(sysroot_, device.pci_bus_id, "amdgpu");
    if (!hwmon) return;
    t.power_watts = ReadScaledAttribute(sysroot_, *hwmon + "/power1_average", 1e-6, t);
    if (!t.power_watts) {
      t.power_watts = ReadScaledAttribute(sysroot_, *hwmon + "/power1_input", 1e-6, t);
    }
    t.temperature_celsius = ReadHwmonTemperature(sysroot_, *hwmon, "edge", 1, t);
    if (!t.temperature_celsius) {
      t.temperature_celsius = ReadHwmonTemperature(sysroot_, *hwmon, "junction", 2, t);
    }
    t.memory_temperature_celsius = ReadHwmonTemperature(sysroot_, *hwmon, "mem", 3, t);
  }

  const Sysroot sysroot_;
};

}  // namespace

std::unique_ptr<TelemetryReader> MakeAmdTelemetryReader(const TelemetryContext& context) {
  return std::make_unique<AmdTelemetryReader>(context.sysroot);
}

}  // namespace tessera

#include "hardware/plugins/intel_gpu/intel_gpu_telemetry.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "hardware/plugins/common/telemetry_files.h"

namespace tessera {
namespace {

constexpr std::string_view kFamily = "intel-gpu";

class IntelGpuTelemetryReader final : public TelemetryReader {
 public:
  explicit IntelGpuTelemetryReader(Sysroot sysroot) : sysroot_(std::move(sysroot)) {}

  FamilyTelemetry Read(std::span<const Device> devices, absl::Time now) override {
    FamilyTelemetry out;
    for (const Device& device : devices) {
      DeviceTelemetry t = EmptyTelemetry(device);
      if (CheckFamily(device, kFamily, t)) ReadGpu(device, now, t);
      out.devices.push_back(std::move(t));
    }
    return out;
  }

 private:
  void ReadGpu(const Device& device, absl::Time now, DeviceTelemetry& t) {
    const std::string dir = absl::StrCat("/sys/bus/pci/devices/", device.pci_bus_id);
    if (device.pci_bus_id.empty() || !sysroot_.IsDirectory(dir)) {
      t.warnings.push_back(absl::StrCat("GPU ", device.index, ": no sysfs directory ", dir));
      return;
    }
    t.source = "sysfs";
    auto driver = device.attributes.find("driver");
    const std::string hwmon_name = driver != device.attributes.end() ? driver->second : "i915";
    const std::optional<std::string> hwmon = FindHwmonDir(sysroot_, device.pci_bus_id, hwmon_name);
    if (!hwmon) return;  // a kernel before hwmon support: nothing to read
    t.energy_joules = ReadScaledAttribute(sysroot_, *hwmon + "/energy1_input", 1e-6, t);
    if (t.energy_joules) t.power_watts = energy_.Update(device.pci_bus_id, *t.energy_joules, now);
    t.temperature_celsius = ReadHwmonTemperature(sysroot_, *hwmon, "pkg", 2, t);
    t.memory_temperature_celsius = ReadHwmonTemperature(sysroot_, *hwmon, "vram", 3, t);
  }

  const Sysroot sysroot_;
  EnergyRate energy_;  // keyed by PCI bus id
};

}  // namespace

std::unique_ptr<TelemetryReader> MakeIntelGpuTelemetryReader(const TelemetryContext& context) {
  return std::make_unique<IntelGpuTelemetryReader>(context.sysroot);
}

}  // namespace tessera

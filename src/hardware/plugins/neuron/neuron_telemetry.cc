#include "hardware/plugins/neuron/neuron_telemetry.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/string_util.h"
#include "hardware/plugins/common/device_attributes.h"
#include "hardware/plugins/common/telemetry_files.h"

namespace tessera {
namespace {

constexpr std::string_view kFamily = "neuron";
constexpr std::string_view kDeviceRoot = "/sys/devices/virtual/neuron_device";

class NeuronTelemetryReader final : public TelemetryReader {
 public:
  explicit NeuronTelemetryReader(Sysroot sysroot) : sysroot_(std::move(sysroot)) {}

  FamilyTelemetry Read(std::span<const Device> devices, absl::Time /*now*/) override {
    FamilyTelemetry out;
    std::map<int, ChipPower> power;  // each chip's file is read once per reading
    for (const Device& device : devices) {
      DeviceTelemetry t = EmptyTelemetry(device);
      if (CheckFamily(device, kFamily, t)) ReadCore(device, power, t);
      out.devices.push_back(std::move(t));
    }
    return out;
  }

 private:
  struct ChipPower {
    std::optional<double> ratio;
    std::vector<std::string> warnings;
  };

  void ReadCore(const Device& device, std::map<int, ChipPower>& power, DeviceTelemetry& t) const {
    const std::optional<int> chip = IndexAttribute(device, "chip");
    const std::optional<int> core = IndexAttribute(device, "core_in_chip");
    if (!chip || !core) {
      t.warnings.push_back(absl::StrCat("NeuronCore ", device.index,
                                        ": no chip / core_in_chip attribute to find its sysfs"));
      return;
    }
    const std::string chip_dir = absl::StrCat(ToAbsl(kDeviceRoot), "/neuron", *chip);
    if (!sysroot_.IsDirectory(chip_dir)) {
      t.warnings.push_back(absl::StrCat("NeuronCore ", device.index, ": no ", chip_dir));
      return;
    }
    t.source = "sysfs";
    t.memory_used_bytes = DeviceMemoryInUse(
        absl::StrCat(chip_dir, "/neuron_core", *core, "/stats/memory_usage/device_mem"), t);
    auto [it, inserted] = power.try_emplace(*chip);
    if (inserted) it->second = ReadChipPower(chip_dir + "/stats/power/utilization");
    t.power_ratio = it->second.ratio;
    t.warnings.insert(t.warnings.end(), it->second.warnings.begin(), it->second.warnings.end());
  }

  // The sum of <dir>/<category>/total; nullopt when the driver has no such directory.
  std::optional<uint64_t> DeviceMemoryInUse(const std::string& dir, DeviceTelemetry& t) const {
    auto categories = sysroot_.ListDirectory(dir);
    if (!categories.ok()) return std::nullopt;
    uint64_t sum = 0;
    bool any = false;
    for (const std::string& category : *categories) {
      const size_t warnings = t.warnings.size();
      std::optional<uint64_t> total =
          ReadUnsignedAttribute(sysroot_, absl::StrCat(dir, "/", category, "/total"), t);
      if (t.warnings.size() != warnings) return std::nullopt;  // a partial sum would understate
      if (total) {
        sum += *total;
        any = true;
      }
    }
    if (!any) return std::nullopt;
    return sum;
  }

  ChipPower ReadChipPower(const std::string& path) const {
    ChipPower p;
    absl::StatusOr<std::string> text = sysroot_.ReadAttribute(path);
    if (!text.ok()) {
      if (!absl::IsNotFound(text.status())) {
        p.warnings.push_back(std::string(text.status().message()));
      }
      return p;
    }
    std::vector<std::string> fields = absl::StrSplit(*text, ',');
    double average = 0;
    if (fields.size() != 5 || !absl::SimpleAtod(ToAbsl(Trim(fields[4])), &average)) {
      p.warnings.push_back(
          absl::StrCat(path, ": ", Quote(*text), " is not <status>,<time>,<min>,<max>,<avg>"));
      return p;
    }
    const std::string_view status = Trim(fields[0]);
    if (status == "POWER_STATUS_NO_DATA") return p;
    if (status != "POWER_STATUS_VALID") {
      p.warnings.push_back(absl::StrCat(path, ": sampling status ", ToAbsl(status)));
      return p;
    }
    DeviceTelemetry scratch;
    p.ratio = RatioFromPercent(average, path, scratch);
    p.warnings = std::move(scratch.warnings);
    return p;
  }

  const Sysroot sysroot_;
};

}  // namespace

std::unique_ptr<TelemetryReader> MakeNeuronTelemetryReader(const TelemetryContext& context) {
  return std::make_unique<NeuronTelemetryReader>(context.sysroot);
}

}  // namespace tessera

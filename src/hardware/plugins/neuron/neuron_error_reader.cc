#include "hardware/plugins/neuron/neuron_error_reader.h"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "hardware/plugins/common/device_attributes.h"

namespace tessera {
namespace {

constexpr std::string_view kFamily = "neuron";
constexpr std::string_view kDeviceRoot = "/sys/devices/virtual/neuron_device";

struct Counter {
  const char* name;  // the counter's folder
  const char* what;  // for people
};
constexpr Counter kCoreCounters[] = {{"hw_error", "hardware errors (NRT_HW_ERROR)"}};
constexpr Counter kChipCounters[] = {
    {"mem_ecc_uncorrected", "uncorrected device-memory ECC errors"},
    {"mem_ecc_repairable_uncorrected", "repairable uncorrected device-memory ECC errors"},
    {"sram_ecc_uncorrected", "uncorrected SRAM ECC errors"},
};

class NeuronErrorReader final : public DeviceErrorReader {
 public:
  explicit NeuronErrorReader(Sysroot sysroot) : sysroot_(std::move(sysroot)) {}

  DeviceErrorSnapshot Snapshot(std::span<const Device> devices, absl::Time now) override {
    DeviceErrorSnapshot snapshot;
    snapshot.taken = now;
    Visit(devices,
          [&](const std::string& key, const std::string& path, const std::string&, const char*) {
            if (std::optional<uint64_t> value = ReadTotal(path)) snapshot.marks[key] = *value;
          });
    return snapshot;
  }

  DeviceErrorReport MessagesSince(const DeviceErrorSnapshot& snapshot,
                                  std::span<const Device> devices, absl::Time /*now*/) override {
    DeviceErrorReport report;
    Visit(devices, [&](const std::string& key, const std::string& path, const std::string& label,
                       const char* what) {
      auto before = snapshot.marks.find(key);
      if (before == snapshot.marks.end()) return;
      std::optional<uint64_t> after = ReadTotal(path);
      if (!after.has_value()) return;
      std::string line = CounterRise(label, what, before->second, *after);
      if (!line.empty()) report.messages.push_back(std::move(line));
    });
    return report;
  }

 private:
  // Calls `visit(key, path of the counter's total, label, what)` for each counter of `devices`:
  // each core's, and each chip's once.
  template <typename Fn>
  void Visit(std::span<const Device> devices, Fn&& visit) const {
    std::set<int> chips_seen;
    for (const Device& device : devices) {
      if (device.family != kFamily) continue;
      const std::optional<int> chip = IndexAttribute(device, "chip");
      const std::optional<int> core = IndexAttribute(device, "core_in_chip");
      if (!chip || !core) continue;
      const std::string chip_dir = absl::StrCat(ToAbsl(kDeviceRoot), "/neuron", *chip);
      const std::string core_label = absl::StrCat("NeuronCore ", device.index);
      for (const Counter& c : kCoreCounters) {
        visit(absl::StrCat(device.index, "/", c.name),
              absl::StrCat(chip_dir, "/neuron_core", *core, "/stats/status/", c.name, "/total"),
              core_label, c.what);
      }
      if (!chips_seen.insert(*chip).second) continue;
      const std::string chip_label = absl::StrCat("Neuron device ", *chip);
      for (const Counter& c : kChipCounters) {
        visit(absl::StrCat("chip", *chip, "/", c.name),
              absl::StrCat(chip_dir, "/stats/hardware/", c.name, "/total"), chip_label, c.what);
      }
    }
  }

  std::optional<uint64_t> ReadTotal(const std::string& path) const {
    auto text = sysroot_.ReadAttribute(path);
    uint64_t value = 0;
    if (!text.ok() || !absl::SimpleAtoi(ToAbsl(*text), &value)) return std::nullopt;
    return value;
  }

  const Sysroot sysroot_;
};

}  // namespace

std::unique_ptr<DeviceErrorReader> MakeNeuronErrorReader(const DeviceErrorContext& context) {
  return std::make_unique<NeuronErrorReader>(context.sysroot);
}

}  // namespace tessera

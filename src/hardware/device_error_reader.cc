#include "hardware/device_error_reader.h"

#include "absl/strings/str_cat.h"
#include "base/string_util.h"

namespace tessera {
namespace {

class NoDeviceErrorReader final : public DeviceErrorReader {
 public:
  DeviceErrorSnapshot Snapshot(std::span<const Device> /*devices*/, absl::Time now) override {
    DeviceErrorSnapshot snapshot;
    snapshot.taken = now;
    return snapshot;
  }
  DeviceErrorReport MessagesSince(const DeviceErrorSnapshot& /*snapshot*/,
                                  std::span<const Device> /*devices*/,
                                  absl::Time /*now*/) override {
    return {};
  }
};

}  // namespace

std::unique_ptr<DeviceErrorReader> MakeNoDeviceErrorReader() {
  return std::make_unique<NoDeviceErrorReader>();
}

std::string DeviceLabel(std::string_view noun, const Device& device) {
  std::string label = absl::StrCat(ToAbsl(noun), " ", device.index);
  if (!device.pci_bus_id.empty()) absl::StrAppend(&label, " (", device.pci_bus_id, ")");
  return label;
}

std::string CounterRise(std::string_view label, std::string_view what, uint64_t before,
                        uint64_t after) {
  if (after <= before) return "";
  return absl::StrCat(ToAbsl(label), ": ", ToAbsl(what), " rose by ", after - before);
}

}  // namespace tessera

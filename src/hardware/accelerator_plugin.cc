#include "hardware/accelerator_plugin.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/string_util.h"

namespace tessera {

bool MaskSelectsNoDevice(std::string_view trimmed_value) {
  return trimmed_value.empty() || trimmed_value == "NoDevFiles";
}

absl::StatusOr<std::vector<int>> AcceleratorPlugin::ParseMask(
    std::string_view value, const std::vector<Device>& /*devices*/) const {
  std::vector<int> indices;
  const std::string_view trimmed = Trim(value);
  if (MaskSelectsNoDevice(trimmed)) return indices;
  for (absl::string_view part : absl::StrSplit(ToAbsl(trimmed), ',')) {
    int index = 0;
    if (!absl::SimpleAtoi(part, &index) || index < 0) {
      return absl::InvalidArgumentError(absl::StrCat(ToAbsl(visible_devices_env()), "=",
                                                     Quote(value), ": ", Quote(ToStd(part)),
                                                     " is not a device index"));
    }
    indices.push_back(index);
  }
  return indices;
}

std::string AcceleratorPlugin::FormatMask(std::span<const int> physical_indices) const {
  return absl::StrJoin(physical_indices, ",");
}

EnvChanges AcceleratorPlugin::IsolationEnv(std::span<const int> assigned,
                                           const std::vector<Device>& /*devices*/) const {
  return {EnvChange{std::string(visible_devices_env()), FormatMask(assigned)}};
}

std::unique_ptr<TelemetryReader> AcceleratorPlugin::OpenTelemetry(
    const TelemetryContext& /*context*/) const {
  return MakeNoTelemetryReader(std::string(family()), "no device telemetry source");
}

std::unique_ptr<DeviceErrorReader> AcceleratorPlugin::OpenErrorWatch(
    const DeviceErrorContext& /*context*/) const {
  return MakeNoDeviceErrorReader();
}

}  // namespace tessera

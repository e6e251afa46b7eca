#include "hardware/telemetry_reader.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/string_util.h"

namespace tessera {
namespace {

class NoTelemetryReader final : public TelemetryReader {
 public:
  NoTelemetryReader(std::string family, std::string why)
      : family_(std::move(family)), why_(std::move(why)) {}

  FamilyTelemetry Read(std::span<const Device> devices, absl::Time /*now*/) override {
    FamilyTelemetry out = NothingRead(devices, why_);
    for (size_t i = 0; i < devices.size(); ++i) CheckFamily(devices[i], family_, out.devices[i]);
    return out;
  }

 private:
  const std::string family_;
  const std::string why_;
};

}  // namespace

std::unique_ptr<TelemetryReader> MakeNoTelemetryReader(std::string family, std::string why) {
  return std::make_unique<NoTelemetryReader>(std::move(family), std::move(why));
}

DeviceTelemetry EmptyTelemetry(const Device& device) {
  DeviceTelemetry t;
  t.family = device.family;
  t.index = device.index;
  return t;
}

FamilyTelemetry NothingRead(std::span<const Device> devices, std::string why) {
  FamilyTelemetry out;
  for (const Device& d : devices) out.devices.push_back(EmptyTelemetry(d));
  if (!why.empty()) out.warnings.push_back(std::move(why));
  return out;
}

bool CheckFamily(const Device& device, std::string_view family, DeviceTelemetry& out) {
  if (device.family == family) return true;
  out.warnings.push_back(absl::StrCat(ToAbsl(family), " reader: device ", device.family, "/",
                                      device.index, " is not a ", ToAbsl(family), " device"));
  return false;
}

std::optional<double> RatioFromPercent(double percent, std::string_view what,
                                       DeviceTelemetry& out) {
  if (std::isfinite(percent) && percent >= 0 && percent <= 100) return percent / 100.0;
  out.warnings.push_back(absl::StrCat(ToAbsl(what), " ", percent, " is not a percentage"));
  return std::nullopt;
}

}  // namespace tessera

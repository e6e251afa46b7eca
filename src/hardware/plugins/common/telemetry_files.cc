#include "hardware/plugins/common/telemetry_files.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "hardware/plugins/common/index_list.h"
#include "hardware/telemetry_reader.h"

namespace tessera {
namespace {

// The integer of an attribute, nullopt silently when the file is missing.
std::optional<int64_t> ReadIntegerAttribute(const Sysroot& sysroot, const std::string& path,
                                            DeviceTelemetry& out) {
  absl::StatusOr<int64_t> value = sysroot.ReadInteger(path);
  if (value.ok()) return *value;
  if (!absl::IsNotFound(value.status())) {
    out.warnings.push_back(std::string(value.status().message()));
  }
  return std::nullopt;
}

}  // namespace

std::optional<double> ReadScaledAttribute(const Sysroot& sysroot, const std::string& linux_path,
                                          double scale, DeviceTelemetry& out) {
  std::optional<int64_t> value = ReadIntegerAttribute(sysroot, linux_path, out);
  if (!value) return std::nullopt;
  return static_cast<double>(*value) * scale;
}

std::optional<double> ReadPercentAttribute(const Sysroot& sysroot, const std::string& linux_path,
                                           DeviceTelemetry& out) {
  std::optional<double> percent = ReadScaledAttribute(sysroot, linux_path, 1, out);
  if (!percent) return std::nullopt;
  return RatioFromPercent(*percent, linux_path, out);
}

std::optional<uint64_t> ReadUnsignedAttribute(const Sysroot& sysroot, const std::string& linux_path,
                                              DeviceTelemetry& out) {
  std::optional<int64_t> value = ReadIntegerAttribute(sysroot, linux_path, out);
  if (!value) return std::nullopt;
  if (*value < 0) {
    out.warnings.push_back(absl::StrCat(linux_path, ": ", *value, " is negative"));
    return std::nullopt;
  }
  return static_cast<uint64_t>(*value);
}

std::optional<std::string> FindHwmonDir(const Sysroot& sysroot, std::string_view bus_id,
                                        std::string_view hwmon_name) {
  const std::string parent = absl::StrCat("/sys/bus/pci/devices/", ToAbsl(bus_id), "/hwmon");
  auto names = sysroot.ListDirectory(parent);
  if (!names.ok()) return std::nullopt;
  std::optional<std::string> first;
  for (const std::string& name : *names) {
    if (!NumberedEntry(name, "hwmon")) continue;
    const std::string dir = absl::StrCat(parent, "/", name);
    if (auto n = sysroot.ReadAttribute(dir + "/name"); n.ok() && *n == hwmon_name) return dir;
    if (!first) first = dir;
  }
  return first;
}

std::optional<double> ReadHwmonTemperature(const Sysroot& sysroot, const std::string& hwmon_dir,
                                           std::string_view label, int fallback_number,
                                           DeviceTelemetry& out) {
  auto names = sysroot.ListDirectory(hwmon_dir);
  if (!names.ok()) return std::nullopt;
  bool any_label = false;
  for (const std::string& name : *names) {
    if (!absl::StartsWith(name, "temp") || !absl::EndsWith(name, "_label")) continue;
    any_label = true;
    auto text = sysroot.ReadAttribute(absl::StrCat(hwmon_dir, "/", name));
    if (!text.ok() || *text != label) continue;
    const std::string input = absl::StrCat(
        hwmon_dir, "/", name.substr(0, name.size() - std::string_view("_label").size()), "_input");
    return ReadScaledAttribute(sysroot, input, 1e-3, out);
  }
  if (any_label) return std::nullopt;
  return ReadScaledAttribute(sysroot, absl::StrCat(hwmon_dir, "/temp", fallback_number, "_input"),
                             1e-3, out);
}

std::optional<double> EnergyRate::Update(const std::string& key, double joules, absl::Time now) {
  auto it = last_.find(key);
  if (it == last_.end()) {
    last_.emplace(key, Sample{joules, now});
    return std::nullopt;
  }
  Sample& previous = it->second;
  if (joules < previous.joules) {  // the driver reloaded: the counter restarted
    previous = Sample{joules, now};
    return std::nullopt;
  }
  if (now <= previous.at) return std::nullopt;  // keep the earlier sample for a longer window
  const double watts = (joules - previous.joules) / absl::ToDoubleSeconds(now - previous.at);
  previous = Sample{joules, now};
  return watts;
}

}  // namespace tessera

// Reading device figures from sysfs for the telemetry readers of the sysfs-based families (amd,
// intel-gpu, neuron): numbers in attribute files, hwmon sensors of a PCI function, and power
// derived from an energy counter between readings. A missing file means the product does not
// offer the figure (absent, no warning); a file that cannot be read or does not hold a number
// is absent with a warning naming the path.
// Part of tessera_plugin_support. Functions are thread-safe; EnergyRate is not (one per reader).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "hardware/device_telemetry.h"
#include "hardware/sysroot.h"

namespace tessera {

// The integer in `linux_path` (decimal, or 0x hex) times `scale`, e.g. 1e-6 for a µW file.
std::optional<double> ReadScaledAttribute(const Sysroot& sysroot, const std::string& linux_path,
                                          double scale, DeviceTelemetry& out);
// An integer percent attribute (amdgpu's gpu_busy_percent) as a ratio in [0, 1].
std::optional<double> ReadPercentAttribute(const Sysroot& sysroot, const std::string& linux_path,
                                           DeviceTelemetry& out);
// A non-negative integer attribute (byte counts).
std::optional<uint64_t> ReadUnsignedAttribute(const Sysroot& sysroot, const std::string& linux_path,
                                              DeviceTelemetry& out);

// The hwmon directory of the PCI function `bus_id`, /sys/bus/pci/devices/<bus>/hwmon/hwmon<N>:
// the one whose `name` file says `hwmon_name` ("amdgpu", "i915", "xe"), else the first.
// nullopt when the function has none.
std::optional<std::string> FindHwmonDir(const Sysroot& sysroot, std::string_view bus_id,
                                        std::string_view hwmon_name);

// The temperature in °C of the hwmon sensor labelled `label` (temp<N>_label), read from
// temp<N>_input in m°C. When no temp<N>_label file exists at all, temp<fallback_number>_input is
// taken as that sensor (drivers number their sensors in a fixed order).
std::optional<double> ReadHwmonTemperature(const Sysroot& sysroot, const std::string& hwmon_dir,
                                           std::string_view label, int fallback_number,
                                           DeviceTelemetry& out);

// Average power from successive readings of cumulative energy counters, one per key.
class EnergyRate {
 public:
  // Records `joules` at `now` for `key` and returns the watts since the previous record; nullopt
  // on the first record, when time did not advance, or when the counter went back (the driver
  // reloaded), which restarts the pair.
  std::optional<double> Update(const std::string& key, double joules, absl::Time now);

 private:
  struct Sample {
    double joules = 0;
    absl::Time at;
  };
  std::map<std::string, Sample> last_;
};

}  // namespace tessera

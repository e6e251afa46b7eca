// SimulatedTelemetryModel: device figures for simulated hosts (--simulate), so metrics,
// dashboards and promtool run without hardware. The figures are a deterministic function of the
// seed, the device, the time and whether a worker holds the device, the one input a node agent
// feeds it (the set of busy device indices):
//
//   step    = floor(unix seconds of `now` / 10)   (memory: / 60, so it changes slowly)
//   u(salt) = a hash of (seed, family, index, step, salt) mapped to [0, 1)  (SplitMix64, stable)
//   held:   utilization = 0.60 + 0.35 * u(0)      free: 0
//           memory used = total * (0.40 + 0.50 * u(1) over the memory step)    free: 0
//   duty cycle = utilization; SM activity = 0.9 x; tensor activity = 0.7 x; memory busy = 0.5 x;
//   memory bandwidth = 0.6 x (x = utilization)
//   power = max * (0.12 + 0.88 * utilization), max by family (nvidia 700 W, amd 750, intel-gpu
//   600, tpu 200, neuron 200, gaudi 600, else 300); power ratio = power / max
//   energy = the sum over readings of (power at a reading x time to the next), from 0 at the
//   model's first reading of the device
//   temperature = 30 + 45 x °C; memory temperature = 28 + 40 x °C
// Every figure is present (memory only when the device has a memory size), so every panel has
// data. Source "simulated".
// Not thread-safe: one model per reader (it keeps each device's energy), one caller.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "hardware/device.h"
#include "hardware/device_telemetry.h"

namespace tessera {

class SimulatedTelemetryModel {
 public:
  explicit SimulatedTelemetryModel(uint64_t seed) : seed_(seed) {}

  // One reading of `devices` (one family's) at `now`; `busy` holds the physical indices of those
  // that workers hold.
  FamilyTelemetry Read(std::span<const Device> devices, const std::set<int>& busy, absl::Time now);

 private:
  struct Energy {
    double joules = 0;
    double watts = 0;
    absl::Time at;
  };
  DeviceTelemetry Figures(const Device& device, bool held, absl::Time now) const;

  const uint64_t seed_;
  std::map<std::pair<std::string, int>, Energy> energy_;  // (family, index)
};

}  // namespace tessera

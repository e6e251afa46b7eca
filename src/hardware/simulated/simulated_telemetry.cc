#include "hardware/simulated/simulated_telemetry.h"

#include <cmath>
#include <string_view>

namespace tessera {
namespace {

constexpr int64_t kStepSeconds = 10;
constexpr int64_t kMemoryStepSeconds = 60;

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

int64_t Step(absl::Time now, int64_t seconds) {
  const int64_t t = absl::ToUnixSeconds(now);
  return t >= 0 ? t / seconds : (t - seconds + 1) / seconds;  // floor
}

double MaxWatts(std::string_view family) {
  if (family == "nvidia") return 700;
  if (family == "amd") return 750;
  if (family == "intel-gpu" || family == "gaudi") return 600;
  if (family == "tpu" || family == "neuron") return 200;
  return 300;
}

}  // namespace

DeviceTelemetry SimulatedTelemetryModel::Figures(const Device& device, bool held,
                                                 absl::Time now) const {
  auto u = [&](int64_t step, uint64_t salt) {
    uint64_t h = SplitMix64(seed_ ^ Fnv1a(device.family));
    h = SplitMix64(h ^ static_cast<uint64_t>(device.index));
    h = SplitMix64(h ^ static_cast<uint64_t>(step));
    h = SplitMix64(h ^ salt);
    return static_cast<double>(h >> 11) / static_cast<double>(1ull << 53);  // [0, 1)
  };
  DeviceTelemetry t;
  t.family = device.family;
  t.index = device.index;
  t.source = "simulated";
  const double x = held ? 0.60 + 0.35 * u(Step(now, kStepSeconds), 0) : 0.0;
  t.utilization_ratio = x;
  t.duty_cycle_ratio = x;
  t.sm_activity_ratio = 0.9 * x;
  t.tensor_activity_ratio = 0.7 * x;
  t.memory_busy_ratio = 0.5 * x;
  t.memory_bandwidth_ratio = 0.6 * x;
  if (device.memory_bytes > 0) {
    t.memory_total_bytes = device.memory_bytes;
    const double share = held ? 0.40 + 0.50 * u(Step(now, kMemoryStepSeconds), 1) : 0.0;
    t.memory_used_bytes = static_cast<uint64_t>(std::floor(share * device.memory_bytes));
  }
  const double max_watts = MaxWatts(device.family);
  t.power_watts = max_watts * (0.12 + 0.88 * x);
  t.power_ratio = *t.power_watts / max_watts;
  t.temperature_celsius = 30 + 45 * x;
  t.memory_temperature_celsius = 28 + 40 * x;
  return t;
}

FamilyTelemetry SimulatedTelemetryModel::Read(std::span<const Device> devices,
                                              const std::set<int>& busy, absl::Time now) {
  FamilyTelemetry out;
  for (const Device& device : devices) {
    DeviceTelemetry t = Figures(device, busy.count(device.index) > 0, now);
    auto [it, first] = energy_.try_emplace({device.family, device.index});
    Energy& e = it->second;
    if (!first && now > e.at) e.joules += e.watts * absl::ToDoubleSeconds(now - e.at);
    if (first || now > e.at) {
      e.watts = *t.power_watts;
      e.at = now;
    }
    t.energy_joules = e.joules;
    out.devices.push_back(std::move(t));
  }
  return out;
}

}  // namespace tessera

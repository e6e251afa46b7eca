#include "hardware/plugins/nvidia/nvidia_plugin.h"

#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/string_util.h"
#include "hardware/plugins/common/gpu_plugin.h"
#include "hardware/plugins/nvidia/nvidia_detect.h"
#include "hardware/plugins/nvidia/nvidia_error_reader.h"
#include "hardware/plugins/nvidia/nvidia_telemetry.h"

namespace tessera {
namespace {

constexpr char kMaskVar[] = "CUDA_VISIBLE_DEVICES";

// The physical index of a GPU-<uuid> entry: an exact UUID or, as CUDA accepts, a prefix that
// names exactly one device.
absl::StatusOr<int> ResolveUuid(std::string_view value, std::string_view entry,
                                const std::vector<Device>& devices) {
  const Device* match = nullptr;
  int matches = 0;
  for (const Device& d : devices) {
    if (d.uuid == entry) return d.index;
    if (absl::StartsWith(ToAbsl(d.uuid), ToAbsl(entry))) {
      match = &d;
      ++matches;
    }
  }
  if (matches == 1) return match->index;
  return absl::InvalidArgumentError(
      absl::StrCat(kMaskVar, "=", Quote(value), ": ", Quote(entry),
                   matches == 0 ? " matches no GPU on this host" : " matches more than one GPU"));
}

class NvidiaPlugin final : public GpuPlugin {
 public:
  std::string_view family() const override { return "nvidia"; }
  std::string_view visible_devices_env() const override { return kMaskVar; }

  Detection Detect(const DetectionContext& context) const override { return DetectNvidia(context); }

  absl::StatusOr<std::vector<int>> ParseMask(std::string_view value,
                                             const std::vector<Device>& devices) const override {
    std::vector<int> indices;
    const std::string_view trimmed = Trim(value);
    if (MaskSelectsNoDevice(trimmed)) return indices;
    std::set<int> seen;
    for (absl::string_view raw : absl::StrSplit(ToAbsl(trimmed), ',')) {
      const std::string_view entry = Trim(ToStd(raw));
      int index = 0;
      if (absl::StartsWith(ToAbsl(entry), "MIG-")) {
        return absl::UnimplementedError(
            absl::StrCat(kMaskVar, "=", Quote(value), ": ", Quote(entry),
                         " is a MIG instance; MIG masks are not supported yet"));
      }
      if (absl::StartsWith(ToAbsl(entry), "GPU-")) {
        auto resolved = ResolveUuid(value, entry, devices);
        if (!resolved.ok()) return resolved.status();
        index = *resolved;
      } else if (!absl::SimpleAtoi(ToAbsl(entry), &index) || index < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(kMaskVar, "=", Quote(value), ": ", Quote(entry),
                         " is neither a device ordinal nor a GPU-<uuid>"));
      }
      if (!seen.insert(index).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(kMaskVar, "=", Quote(value), ": GPU ", index, " is listed twice"));
      }
      indices.push_back(index);
    }
    return indices;
  }

  EnvChanges IsolationEnv(std::span<const int> assigned,
                          const std::vector<Device>& devices) const override {
    EnvChanges env = AcceleratorPlugin::IsolationEnv(assigned, devices);
    // CUDA's default order is FASTEST_FIRST, which can differ from NVML's PCI bus order; our
    // device indices are NVML indices, so CUDA must number GPUs by PCI bus id for the mask's
    // ordinals to name the devices the scheduler chose.
    env.push_back(EnvChange{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"});
    return env;
  }

  std::unique_ptr<TelemetryReader> OpenTelemetry(const TelemetryContext& context) const override {
    return MakeNvidiaTelemetryReader(context);
  }

  std::unique_ptr<DeviceErrorReader> OpenErrorWatch(
      const DeviceErrorContext& context) const override {
    return MakeNvidiaErrorReader(context);
  }
};

}  // namespace

std::unique_ptr<AcceleratorPlugin> MakeNvidiaPlugin() { return std::make_unique<NvidiaPlugin>(); }

}  // namespace tessera

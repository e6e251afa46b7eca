#include "hardware/plugins/amd/amd_plugin.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/string_util.h"
#include "hardware/plugins/amd/amd_detection.h"
#include "hardware/plugins/amd/amd_error_reader.h"
#include "hardware/plugins/amd/amd_telemetry.h"
#include "hardware/plugins/common/gpu_plugin.h"
#include "hardware/plugins/common/index_list.h"

namespace tessera {
namespace {

// Thread-safe: stateless.
class AmdPlugin final : public GpuPlugin {
 public:
  std::string_view family() const override { return "amd"; }
  std::string_view visible_devices_env() const override { return "HIP_VISIBLE_DEVICES"; }

  Detection Detect(const DetectionContext& context) const override {
    return DetectAmdGpus(context);
  }

  // HIP accepts ordinals and, like CUDA, "GPU-<uuid>" entries; a UUID is resolved to its index.
  absl::StatusOr<std::vector<int>> ParseMask(std::string_view value,
                                             const std::vector<Device>& devices) const override {
    std::vector<int> out;
    const std::string_view trimmed = Trim(value);
    if (MaskSelectsNoDevice(trimmed)) return out;
    for (absl::string_view raw : absl::StrSplit(ToAbsl(trimmed), ',')) {
      const std::string_view part = Trim(ToStd(raw));
      if (part.substr(0, 4) == "GPU-") {
        const Device* match = nullptr;
        for (const Device& d : devices) {
          if (d.uuid == part) match = &d;
        }
        if (match == nullptr) {
          return absl::InvalidArgumentError(absl::StrCat("HIP_VISIBLE_DEVICES=", Quote(value),
                                                         ": no GPU has UUID ", Quote(part)));
        }
        out.push_back(match->index);
        continue;
      }
      auto one = ParseIndexList(part, IndexListOptions{});
      if (!one.ok() || one->size() != 1) {
        return absl::InvalidArgumentError(absl::StrCat("HIP_VISIBLE_DEVICES=", Quote(value), ": ",
                                                       Quote(part),
                                                       " is neither a GPU index nor a GPU-<uuid>"));
      }
      out.push_back(one->front());
    }
    return out;
  }

  std::unique_ptr<TelemetryReader> OpenTelemetry(const TelemetryContext& context) const override {
    return MakeAmdTelemetryReader(context);
  }

  std::unique_ptr<DeviceErrorReader> OpenErrorWatch(
      const DeviceErrorContext& context) const override {
    return MakeAmdErrorReader(context);
  }
};

}  // namespace

std::unique_ptr<AcceleratorPlugin> MakeAmdPlugin() { return std::make_unique<AmdPlugin>(); }

}  // namespace tessera

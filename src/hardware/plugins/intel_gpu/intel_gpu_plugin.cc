#include "hardware/plugins/intel_gpu/intel_gpu_plugin.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/string_util.h"
#include "hardware/plugins/common/gpu_plugin.h"
#include "hardware/plugins/common/index_list.h"
#include "hardware/plugins/intel_gpu/intel_gpu_detection.h"
#include "hardware/plugins/intel_gpu/intel_gpu_telemetry.h"

namespace tessera {
namespace {

constexpr std::string_view kBackend = "level_zero";

absl::Status MaskError(std::string_view value, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("ONEAPI_DEVICE_SELECTOR=", Quote(value), ": ", ToAbsl(why)));
}

// Thread-safe: stateless.
class IntelGpuPlugin final : public GpuPlugin {
 public:
  std::string_view family() const override { return "intel-gpu"; }
  std::string_view visible_devices_env() const override { return "ONEAPI_DEVICE_SELECTOR"; }

  Detection Detect(const DetectionContext& context) const override {
    return DetectIntelGpus(context);
  }

  // The selector grammar is "backend:devices[;backend:devices]". Terms for other backends
  // (opencl, cuda) select no Level Zero device; "*" and "gpu" select every device; sub-devices
  // ("0.1") and exclusions ("!level_zero:0") are refused, since Tessera schedules whole cards.
  absl::StatusOr<std::vector<int>> ParseMask(std::string_view value,
                                             const std::vector<Device>& devices) const override {
    std::vector<int> out;
    const std::string_view trimmed = Trim(value);
    if (MaskSelectsNoDevice(trimmed)) return out;
    for (absl::string_view raw_term : absl::StrSplit(ToAbsl(trimmed), ';', absl::SkipEmpty())) {
      const std::string_view term = Trim(ToStd(raw_term));
      if (!term.empty() && term[0] == '!') return MaskError(value, "exclusions are not supported");
      const size_t colon = term.find(':');
      if (colon == std::string_view::npos) {
        return MaskError(value, "expected backend:devices, e.g. level_zero:0,1");
      }
      const std::string backend = absl::AsciiStrToLower(ToAbsl(Trim(term.substr(0, colon))));
      if (backend != kBackend && backend != "*") continue;
      for (absl::string_view raw : absl::StrSplit(ToAbsl(term.substr(colon + 1)), ',')) {
        const std::string item = absl::AsciiStrToLower(ToAbsl(Trim(ToStd(raw))));
        if (item == "*" || item == "gpu") {
          for (const Device& d : devices) out.push_back(d.index);
          continue;
        }
        if (item.find('.') != std::string::npos) {
          return MaskError(value, absl::StrCat(Quote(item), ": sub-devices are not supported"));
        }
        auto one = ParseIndexList(item, {});
        if (!one.ok() || one->size() != 1) {
          return MaskError(value, absl::StrCat(Quote(item), " is not a device index"));
        }
        out.push_back(one->front());
      }
    }
    return out;
  }

  // "level_zero:0,1"; no device is "" (an empty selector list).
  std::string FormatMask(std::span<const int> physical_indices) const override {
    if (physical_indices.empty()) return "";
    return absl::StrCat(ToAbsl(kBackend), ":", absl::StrJoin(physical_indices, ","));
  }

  // Pins the meaning of the index: one device per card (not per tile, which the FLAT hierarchy
  // of recent Level Zero would expose) and PCI bus order, as detection numbers them.
  EnvChanges IsolationEnv(std::span<const int> assigned,
                          const std::vector<Device>&) const override {
    return {EnvChange{"ONEAPI_DEVICE_SELECTOR", FormatMask(assigned)},
            EnvChange{"ZE_FLAT_DEVICE_HIERARCHY", std::string("COMPOSITE")},
            EnvChange{"ZE_ENABLE_PCI_ID_DEVICE_ORDER", std::string("1")}};
  }

  std::unique_ptr<TelemetryReader> OpenTelemetry(const TelemetryContext& context) const override {
    return MakeIntelGpuTelemetryReader(context);
  }
};

}  // namespace

std::unique_ptr<AcceleratorPlugin> MakeIntelGpuPlugin() {
  return std::make_unique<IntelGpuPlugin>();
}

}  // namespace tessera

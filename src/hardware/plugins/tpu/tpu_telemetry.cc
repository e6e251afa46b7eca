#include "hardware/plugins/tpu/tpu_telemetry.h"

#include <map>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/string_util.h"
#include "hardware/plugins/tpu/tpu_runtime_metrics.h"

namespace tessera {
namespace {

constexpr std::string_view kFamily = "tpu";
constexpr std::string_view kDefaultPort = "8431";

int ChipOf(const Device& device) {
  auto it = device.attributes.find("chip");
  int chip = 0;
  if (it != device.attributes.end() && absl::SimpleAtoi(it->second, &chip) && chip >= 0) {
    return chip;
  }
  return device.index;
}

class TpuTelemetryReader final : public TelemetryReader {
 public:
  explicit TpuTelemetryReader(const TelemetryContext& context)
      : timeout_(context.options.rpc_timeout), root_(context.sysroot.root()) {
    for (std::string& address : TpuMetricServers(context)) {
      clients_.push_back(std::make_unique<TpuRuntimeMetricsClient>(std::move(address)));
    }
  }

  FamilyTelemetry Read(std::span<const Device> devices, absl::Time /*now*/) override {
    if (clients_.empty()) {
      FamilyTelemetry out = NothingRead(
          devices, absl::StrCat("libtpu runtime metrics are read only on the live machine "
                                "(or from configured servers); none for the tree at ",
                                root_));
      for (size_t i = 0; i < devices.size(); ++i) CheckFamily(devices[i], kFamily, out.devices[i]);
      return out;
    }
    FamilyTelemetry out;
    std::map<int, TpuDeviceFigures> by_id;
    std::set<int> ambiguous;
    bool any_server = false;
    for (const auto& client : clients_) {
      absl::StatusOr<std::map<int, TpuDeviceFigures>> figures =
          client->Read(timeout_, &out.warnings);
      if (!figures.ok()) {
        out.warnings.push_back(std::string(figures.status().message()));
        continue;
      }
      any_server = true;
      for (auto& [id, f] : *figures) {
        if (!by_id.emplace(id, f).second) ambiguous.insert(id);
      }
    }
    for (int id : ambiguous) {
      by_id.erase(id);
      out.warnings.push_back(
          absl::StrCat("more than one libtpu server reports device ", id,
                       " (one process per chip?); its figures are dropped as ambiguous"));
    }
    for (const Device& device : devices) {
      DeviceTelemetry t = EmptyTelemetry(device);
      if (CheckFamily(device, kFamily, t)) {
        const int chip = ChipOf(device);
        auto it = by_id.find(chip);
        if (it != by_id.end()) {
          const TpuDeviceFigures& f = it->second;
          t.source = "libtpu";
          t.memory_used_bytes = f.hbm_used_bytes;
          t.memory_total_bytes = f.hbm_total_bytes;
          if (f.duty_cycle_percent) {
            t.duty_cycle_ratio = RatioFromPercent(*f.duty_cycle_percent, "duty cycle", t);
          }
          if (f.hbm_utilization_percent) {
            t.memory_bandwidth_ratio =
                RatioFromPercent(*f.hbm_utilization_percent, "HBM utilization", t);
          }
        } else if (any_server && ambiguous.count(chip) == 0) {
          t.warnings.push_back(absl::StrCat("TPU chip ", chip, ": no libtpu server reports it"));
        }
      }
      out.devices.push_back(std::move(t));
    }
    return out;
  }

 private:
  const absl::Duration timeout_;
  const std::string root_;
  std::vector<std::unique_ptr<TpuRuntimeMetricsClient>> clients_;
};

}  // namespace

std::vector<std::string> TpuMetricServers(const TelemetryContext& context) {
  if (!context.options.tpu_metric_servers.empty()) return context.options.tpu_metric_servers;
  if (!context.sysroot.is_live()) return {};
  std::vector<std::string> servers;
  const std::string ports =
      context.env.Get("TPU_RUNTIME_METRICS_PORTS").value_or(std::string(kDefaultPort));
  for (absl::string_view port : absl::StrSplit(ports, ',', absl::SkipWhitespace())) {
    int number = 0;
    const std::string_view trimmed = Trim(ToStd(port));
    if (absl::SimpleAtoi(ToAbsl(trimmed), &number) && number > 0 && number < 65536) {
      servers.push_back(absl::StrCat("localhost:", number));
    }
  }
  if (servers.empty()) servers.push_back(absl::StrCat("localhost:", ToAbsl(kDefaultPort)));
  return servers;
}

std::unique_ptr<TelemetryReader> MakeTpuTelemetryReader(const TelemetryContext& context) {
  return std::make_unique<TpuTelemetryReader>(context);
}

}  // namespace tessera

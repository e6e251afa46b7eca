#include "hardware/node_telemetry.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

constexpr std::string_view kSimulatedProbe = "simulated";

}  // namespace

NodeTelemetryReader::NodeTelemetryReader(const NodeHardware& hardware, const Sysroot& sysroot,
                                         const Environment& env,
                                         const NodeTelemetryOptions& options) {
  const TelemetryContext context{sysroot, env, options.telemetry};
  for (const FamilyReport& report : hardware.families) {
    if (!report.advertised || report.visible.empty() || report.plugin == nullptr) continue;
    Family family;
    family.name = std::string(report.plugin->family());
    family.devices = report.visible;
    if (report.detection.probe == kSimulatedProbe) {
      family.model = std::make_unique<SimulatedTelemetryModel>(options.simulation_seed);
    } else {
      family.reader = report.plugin->OpenTelemetry(context);
    }
    families_.push_back(std::move(family));
  }
}

NodeTelemetryReader::~NodeTelemetryReader() = default;

NodeTelemetry NodeTelemetryReader::Read(absl::Time now, const BusyDevices& busy) {
  NodeTelemetry out;
  static const std::set<int> kNone;
  for (Family& family : families_) {
    FamilyTelemetry reading;
    if (family.model != nullptr) {
      auto held = busy.find(family.name);
      reading = family.model->Read(family.devices, held != busy.end() ? held->second : kNone, now);
    } else {
      reading = family.reader->Read(family.devices, now);
    }
    for (std::string& w : reading.warnings) {
      out.warnings.push_back(absl::StrCat(family.name, ": ", w));
    }
    for (DeviceTelemetry& t : reading.devices) out.devices.push_back(std::move(t));
  }
  return out;
}

NodeTelemetry ReadNodeTelemetry(const NodeHardware& hardware, const Sysroot& sysroot,
                                const Environment& env, const NodeTelemetryOptions& options,
                                absl::Time now, const BusyDevices& busy) {
  NodeTelemetryReader reader(hardware, sysroot, env, options);
  return reader.Read(now, busy);
}

}  // namespace tessera

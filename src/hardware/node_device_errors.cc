#include "hardware/node_device_errors.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

constexpr std::string_view kSimulatedProbe = "simulated";

}  // namespace

NodeDeviceErrorWatch::NodeDeviceErrorWatch(const NodeHardware& hardware, const Sysroot& sysroot,
                                           const DeviceErrorOptions& options) {
  const DeviceErrorContext context{sysroot, options};
  absl::MutexLock lock(&mu_);
  for (const FamilyReport& report : hardware.families) {
    if (!report.advertised || report.visible.empty() || report.plugin == nullptr ||
        report.detection.probe == kSimulatedProbe) {
      continue;
    }
    families_.push_back(
        Family{std::string(report.plugin->family()), report.plugin->OpenErrorWatch(context)});
  }
  watches_anything_ = !families_.empty();
}

NodeDeviceErrorWatch::~NodeDeviceErrorWatch() = default;

NodeErrorSnapshot NodeDeviceErrorWatch::Snapshot(HeldDevices devices, absl::Time now) {
  NodeErrorSnapshot snapshot;
  absl::MutexLock lock(&mu_);
  for (Family& family : families_) {
    auto held = devices.find(family.name);
    if (held == devices.end() || held->second.empty()) continue;
    snapshot.families[family.name] = family.reader->Snapshot(held->second, now);
  }
  snapshot.devices = std::move(devices);
  return snapshot;
}

DeviceErrorReport NodeDeviceErrorWatch::MessagesSince(const NodeErrorSnapshot& snapshot,
                                                      absl::Time now) {
  DeviceErrorReport out;
  absl::MutexLock lock(&mu_);
  for (Family& family : families_) {
    auto taken = snapshot.families.find(family.name);
    auto held = snapshot.devices.find(family.name);
    if (taken == snapshot.families.end() || held == snapshot.devices.end()) continue;
    DeviceErrorReport report = family.reader->MessagesSince(taken->second, held->second, now);
    for (std::string& m : report.messages) out.messages.push_back(std::move(m));
    for (const std::string& w : report.warnings) {
      out.warnings.push_back(absl::StrCat(family.name, ": ", w));
    }
  }
  return out;
}

void NodeDeviceErrorWatch::Poll() {
  absl::MutexLock lock(&mu_);
  for (Family& family : families_) family.reader->Poll();
}

}  // namespace tessera

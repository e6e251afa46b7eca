// Test-only helpers for plugin tests: the path of a committed fixture machine, a fixture host
// (sysroot, environment, PCI inventory, detection context), a substring check over warnings
// and evidence, and for the telemetry tests the devices a plugin detects on a fixture, its reader
// on a tree, one reading, the clock of the first reading and the gMock matchers they read with
// (a test in tessera::testing sees them unqualified). Header-only, since FixturePath needs the
// test targets' TESSERA_SOURCE_DIR; include from *_test.cc files only. Trees built in C++ come
// from FakeTree (fake_tree.h). Not thread-safe.
#pragma once

#include <gmock/gmock.h>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "hardware/accelerator_plugin.h"
#include "hardware/telemetry_reader.h"

namespace tessera::testing {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Optional;

inline std::string FixturePath(std::string_view machine) {
  return std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/hardware/" + std::string(machine);
}

// Everything a plugin's Detect reads, for one tree.
struct FixtureHost {
  explicit FixtureHost(const std::string& root, Environment environment = Environment())
      : sysroot(root),
        env(std::move(environment)),
        pci(PciInventory::Scan(sysroot, &scan_warnings)) {}
  // With a hand-made inventory instead of the tree's.
  FixtureHost(const std::string& root, PciInventory inventory)
      : sysroot(root), pci(std::move(inventory)) {}

  DetectionContext context() const { return DetectionContext{sysroot, env, pci, options}; }

  Sysroot sysroot;
  Environment env;
  std::vector<std::string> scan_warnings;
  PciInventory pci;
  DetectionOptions options;
};

inline bool AnyContains(const std::vector<std::string>& lines, std::string_view needle) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& line) {
    return line.find(needle) != std::string::npos;
  });
}

// When a telemetry test takes its first reading; later ones are offsets from it.
inline const absl::Time kFirstReading = absl::FromUnixSeconds(1'700'000'000);

// The devices `plugin` detects on the committed fixture `machine` with `options` (an NVML
// library, say).
inline std::vector<Device> DetectOnFixture(const AcceleratorPlugin& plugin,
                                           std::string_view machine,
                                           DetectionOptions options = DetectionOptions()) {
  FixtureHost host(FixturePath(machine));
  host.options = std::move(options);
  return plugin.Detect(host.context()).devices;
}

// `plugin`'s telemetry reader on the tree at `root`, with an empty environment and `options`.
inline std::unique_ptr<TelemetryReader> OpenTelemetryOn(
    const AcceleratorPlugin& plugin, const std::string& root,
    TelemetryOptions options = TelemetryOptions()) {
  return plugin.OpenTelemetry(TelemetryContext{Sysroot(root), Environment(), std::move(options)});
}

// One reading of `devices` at kFirstReading by a fresh reader of `plugin` on the tree at `root`.
inline FamilyTelemetry ReadOnce(const AcceleratorPlugin& plugin, const std::string& root,
                                const std::vector<Device>& devices) {
  return OpenTelemetryOn(plugin, root)->Read(devices, kFirstReading);
}

}  // namespace tessera::testing

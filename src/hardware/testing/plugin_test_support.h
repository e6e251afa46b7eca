// Test-only helpers for plugin tests: the path of a committed fixture machine, a fixture host
// (sysroot, environment, PCI inventory, detection context) and a substring check over warnings
// and evidence. Header-only, since FixturePath needs the test targets' TESSERA_SOURCE_DIR;
// include from *_test.cc files only. Trees built in C++ come from FakeTree (fake_tree.h).
// Not thread-safe.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "hardware/accelerator_plugin.h"

namespace tessera::testing {

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

}  // namespace tessera::testing

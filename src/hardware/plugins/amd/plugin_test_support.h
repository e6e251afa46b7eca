// Test-only helpers for the amd, intel-gpu, neuron and gaudi plugin tests: a fixture host (sysroot,
// environment, PCI inventory, detection context) and a scratch tree for edge cases that a real
// machine's fixture should not contain. Header-only; include from *_test.cc files only.
// Not thread-safe.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
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
      : sysroot(root), env(std::move(environment)), pci(PciInventory::Scan(sysroot, &scan_warnings)) {}

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

// A throw-away directory tree; removed on destruction.
class ScratchTree {
 public:
  ScratchTree() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tessera-plugin-XXXXXX").string();
    root_ = mkdtemp(pattern.data());
  }
  ~ScratchTree() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  ScratchTree(const ScratchTree&) = delete;
  ScratchTree& operator=(const ScratchTree&) = delete;

  const std::string& root() const { return root_; }

  void Write(std::string_view linux_path, std::string_view content = "") const {
    const std::filesystem::path p = root_ + std::string(linux_path);
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << content;
  }
  void Mkdir(std::string_view linux_path) const {
    std::filesystem::create_directories(root_ + std::string(linux_path));
  }
  // A relative symlink, as sysfs has.
  void Symlink(std::string_view linux_link, std::string_view linux_target) const {
    const std::filesystem::path link = root_ + std::string(linux_link);
    std::filesystem::create_directories(link.parent_path());
    const std::filesystem::path target = root_ + std::string(linux_target);
    std::filesystem::create_symlink(std::filesystem::relative(target, link.parent_path()), link);
  }
  // A PCI function directly under a host bridge, linked from /sys/bus/pci/devices.
  std::string PciFunction(std::string_view bdf, std::string_view vendor, std::string_view device,
                          std::string_view pci_class, std::string_view driver) const {
    const std::string dir = "/sys/devices/pci0000:00/" + std::string(bdf);
    Write(dir + "/vendor", std::string(vendor) + "\n");
    Write(dir + "/device", std::string(device) + "\n");
    Write(dir + "/class", std::string(pci_class) + "\n");
    Write(dir + "/numa_node", "-1\n");
    if (!driver.empty()) {
      Mkdir("/sys/bus/pci/drivers/" + std::string(driver));
      Symlink(dir + "/driver", "/sys/bus/pci/drivers/" + std::string(driver));
    }
    Symlink("/sys/bus/pci/devices/" + std::string(bdf), dir);
    return dir;
  }

 private:
  std::string root_;
};

}  // namespace tessera::testing

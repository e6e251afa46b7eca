// Test helper: builds small fake sysfs trees (PCI functions, IOMMU groups, device nodes) in a
// temporary directory, for cases the committed fixtures do not cover. Not thread-safe.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace tessera::testing_tpu {

class TestTree {
 public:
  explicit TestTree(const std::string& name)
      : root_(std::filesystem::temp_directory_path() / ("tessera_tpu_" + name)) {
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  ~TestTree() { std::filesystem::remove_all(root_); }

  std::string root() const { return root_.string(); }

  void Write(const std::string& linux_path, const std::string& content = "") {
    const auto p = Path(linux_path);
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << content;
  }
  void Mkdir(const std::string& linux_path) { std::filesystem::create_directories(Path(linux_path)); }
  // A relative symlink, as sysfs has.
  void Symlink(const std::string& linux_link, const std::string& linux_target) {
    const auto link = Path(linux_link);
    std::filesystem::create_directories(link.parent_path());
    std::filesystem::create_directory_symlink(
        std::filesystem::relative(Path(linux_target), link.parent_path()), link);
  }

  // A PCI function on root bus 00; returns its /sys/devices path.
  std::string Function(const std::string& bdf, uint16_t vendor, uint16_t device, uint32_t klass,
                       int iommu_group = -1) {
    const std::string dir = "/sys/devices/pci0000:00/" + bdf;
    Write(dir + "/vendor", Hex(vendor, 4));
    Write(dir + "/device", Hex(device, 4));
    Write(dir + "/class", Hex(klass, 6));
    Write(dir + "/numa_node", "-1\n");
    Symlink("/sys/bus/pci/devices/" + bdf, dir);
    if (iommu_group >= 0) {
      const std::string group = "/sys/kernel/iommu_groups/" + std::to_string(iommu_group);
      Mkdir(group + "/devices");
      Symlink(group + "/devices/" + bdf, dir);
    }
    return dir;
  }

 private:
  std::filesystem::path Path(const std::string& linux_path) const {
    return root_ / linux_path.substr(linux_path.find_first_not_of('/'));
  }
  static std::string Hex(uint32_t v, int width) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%0*x\n", width, v);
    return buf;
  }

  std::filesystem::path root_;
};

}  // namespace tessera::testing_tpu

// FakeTree: a fake Linux tree (sysfs PCI functions, class devices, NICs, CPUs and NUMA nodes,
// /dev nodes) in a fresh temporary directory, for tests that build their machine in C++ rather
// than use a committed fixture under tests/fixtures/hardware. The one tree builder of the
// hardware tests; it writes files the way tests/fixtures/hardware/fixture_tree.py does.
// Not thread-safe; one tree per test.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::testing {

// One PCI function. Every field but `bdf` may be left at its default.
struct PciFunctionSpec {
  std::string bdf;  // "0000:18:00.0"
  uint16_t vendor = 0;
  uint16_t device = 0;
  uint32_t pci_class = 0;            // 24 bits: 0x030200
  int numa_node = -1;                // written as sysfs does, -1 for "unknown"
  std::vector<std::string> parents;  // bridge bus ids from the root port down
  std::string driver;                // "" leaves the function unbound
  int iommu_group = -1;              // -1: in no IOMMU group
  std::string local_cpus;            // a Linux cpumask; "" leaves the file out
};

// A PCI network interface (a Mellanox function with net/<ifname>).
struct NicSpec {
  std::string ifname;
  std::string bdf;
  int numa_node = -1;
  std::vector<std::string> parents;
  int speed_mbps = 0;
  std::string local_cpus;
};

// CPUs, NUMA nodes and memory; NUMA nodes split the sockets evenly.
struct HostSpec {
  int sockets = 1;
  int cores_per_socket = 1;
  int threads_per_core = 1;
  int numa_nodes = 1;
  int memory_gib = 1;
  std::string cpu_model;
};

class FakeTree {
 public:
  // A new, empty tree under the system temporary directory, unique to this object (mkdtemp), so
  // tests in parallel processes never share one. Removed on destruction.
  FakeTree();
  ~FakeTree();
  FakeTree(const FakeTree&) = delete;
  FakeTree& operator=(const FakeTree&) = delete;

  const std::string& root() const { return root_; }
  // Where `linux_path` ("/sys/...") lies on this machine.
  std::string Path(std::string_view linux_path) const;

  // Writes a file, creating its directories; returns its Path().
  std::string Write(std::string_view linux_path, std::string_view content = "");
  void Mkdir(std::string_view linux_path);
  // A relative symbolic link, as sysfs has; replaces an existing link. The target may not exist.
  void Symlink(std::string_view linux_link, std::string_view linux_target);
  // A stand-in for a character device such as /dev/accel0 (an empty file, which Sysroot treats
  // like a device node).
  void DeviceNode(std::string_view linux_path);

  // Returns the function's /sys/devices path: under pci<domain:bus of the root port>, below its
  // parents, linked from /sys/bus/pci/devices, from /sys/bus/pci/drivers/<driver> and from
  // /sys/kernel/iommu_groups/<group>/devices when those are set.
  std::string PciFunction(const PciFunctionSpec& spec);
  // A PCIe bridge or switch port (class 0x060400, pcieport).
  std::string Bridge(const std::string& bdf, const std::vector<std::string>& parents,
                     int numa_node);
  std::string Nic(const NicSpec& spec);
  // A software interface under /sys/devices/virtual/net.
  void VirtualNic(const std::string& ifname);
  // A class device `name` of `subsystem` ("drm", "accel") owned by the function at
  // `function_dir`: <function_dir>/<subsystem>/<name> with a `device` link back, and
  // /sys/class/<subsystem>/<name> pointing at it. Returns its directory.
  std::string ClassDevice(const std::string& function_dir, std::string_view subsystem,
                          std::string_view name);

  // CPUs numbered the Linux way (first threads of every core, then the siblings).
  void Host(const HostSpec& spec);

  // "0-3,8-11" and "00000f0f" for a set of CPUs.
  static std::string CpuList(const std::vector<int>& cpus);
  static std::string CpuMask(const std::vector<int>& cpus, int total_cpus);

 private:
  std::string root_;
};

}  // namespace tessera::testing

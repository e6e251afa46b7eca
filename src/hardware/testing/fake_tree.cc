#include "hardware/testing/fake_tree.h"

#include <stdlib.h>  // mkdtemp

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

namespace tessera::testing {
namespace fs = std::filesystem;
namespace {

std::string Hex(uint32_t value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%0*x\n", digits, value);
  return buf;
}

}  // namespace

FakeTree::FakeTree() {
  std::string pattern = (fs::temp_directory_path() / "tessera-tree-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    std::cerr << "FakeTree: mkdtemp " << pattern << " failed\n";
    std::abort();  // a test cannot run without its tree
  }
  root_ = pattern;
}

FakeTree::~FakeTree() {
  std::error_code ec;
  fs::remove_all(root_, ec);
}

std::string FakeTree::Path(std::string_view linux_path) const {
  return root_ + std::string(linux_path);
}

std::string FakeTree::Write(std::string_view linux_path, std::string_view content) {
  const fs::path p = Path(linux_path);
  fs::create_directories(p.parent_path());
  std::ofstream(p) << content;
  return p.string();
}

void FakeTree::Mkdir(std::string_view linux_path) { fs::create_directories(Path(linux_path)); }

void FakeTree::Symlink(std::string_view linux_link, std::string_view linux_target) {
  const fs::path link = Path(linux_link);
  fs::create_directories(link.parent_path());
  std::error_code ec;
  fs::remove(link, ec);
  // fs::relative resolves links in the parent, so a link made inside a linked directory works.
  fs::create_symlink(fs::relative(Path(linux_target), link.parent_path()), link);
}

void FakeTree::DeviceNode(std::string_view linux_path) { Write(linux_path); }

std::string FakeTree::PciFunction(const PciFunctionSpec& spec) {
  std::vector<std::string> chain = spec.parents;
  chain.push_back(spec.bdf);
  std::string path = "/sys/devices/pci" + chain[0].substr(0, 7);  // "pci0000:17"
  for (const std::string& c : chain) path += "/" + c;
  Write(path + "/vendor", Hex(spec.vendor, 4));
  Write(path + "/device", Hex(spec.device, 4));
  Write(path + "/class", Hex(spec.pci_class, 6));
  Write(path + "/numa_node", std::to_string(spec.numa_node) + "\n");
  if (!spec.local_cpus.empty()) Write(path + "/local_cpus", spec.local_cpus + "\n");
  if (!spec.driver.empty()) {
    const std::string driver = "/sys/bus/pci/drivers/" + spec.driver;
    Mkdir(driver);
    Symlink(path + "/driver", driver);
  }
  if (spec.iommu_group >= 0) {
    const std::string group = "/sys/kernel/iommu_groups/" + std::to_string(spec.iommu_group);
    Mkdir(group + "/devices");
    Symlink(group + "/devices/" + spec.bdf, path);
  }
  Symlink("/sys/bus/pci/devices/" + spec.bdf, path);
  return path;
}

std::string FakeTree::Bridge(const std::string& bdf, const std::vector<std::string>& parents,
                             int numa_node) {
  return PciFunction({.bdf = bdf,
                      .vendor = 0x1000,
                      .device = 0xc030,
                      .pci_class = 0x060400,
                      .numa_node = numa_node,
                      .parents = parents,
                      .driver = "pcieport"});
}

std::string FakeTree::Nic(const NicSpec& spec) {
  const std::string path = PciFunction({.bdf = spec.bdf,
                                        .vendor = 0x15b3,
                                        .device = 0x1021,
                                        .pci_class = 0x020000,
                                        .numa_node = spec.numa_node,
                                        .parents = spec.parents,
                                        .driver = "mlx5_core",
                                        .local_cpus = spec.local_cpus});
  const std::string net = path + "/net/" + spec.ifname;
  Write(net + "/speed", std::to_string(spec.speed_mbps) + "\n");
  Symlink(net + "/device", path);
  Symlink("/sys/class/net/" + spec.ifname, net);
  return path;
}

void FakeTree::VirtualNic(const std::string& ifname) {
  Write("/sys/devices/virtual/net/" + ifname + "/address", "00:00:00:00:00:00\n");
  Symlink("/sys/class/net/" + ifname, "/sys/devices/virtual/net/" + ifname);
}

std::string FakeTree::ClassDevice(const std::string& function_dir, std::string_view subsystem,
                                  std::string_view name) {
  const std::string entry = std::string(subsystem) + "/" + std::string(name);
  const std::string dir = function_dir + "/" + entry;
  Mkdir(dir);
  Symlink(dir + "/device", function_dir);
  Symlink("/sys/class/" + entry, dir);
  return dir;
}

std::string FakeTree::CpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::string FakeTree::CpuMask(const std::vector<int>& cpus, int total_cpus) {
  const int words = std::max(1, (total_cpus + 31) / 32);
  std::vector<uint32_t> bits(words, 0);
  for (int c : cpus) bits[c / 32] |= 1u << (c % 32);
  std::string out;
  for (int w = words - 1; w >= 0; --w) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "%08x", bits[w]);
    if (!out.empty()) out += ",";
    out += buf;
  }
  return out;
}

void FakeTree::Host(const HostSpec& spec) {
  const int total_cores = spec.sockets * spec.cores_per_socket;
  const int total_cpus = total_cores * spec.threads_per_core;
  const int nodes_per_socket = spec.numa_nodes / spec.sockets;
  const int cores_per_node = spec.cores_per_socket / nodes_per_socket;
  std::map<int, std::vector<int>> node_cpus;
  std::string cpuinfo;
  for (int cpu = 0; cpu < total_cpus; ++cpu) {
    const int core = cpu % total_cores;
    const int socket = core / spec.cores_per_socket;
    const int node = core / cores_per_node;
    node_cpus[node].push_back(cpu);
    std::vector<int> siblings, package;
    for (int t = 0; t < spec.threads_per_core; ++t) siblings.push_back(core + t * total_cores);
    for (int c = 0; c < total_cpus; ++c) {
      if ((c % total_cores) / spec.cores_per_socket == socket) package.push_back(c);
    }
    const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu);
    Write(base + "/online", "1\n");
    Write(base + "/topology/physical_package_id", std::to_string(socket) + "\n");
    Write(base + "/topology/core_id", std::to_string(core % spec.cores_per_socket) + "\n");
    Write(base + "/topology/thread_siblings_list", CpuList(siblings) + "\n");
    Write(base + "/topology/core_siblings_list", CpuList(package) + "\n");
    Write(base + "/topology/core_cpus", CpuMask(siblings, total_cpus) + "\n");
    Write(base + "/topology/package_cpus", CpuMask(package, total_cpus) + "\n");
    Symlink(base + "/node" + std::to_string(node),
            "/sys/devices/system/node/node" + std::to_string(node));
    cpuinfo += "processor\t: " + std::to_string(cpu) + "\nmodel name\t: " + spec.cpu_model +
               "\nphysical id\t: " + std::to_string(socket) + "\n\n";
  }
  const std::string all = "0-" + std::to_string(total_cpus - 1) + "\n";
  Write("/sys/devices/system/cpu/online", all);
  Write("/sys/devices/system/cpu/possible", all);
  Write("/sys/devices/system/cpu/present", all);
  const long long kib = static_cast<long long>(spec.memory_gib) * 1024 * 1024;
  for (auto& [node, cpus] : node_cpus) {
    std::sort(cpus.begin(), cpus.end());
    const std::string base = "/sys/devices/system/node/node" + std::to_string(node);
    Write(base + "/cpulist", CpuList(cpus) + "\n");
    Write(base + "/cpumap", CpuMask(cpus, total_cpus) + "\n");
    Write(base + "/meminfo", "Node " + std::to_string(node) + " MemTotal:       " +
                                 std::to_string(kib / spec.numa_nodes) + " kB\n");
    std::string distance;
    for (int other = 0; other < spec.numa_nodes; ++other) {
      if (!distance.empty()) distance += " ";
      distance += other == node                                         ? "10"
                  : other / nodes_per_socket == node / nodes_per_socket ? "12"
                                                                        : "21";
    }
    Write(base + "/distance", distance + "\n");
  }
  const std::string nodes = "0-" + std::to_string(spec.numa_nodes - 1) + "\n";
  Write("/sys/devices/system/node/online", nodes);
  Write("/sys/devices/system/node/possible", nodes);
  Write("/proc/meminfo", "MemTotal:       " + std::to_string(kib) + " kB\n");
  Write("/proc/cpuinfo", cpuinfo);
}

}  // namespace tessera::testing

#include "hardware/host/fake_host_tree.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

namespace tessera::testing_support {
namespace fs = std::filesystem;
namespace {

std::string CpuMaskFor(const std::vector<int>& cpus) { return FakeHostTree::CpuMask(cpus, 16); }

}  // namespace

FakeHostTree::FakeHostTree(std::string root) : root_(std::move(root)) {
  fs::remove_all(root_);
  fs::create_directories(root_);
}

void FakeHostTree::Write(const std::string& linux_path, const std::string& content) {
  const fs::path p = fs::path(root_ + linux_path);
  fs::create_directories(p.parent_path());
  std::ofstream(p) << content;
}

void FakeHostTree::Symlink(const std::string& linux_link, const std::string& linux_target) {
  const fs::path link = fs::path(root_ + linux_link);
  fs::create_directories(link.parent_path());
  const fs::path target = fs::path(root_ + linux_target);
  fs::create_directories(target);
  fs::remove(link);
  fs::create_symlink(fs::relative(target, link.parent_path()), link);
}

std::string FakeHostTree::CpuList(const std::vector<int>& cpus) {
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

std::string FakeHostTree::CpuMask(const std::vector<int>& cpus, int total_cpus) {
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

void FakeHostTree::Host(int sockets, int cores_per_socket, int threads_per_core, int numa_nodes,
                        int memory_gib, const std::string& cpu_model) {
  const int total_cores = sockets * cores_per_socket;
  const int total_cpus = total_cores * threads_per_core;
  total_cpus_ = total_cpus;
  const int nodes_per_socket = numa_nodes / sockets;
  const int cores_per_node = cores_per_socket / nodes_per_socket;
  std::map<int, std::vector<int>> node_cpus;
  std::string cpuinfo;
  for (int cpu = 0; cpu < total_cpus; ++cpu) {
    const int core = cpu % total_cores;
    const int socket = core / cores_per_socket;
    const int node = core / cores_per_node;
    node_cpus[node].push_back(cpu);
    std::vector<int> siblings, package;
    for (int t = 0; t < threads_per_core; ++t) siblings.push_back(core + t * total_cores);
    for (int c = 0; c < total_cpus; ++c) {
      if ((c % total_cores) / cores_per_socket == socket) package.push_back(c);
    }
    const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu);
    Write(base + "/online", "1\n");
    Write(base + "/topology/physical_package_id", std::to_string(socket) + "\n");
    Write(base + "/topology/core_id", std::to_string(core % cores_per_socket) + "\n");
    Write(base + "/topology/thread_siblings_list", CpuList(siblings) + "\n");
    Write(base + "/topology/core_siblings_list", CpuList(package) + "\n");
    Write(base + "/topology/core_cpus", CpuMask(siblings, total_cpus) + "\n");
    Write(base + "/topology/package_cpus", CpuMask(package, total_cpus) + "\n");
    Symlink(base + "/node" + std::to_string(node),
            "/sys/devices/system/node/node" + std::to_string(node));
    cpuinfo += "processor\t: " + std::to_string(cpu) + "\nmodel name\t: " + cpu_model +
               "\nphysical id\t: " + std::to_string(socket) + "\n\n";
  }
  const std::string all = "0-" + std::to_string(total_cpus - 1) + "\n";
  Write("/sys/devices/system/cpu/online", all);
  Write("/sys/devices/system/cpu/possible", all);
  Write("/sys/devices/system/cpu/present", all);
  const long long kib = static_cast<long long>(memory_gib) * 1024 * 1024;
  for (auto& [node, cpus] : node_cpus) {
    std::sort(cpus.begin(), cpus.end());
    const std::string base = "/sys/devices/system/node/node" + std::to_string(node);
    Write(base + "/cpulist", CpuList(cpus) + "\n");
    Write(base + "/cpumap", CpuMask(cpus, total_cpus) + "\n");
    Write(base + "/meminfo", "Node " + std::to_string(node) +
                                 " MemTotal:       " + std::to_string(kib / numa_nodes) + " kB\n");
    std::string distance;
    for (int other = 0; other < numa_nodes; ++other) {
      if (!distance.empty()) distance += " ";
      distance += other == node ? "10"
                  : other / nodes_per_socket == node / nodes_per_socket ? "12"
                                                                        : "21";
    }
    Write(base + "/distance", distance + "\n");
  }
  Write("/sys/devices/system/node/online", "0-" + std::to_string(numa_nodes - 1) + "\n");
  Write("/sys/devices/system/node/possible", "0-" + std::to_string(numa_nodes - 1) + "\n");
  Write("/proc/meminfo", "MemTotal:       " + std::to_string(kib) + " kB\n");
  Write("/proc/cpuinfo", cpuinfo);
}

std::string FakeHostTree::PciFunction(const std::string& bdf, int vendor, int device,
                                      int pci_class, int numa_node,
                                      const std::vector<std::string>& parents,
                                      const std::string& driver, const std::string& local_cpus) {
  std::vector<std::string> chain = parents;
  chain.push_back(bdf);
  std::string path = "/sys/devices/pci" + chain[0].substr(0, 7);  // "pci0000:17"
  for (const std::string& c : chain) path += "/" + c;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%04x\n", vendor);
  Write(path + "/vendor", buf);
  std::snprintf(buf, sizeof(buf), "0x%04x\n", device);
  Write(path + "/device", buf);
  std::snprintf(buf, sizeof(buf), "0x%06x\n", pci_class);
  Write(path + "/class", buf);
  Write(path + "/numa_node", std::to_string(numa_node) + "\n");
  if (!driver.empty()) Symlink(path + "/driver", "/sys/bus/pci/drivers/" + driver);
  if (!local_cpus.empty()) Write(path + "/local_cpus", local_cpus + "\n");
  Symlink("/sys/bus/pci/devices/" + bdf, path);
  return path;
}

std::string FakeHostTree::Bridge(const std::string& bdf, const std::vector<std::string>& parents,
                                 int numa_node) {
  return PciFunction(bdf, 0x1000, 0xc030, 0x060400, numa_node, parents, "pcieport");
}

std::string FakeHostTree::Nic(const std::string& ifname, const std::string& bdf, int numa_node,
                              const std::vector<std::string>& parents, int speed_mbps,
                              const std::string& local_cpus) {
  const std::string path =
      PciFunction(bdf, 0x15b3, 0x1021, 0x020000, numa_node, parents, "mlx5_core", local_cpus);
  Write(path + "/net/" + ifname + "/speed", std::to_string(speed_mbps) + "\n");
  Symlink(path + "/net/" + ifname + "/device", path);
  Symlink("/sys/class/net/" + ifname, path + "/net/" + ifname);
  return path;
}

void FakeHostTree::VirtualNic(const std::string& ifname) {
  Write("/sys/devices/virtual/net/" + ifname + "/address", "00:00:00:00:00:00\n");
  Symlink("/sys/class/net/" + ifname, "/sys/devices/virtual/net/" + ifname);
}

void BuildTwoSocketHost(FakeHostTree& t) {
  t.Host(2, 4, 2, 2, 64, "Intel(R) Xeon(R) Platinum 8480+");
  const std::string node0 = CpuMaskFor({0, 1, 2, 3, 8, 9, 10, 11});
  const std::string node1 = CpuMaskFor({4, 5, 6, 7, 12, 13, 14, 15});
  constexpr int kNvidia = 0x10de, kH100 = 0x2330, k3d = 0x030200;
  t.Bridge("0000:15:01.0", {}, 0);
  t.Bridge("0000:16:00.0", {"0000:15:01.0"}, 0);
  t.Bridge("0000:17:00.0", {"0000:15:01.0", "0000:16:00.0"}, 0);
  t.Bridge("0000:17:01.0", {"0000:15:01.0", "0000:16:00.0"}, 0);
  t.PciFunction("0000:18:00.0", kNvidia, kH100, k3d, 0,
                {"0000:15:01.0", "0000:16:00.0", "0000:17:00.0"}, "nvidia", node0);
  t.Nic("ibp1", "0000:19:00.0", 0, {"0000:15:01.0", "0000:16:00.0", "0000:17:01.0"}, 400000,
        node0);
  t.Bridge("0000:1a:00.0", {"0000:15:01.0"}, 0);
  t.Bridge("0000:1b:00.0", {"0000:15:01.0", "0000:1a:00.0"}, 0);
  t.PciFunction("0000:1c:00.0", kNvidia, kH100, k3d, 0,
                {"0000:15:01.0", "0000:1a:00.0", "0000:1b:00.0"}, "nvidia", node0);
  t.Nic("ibp0", "0000:2b:00.0", 0, {}, 200000, node0);
  t.PciFunction("0000:3c:00.0", kNvidia, kH100, k3d, 0, {}, "nvidia", node0);
  t.Bridge("0000:9a:01.0", {}, 1);
  t.PciFunction("0000:9b:00.0", kNvidia, kH100, k3d, 1, {"0000:9a:01.0"}, "nvidia", node1);
  t.Nic("ibp2", "0000:ac:00.0", 1, {}, 400000, node1);
  t.Nic("ibp4", "0000:ae:00.0", 1, {}, 400000, node1);
  t.Nic("eth1", "0000:c1:00.0", -1, {}, 25000, node1);
  t.PciFunction("0000:c2:00.0", kNvidia, kH100, k3d, -1, {}, "nvidia");
  t.VirtualNic("lo");
  t.VirtualNic("veth1a2b");
}

}  // namespace tessera::testing_support

// Test support: writes a fake Linux tree (sysfs CPUs, NUMA nodes, PCI functions, NICs) the way
// tests/fixtures/hardware/fixture_tree.py does, for tests that build their machine in C++.
// Not thread-safe; one tree per test.
#pragma once

#include <string>
#include <vector>

namespace tessera::testing_support {

class FakeHostTree {
 public:
  // Creates an empty tree at `root` (removing what was there).
  explicit FakeHostTree(std::string root);

  const std::string& root() const { return root_; }

  void Write(const std::string& linux_path, const std::string& content);
  // A relative symbolic link, as sysfs has.
  void Symlink(const std::string& linux_link, const std::string& linux_target);

  // CPUs, NUMA nodes and memory, numbered the Linux way (first threads of every core, then the
  // siblings); NUMA nodes split the sockets evenly.
  void Host(int sockets, int cores_per_socket, int threads_per_core, int numa_nodes,
            int memory_gib, const std::string& cpu_model);

  // A PCI function behind `parents` (bridge bus ids from the root port down). Returns its
  // /sys/devices path. `local_cpus` is written when not empty (a Linux cpumask).
  std::string PciFunction(const std::string& bdf, int vendor, int device, int pci_class,
                          int numa_node, const std::vector<std::string>& parents,
                          const std::string& driver, const std::string& local_cpus = "");
  std::string Bridge(const std::string& bdf, const std::vector<std::string>& parents,
                     int numa_node);
  std::string Nic(const std::string& ifname, const std::string& bdf, int numa_node,
                  const std::vector<std::string>& parents, int speed_mbps,
                  const std::string& local_cpus = "");
  // A software interface under /sys/devices/virtual/net.
  void VirtualNic(const std::string& ifname);

  // "0-3,8-11" and "00000f0f" for a set of CPUs.
  static std::string CpuList(const std::vector<int>& cpus);
  static std::string CpuMask(const std::vector<int>& cpus, int total_cpus);

 private:
  std::string root_;
  int total_cpus_ = 0;
};

// A two-socket machine with NICs behind PCIe switches, the shared fixture of the host tests:
//   2 sockets x 4 cores x 2 threads, NUMA 0 = cpus 0-3,8-11, NUMA 1 = 4-7,12-15, 64 GiB.
//   pci0000:15 (NUMA 0), root port 15:01.0:
//     switch A (16:00.0 -> 17:00.0, 17:01.0): GPU0 18:00.0, NIC ibp1 19:00.0 (400 Gb/s)
//     switch B (1a:00.0 -> 1b:00.0):          GPU1 1c:00.0
//   pci0000:2b (NUMA 0): NIC ibp0 2b:00.0 (200 Gb/s);  pci0000:3c (NUMA 0): GPU4 3c:00.0
//   pci0000:9a (NUMA 1): GPU2 9b:00.0 on root port 9a:01.0, no NIC
//   pci0000:ac, pci0000:ae (NUMA 1): NICs ibp2 ac:00.0, ibp4 ae:00.0 (400 Gb/s)
//   pci0000:c1: NIC eth1 c1:00.0 (25 Gb/s), numa_node -1 but local_cpus of NUMA 1
//   pci0000:c2: GPU3 c2:00.0, numa_node -1 and no local_cpus
//   software interfaces: lo, veth1a2b
void BuildTwoSocketHost(FakeHostTree& tree);

}  // namespace tessera::testing_support

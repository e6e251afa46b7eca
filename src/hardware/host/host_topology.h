// HostTopology: the CPU, memory, NUMA and NIC layout of one machine, as hwloc (live or a fake
// tree) or a simulated hardware description reports it, and the locality questions discovery
// asks of it (which NIC and which NUMA node sit closest to an accelerator).
// Thread-safe: the values are plain copyable data; DiscoverHostTopology may be called from any
// thread: hwloc loads serialize on one mutex, and a fake-tree load sets the process-wide
// HWLOC_FSROOT only while holding it (see hwloc_reader.cc), so no other code may read HWLOC_*
// variables concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "hardware/pci.h"
#include "hardware/sysroot.h"

namespace tessera {

struct NumaNode {
  int os_index = 0;           // the kernel's node number (nodeN)
  uint64_t memory_bytes = 0;  // memory local to the node
  std::string cpulist;        // Linux cpulist of its hardware threads, e.g. "0-55,112-167"
  // Relative distance to every NUMA node, in numa_nodes order (10 = local); empty when unknown.
  std::vector<int> distances;
};

struct Nic {
  std::string name;        // interface name, e.g. "ibp0", "eth0"
  std::string pci_bus_id;  // the PCI function behind it; "" for simulated NICs
  int numa_node = -1;      // -1 when neither sysfs nor hwloc says
  int64_t speed_mbps = 0;  // link speed; 0 when unknown (link down, virtio)
  // Resolved sysfs path of the PCI function, e.g. "/sys/devices/pci0000:17/.../0000:19:00.0":
  // what PCI-path affinity compares. "" for simulated NICs.
  std::string sysfs_path;
};

struct HostTopology {
  int sockets = 0;
  int cores = 0;
  int pus = 0;  // hardware threads
  uint64_t memory_bytes = 0;
  std::vector<NumaNode> numa_nodes;  // sorted by os_index
  std::vector<Nic> nics;             // sorted by name
  std::string cpu_model;
  std::string source;  // "hwloc" or "simulated"
  // NUMA node hwloc attaches each PCI function to (from its local_cpus), by bus id; only
  // functions whose locality is one NUMA node appear.
  std::map<std::string, int, std::less<>> pci_numa_locality;
  std::vector<std::string> warnings;
};

// Reads the machine under `sysroot` with hwloc: the live machine for "/", otherwise the fake tree
// through hwloc's Linux backend (HWLOC_FSROOT). NICs come from /sys/class/net. NotFound when a
// fake tree has no CPU topology hwloc can read; Internal when hwloc fails on the live machine.
absl::StatusOr<HostTopology> DiscoverHostTopology(const Sysroot& sysroot);

// The NUMA node nearest to the PCI function `bus_id`: its sysfs numa_node when set, else hwloc's
// PCI locality, else 0 on a single-node host, else -1.
int NearestNumaNode(const HostTopology& host, const PciInventory& pci, std::string_view bus_id);

// The NIC nearest to the accelerator at `device_bus_id`: the deepest shared PCI path (same PCIe
// switch beats same root port beats same host bridge), then the same NUMA node, then the
// smallest name. "" when the host has no NIC.
std::string NearestNic(const HostTopology& host, const PciInventory& pci,
                       std::string_view device_bus_id);

// The NIC for a device known only by its NUMA node (simulated hosts): a NIC on that node, else
// any; the smallest name among equals. "" when the host has no NIC.
std::string NearestNicOnNumaNode(const HostTopology& host, int numa_node);

}  // namespace tessera

// Locality questions asked of a HostTopology: nearest NUMA node and nearest NIC of a device.
#include <tuple>

#include "hardware/host/host_topology.h"

namespace tessera {

int NearestNumaNode(const HostTopology& host, const PciInventory& pci, std::string_view bus_id) {
  if (const PciFunction* f = pci.Find(bus_id); f != nullptr && f->numa_node >= 0) {
    return f->numa_node;
  }
  if (auto it = host.pci_numa_locality.find(bus_id); it != host.pci_numa_locality.end()) {
    return it->second;
  }
  // With one NUMA node every device is nearest to it, whatever the firmware reported.
  if (host.numa_nodes.size() == 1) return host.numa_nodes.front().os_index;
  return -1;
}

std::string NearestNicOnNumaNode(const HostTopology& host, int numa_node) {
  const Nic* best = nullptr;
  for (const Nic& nic : host.nics) {
    const bool same = numa_node >= 0 && nic.numa_node == numa_node;
    const bool best_same = best != nullptr && numa_node >= 0 && best->numa_node == numa_node;
    if (best == nullptr || same > best_same || (same == best_same && nic.name < best->name)) {
      best = &nic;
    }
  }
  return best == nullptr ? "" : best->name;
}

std::string NearestNic(const HostTopology& host, const PciInventory& pci,
                       std::string_view device_bus_id) {
  const PciFunction* device = pci.Find(device_bus_id);
  const int device_numa = NearestNumaNode(host, pci, device_bus_id);
  const Nic* best = nullptr;
  int best_affinity = -1;
  bool best_same_numa = false;
  for (const Nic& nic : host.nics) {
    const int affinity = device != nullptr && !nic.sysfs_path.empty()
                             ? PciPathAffinity(device->sysfs_path, nic.sysfs_path)
                             : 0;
    const bool same_numa = device_numa >= 0 && nic.numa_node == device_numa;
    // Deeper shared PCI path first, then same NUMA node, then the smaller name.
    if (best == nullptr ||
        std::make_tuple(affinity, same_numa) > std::make_tuple(best_affinity, best_same_numa) ||
        (std::make_tuple(affinity, same_numa) == std::make_tuple(best_affinity, best_same_numa) &&
         nic.name < best->name)) {
      best = &nic;
      best_affinity = affinity;
      best_same_numa = same_numa;
    }
  }
  return best == nullptr ? "" : best->name;
}

}  // namespace tessera

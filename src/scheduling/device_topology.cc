#include "scheduling/device_topology.h"

#include <map>

namespace tessera {

DeviceTopology DeviceTopology::FromVisibleDevices(const std::vector<Device>& visible,
                                                  const std::vector<DeviceLink>& physical_links) {
  DeviceTopology t;
  t.count = static_cast<int>(visible.size());
  t.numa_node.reserve(visible.size());
  t.nearest_nic.reserve(visible.size());
  std::map<int, int> instance_of;  // physical index -> instance index
  for (int i = 0; i < t.count; ++i) {
    const Device& d = visible[i];
    t.numa_node.push_back(d.numa_node);
    t.nearest_nic.push_back(d.nearest_nic);
    instance_of.emplace(d.index, i);  // keeps the first on a duplicate
  }
  for (const DeviceLink& link : physical_links) {
    auto a = instance_of.find(link.a);
    auto b = instance_of.find(link.b);
    if (a == instance_of.end() || b == instance_of.end() || a->second == b->second) continue;
    DeviceLink mapped = link;
    mapped.a = a->second;
    mapped.b = b->second;
    t.links.push_back(mapped);
  }
  return t;
}

}  // namespace tessera

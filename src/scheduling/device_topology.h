// DeviceTopology: the devices of one unit-instance resource (GPU, TPU, neuron_cores, HPU, ...)
// on one node, by instance index (0..count-1, the positions of the node's per-device
// instances), with their NUMA nodes, nearest NICs and accelerator links. It is what
// ChooseDeviceSet reads. Plain value, copyable, not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "hardware/device.h"

namespace tessera {

struct DeviceTopology {
  int count = 0;
  std::vector<int> numa_node;            // per instance, -1 unknown
  std::vector<std::string> nearest_nic;  // per instance, "" unknown
  std::vector<DeviceLink> links;         // a, b are instance indices

  // Instance i = visible[i]. physical_links use physical device indices (Device::index) and
  // are mapped to instances; links touching a device that is not visible, and self links, are
  // dropped. When two visible devices share a physical index, the first one owns it.
  static DeviceTopology FromVisibleDevices(const std::vector<Device>& visible,
                                           const std::vector<DeviceLink>& physical_links);
};

}  // namespace tessera

// What discovery reports about accelerators: one Device per schedulable instance and the fast
// links between them. Plain values, copyable, not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace tessera {

struct Device {
  std::string family;  // plugin family name, e.g. "nvidia", "tpu"
  // Physical index within the family on this host: the value a visible-devices mask names
  // (NVML index / CUDA ordinal in PCI bus order, KFD GPU index, TPU chip, NeuronCore, HPU module).
  int index = 0;
  std::string uuid;   // stable identity when the driver gives one, else ""
  std::string model;  // full marketing name, e.g. "NVIDIA H100 80GB HBM3"
  std::string type;   // accelerator type string, e.g. "H100", "TPU-V6E" (reference §2)
  uint64_t memory_bytes = 0;
  std::string pci_bus_id;   // "0000:18:00.0"; "" when not on PCI (simulated, NeuronCore > 0)
  int numa_node = -1;       // nearest NUMA node, -1 unknown
  std::string nearest_nic;  // filled in by node discovery from the host topology
  // Family-specific facts worth showing (driver version, TPU chip coordinates, core of device).
  std::map<std::string, std::string> attributes;
};

enum class LinkKind { kNvLink, kNvSwitch, kXgmi, kIci, kNeuronLink, kGaudiRoce };
std::string_view LinkKindName(LinkKind kind);

// Coarse bandwidth classes the scheduler compares when it picks a device set.
//   kHigh:   >= 300 GB/s per direction between the pair (NVSwitch H100, full NVLink meshes)
//   kMedium: >= 50 GB/s (XGMI, ICI, a few NVLink lanes)
//   kLow:    anything slower that is still a direct accelerator link
enum class BandwidthClass { kLow, kMedium, kHigh };
std::string_view BandwidthClassName(BandwidthClass c);
BandwidthClass ClassifyBandwidth(double gigabytes_per_second);

// An undirected accelerator-to-accelerator link between two devices of one family, by their
// physical indices. A switch fabric is expressed as a link between every pair it connects.
struct DeviceLink {
  int a = 0;
  int b = 0;
  LinkKind kind = LinkKind::kNvLink;
  int lanes = 1;                    // number of physical links bundled (NVLinks, XGMI links)
  double gigabytes_per_second = 0;  // estimated, per direction
  BandwidthClass bandwidth_class = BandwidthClass::kLow;
};

}  // namespace tessera

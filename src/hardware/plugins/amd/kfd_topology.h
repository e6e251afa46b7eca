// The amdgpu driver's KFD topology (/sys/class/kfd/kfd/topology/nodes/<n>/): one node per CPU
// socket and per GPU, as ROCm enumerates them. Read here once so detection works on plain values.
// Files read per node: properties (simd_count, vendor_id, device_id, location_id, domain,
// drm_render_minor, unique_id; decimal numbers), mem_banks/<k>/properties (size_in_bytes),
// io_links/<k>/properties (type, node_from, node_to, weight, min_bandwidth, max_bandwidth in MB/s).
// Not thread-safe; plain values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "hardware/plugins/common/sysfs_properties.h"
#include "hardware/sysroot.h"

namespace tessera {

inline constexpr std::string_view kKfdTopologyNodes = "/sys/class/kfd/kfd/topology/nodes";
inline constexpr int kKfdIoLinkPcie = 2;
inline constexpr int kKfdIoLinkXgmi = 11;  // CRAT_IOLINK_TYPE_XGMI

struct KfdIoLink {
  int type = 0;
  int node_from = 0;
  int node_to = 0;
  uint64_t weight = 0;
  uint64_t min_bandwidth_mbps = 0;
  uint64_t max_bandwidth_mbps = 0;
};

struct KfdNode {
  int id = 0;
  SysfsProperties properties;
  // CPU nodes have simd_count 0; every GPU (and APU GPU part) has SIMDs.
  bool is_gpu = false;
  uint64_t memory_bytes = 0;  // sum of mem_banks size_in_bytes
  std::vector<KfdIoLink> io_links;
};

// Nodes in numeric id order ("10" after "9"). A node whose properties cannot be read is skipped
// with a warning. NotFound when the topology directory is missing (no amdgpu driver).
absl::StatusOr<std::vector<KfdNode>> ReadKfdTopology(const Sysroot& sysroot,
                                                     std::vector<std::string>* warnings);

}  // namespace tessera

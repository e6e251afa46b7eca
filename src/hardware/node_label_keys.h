// The node label keys Tessera itself sets, all under the reserved prefix tessera.io/.
// Listed once here; every module spells them through these constants.
#pragma once

#include <string_view>

namespace tessera::labels {

inline constexpr std::string_view kNodeId = "tessera.io/node-id";
inline constexpr std::string_view kAcceleratorType = "tessera.io/accelerator-type";
inline constexpr std::string_view kTpuSliceName = "tessera.io/tpu-slice-name";
inline constexpr std::string_view kTpuWorkerId = "tessera.io/tpu-worker-id";
inline constexpr std::string_view kTpuTopology = "tessera.io/tpu-topology";
inline constexpr std::string_view kTpuPodType = "tessera.io/tpu-pod-type";
inline constexpr std::string_view kMarketType = "tessera.io/market-type";
inline constexpr std::string_view kAvailabilityZone = "tessera.io/availability-zone";
inline constexpr std::string_view kAvailabilityRegion = "tessera.io/availability-region";
inline constexpr std::string_view kNodeGroup = "tessera.io/node-group";
// Hosts that share a fast fabric domain (an NVLink domain such as NVL72, or a TPU slice's ICI
// mesh) carry the same value; the kind of fabric is in kFabricKind ("nvlink" or "ici").
inline constexpr std::string_view kFabricDomain = "tessera.io/fabric-domain";
inline constexpr std::string_view kFabricKind = "tessera.io/fabric-kind";

}  // namespace tessera::labels

// Turns NVML's per-link view (which device sits at the far end of each active NVLink) into the
// undirected device links the scheduler compares. Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "hardware/device.h"
#include "hardware/pci.h"
#include "hardware/plugins/nvidia/nvml_probe.h"

namespace tessera {

// Per-lane, per-direction bandwidth in GB/s of one NVLink, by the nvmlNvlinkVersion_t value
// NVML reports; 0 when unknown. Derived from NVIDIA's datasheets (total bidirectional NVLink
// bandwidth / links / 2 directions):
//   NVLink 1 (P100 SXM2):   160 GB/s / 4 links  / 2 = 20
//   NVLink 2 (V100 SXM2):   300 GB/s / 6 links  / 2 = 25
//   NVLink 3 (A100 SXM4):   600 GB/s / 12 links / 2 = 25
//   NVLink 4 (H100 SXM5):   900 GB/s / 18 links / 2 = 25
//   NVLink 5 (B200/GB200): 1800 GB/s / 18 links / 2 = 50
double NvLinkLaneGigabytesPerSecond(unsigned int nvml_version);

// Links among `gpus` (only the counted ones; indices are their NVML indices):
//   - GPU-to-GPU NVLinks: one kNvLink link per pair, lanes = links between them;
//   - GPUs with links into NVSwitches: a kNvSwitch link between every pair of them (the switch
//     fabric connects all of them), lanes = the smaller of the two GPUs' switch link counts.
// A link whose remote type NVML did not give (older driver) is classified by its remote bus id:
// a counted GPU, or an NVSwitch function in `pci`. Notes go to `evidence`.
std::vector<DeviceLink> BuildNvLinks(const std::vector<NvmlGpu>& gpus, const PciInventory& pci,
                                     std::vector<std::string>* evidence);

// A kNvSwitch link between every pair of `indices`, `lanes` × `lane_rate` each (0 = unknown).
std::vector<DeviceLink> SwitchFabricLinks(const std::vector<int>& indices, int lanes,
                                          double lane_rate);

}  // namespace tessera

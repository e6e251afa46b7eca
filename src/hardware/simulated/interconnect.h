// The accelerator interconnects a hardware description can name, and the DeviceLinks each one
// produces between the devices of one accelerators entry (the same links detection reports).
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hardware/device.h"

namespace tessera::simulated {

enum class Interconnect {
  kNone,           // no direct links (PCIe only)
  kNvSwitch,       // every pair through NVSwitch (HGX H100/B200)
  kNvLinkPairs,    // devices 0-1, 2-3, ... joined by an NVLink bridge
  kXgmiMesh,       // every pair by a direct XGMI link (MI300X OAM)
  kIciGrid,        // neighbours in the host's TPU chip block (2x2 for 4 chips, 2x4 for 8)
  kNeuronRing,     // a ring of NeuronLinks
  kGaudiAllToAll,  // every pair by RoCE ports (Gaudi 2/3 HLS boards)
};

// "none", "nvswitch", "nvlink-pairs", "xgmi-mesh", "ici-grid", "neuron-ring", "gaudi-all-to-all".
std::optional<Interconnect> ParseInterconnect(std::string_view name);
std::string_view InterconnectName(Interconnect kind);
// All names, comma-separated, for error messages.
std::string InterconnectNames();

// Defaults when the description gives no lanes / bandwidth: typical current hardware
// (H100 NVSwitch: 18 NVLink4 lanes, 450 GB/s per direction; MI300X: 64 GB/s per XGMI link).
struct LinkDefaults {
  int lanes = 1;
  double gigabytes_per_second = 0;
};
LinkDefaults DefaultsFor(Interconnect kind);

// Whether the interconnect joins hosts into an NVLink domain, so fabric_domain makes sense.
bool IsNvLink(Interconnect kind);

// The links among `count` devices whose indices start at `first_index`. For kIciGrid, `count`
// must be 1, 4 or 8 (callers check with IciGridSupports).
std::vector<DeviceLink> BuildLinks(Interconnect kind, int first_index, int count, int lanes,
                                   double gigabytes_per_second);
bool IciGridSupports(int count);

}  // namespace tessera::simulated

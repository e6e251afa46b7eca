// Google (vendor 0x1ae0) PCI device ids of TPU chips. The vendor id alone is not enough: gVNIC
// (0x0042) and other paravirtual devices on GCE share it (reference/accelerators.md §3.1).
// Pure data; thread-safe.
#pragma once

#include <cstdint>
#include <optional>

#include "vocabulary/tpu_generation.h"

namespace tessera {

inline constexpr uint16_t kGoogleGvnicDeviceId = 0x0042;

// The generation of a TPU chip's PCI device id; nullopt for an id not known to be a TPU.
std::optional<TpuGeneration> TpuGenerationOfDeviceId(uint16_t device_id);

}  // namespace tessera

// PCI device id -> accelerator type and marketing name for AMD Instinct GPUs. Type strings are
// the ones users already write (reference §2, Ray's amd_product_dict). Thread-safe: constant data.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tessera {

struct AmdGpuModel {
  uint16_t device_id;
  std::string_view type;   // "AMD-Instinct-MI300X-OAM"
  std::string_view model;  // "AMD Instinct MI300X"
};

// nullptr when the id is not in the table.
const AmdGpuModel* FindAmdGpuModel(uint16_t device_id);

// The type string: the table's, else "AMD-GPU-<4 hex digits>".
std::string AmdGpuType(uint16_t device_id);

}  // namespace tessera

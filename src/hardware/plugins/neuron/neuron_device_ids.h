// Amazon (0x1d0f) PCI device ids of Neuron chips (Inferentia, Trainium) and the facts detection
// needs when sysfs does not say them. Other 0x1d0f functions (ENA 0xec20, EFA 0xefa0, Nitro NVMe
// 0x8061/0xcd01, the Nitro VGA 0x1111) are not in this table. Thread-safe: constant data.
#pragma once

#include <cstdint>
#include <string_view>

namespace tessera {

struct NeuronChipModel {
  uint16_t device_id;
  std::string_view name;   // "Trainium"
  int default_core_count;  // NeuronCores per chip when sysfs core_count is missing
  uint64_t memory_bytes;   // device memory per chip
  // Estimated per-direction bandwidth of the NeuronLink between two connected chips, and of the
  // chip's own memory (what two cores of one chip share), in GB/s.
  double neuronlink_gigabytes_per_second;
  double on_chip_gigabytes_per_second;
};

// nullptr when the id is not a known Neuron chip.
const NeuronChipModel* FindNeuronChipModel(uint16_t device_id);

}  // namespace tessera

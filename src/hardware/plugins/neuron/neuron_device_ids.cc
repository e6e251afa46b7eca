#include "hardware/plugins/neuron/neuron_device_ids.h"

namespace tessera {
namespace {

constexpr uint64_t kGiB = 1024ull * 1024 * 1024;

// NeuronLink figures are estimates from AWS's per-chip totals divided over the chip's neighbours
// (trn1: NeuronLink-v2, 4 neighbours in the 16-chip torus).
constexpr NeuronChipModel kModels[] = {
    {0x7064, "Inferentia", 4, 8 * kGiB, 8, 50},     {0x7065, "Inferentia", 4, 8 * kGiB, 8, 50},
    {0x7066, "Inferentia", 4, 8 * kGiB, 8, 50},     {0x7067, "Inferentia", 4, 8 * kGiB, 8, 50},
    {0x7164, "Trainium", 2, 32 * kGiB, 48, 820},    {0x7264, "Inferentia2", 2, 32 * kGiB, 48, 820},
    {0x7364, "Trainium2", 8, 96 * kGiB, 128, 2900},
};

}  // namespace

const NeuronChipModel* FindNeuronChipModel(uint16_t device_id) {
  for (const NeuronChipModel& m : kModels) {
    if (m.device_id == device_id) return &m;
  }
  return nullptr;
}

}  // namespace tessera

#include "hardware/plugins/tpu/tpu_pci_ids.h"

namespace tessera {

// Best-known values. v5e 0x0063 and v6e 0x006f are confirmed by public lspci captures of TPU VMs
// (class 0xff0000, bound to vfio-pci). v4 0x005e and v5p 0x0062 come from community notes and
// are not independently confirmed; the v7x id is unknown. v2/v3 are absent on purpose: they were
// reached over the network (TPU Node), never as PCI functions of the user's VM. An unknown Google
// device is counted only when TPU_ACCELERATOR_TYPE vouches for it (see tpu_chip_scan.cc).
std::optional<TpuGeneration> TpuGenerationOfDeviceId(uint16_t device_id) {
  switch (device_id) {
    case 0x005e: return TpuGeneration::kV4;
    case 0x0062: return TpuGeneration::kV5p;
    case 0x0063: return TpuGeneration::kV5litepod;
    case 0x006f: return TpuGeneration::kV6e;
    default: return std::nullopt;
  }
}

}  // namespace tessera

#include "hardware/plugins/amd/amd_device_ids.h"

#include "absl/strings/str_cat.h"
#include "hardware/pci.h"

namespace tessera {
namespace {

constexpr AmdGpuModel kModels[] = {
    {0x66a1, "AMD-Instinct-MI50", "AMD Instinct MI50"},
    {0x738c, "AMD-Instinct-MI100", "AMD Instinct MI100"},
    {0x7408, "AMD-Instinct-MI250X", "AMD Instinct MI250X"},
    {0x740c, "AMD-Instinct-MI250X-MI250", "AMD Instinct MI250X/MI250"},
    {0x740f, "AMD-Instinct-MI210", "AMD Instinct MI210"},
    {0x74a0, "AMD-Instinct-MI300A", "AMD Instinct MI300A"},
    {0x74a1, "AMD-Instinct-MI300X-OAM", "AMD Instinct MI300X"},
    {0x74a2, "AMD-Instinct-MI308X-OAM", "AMD Instinct MI308X"},
    {0x74a5, "AMD-Instinct-MI325X-OAM", "AMD Instinct MI325X"},
    {0x74a9, "AMD-Instinct-MI300X-HF", "AMD Instinct MI300X HF"},
    {0x75a0, "AMD-Instinct-MI350X-OAM", "AMD Instinct MI350X"},
    {0x75a3, "AMD-Instinct-MI355X-OAM", "AMD Instinct MI355X"},
};

}  // namespace

const AmdGpuModel* FindAmdGpuModel(uint16_t device_id) {
  for (const AmdGpuModel& m : kModels) {
    if (m.device_id == device_id) return &m;
  }
  return nullptr;
}

std::string AmdGpuType(uint16_t device_id) {
  if (const AmdGpuModel* m = FindAmdGpuModel(device_id)) return std::string(m->type);
  return absl::StrCat("AMD-GPU-", HexId(device_id));
}

}  // namespace tessera

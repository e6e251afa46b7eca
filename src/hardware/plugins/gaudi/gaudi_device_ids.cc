#include "hardware/plugins/gaudi/gaudi_device_ids.h"

namespace tessera {
namespace {

constexpr uint64_t kGiB = 1024ull * 1024 * 1024;

constexpr GaudiModel kModels[] = {
    {0x1000, "GAUDI", 32 * kGiB, 1, 100},    // HL-2000
    {0x1010, "GAUDI", 32 * kGiB, 1, 100},    // HL-2000, secured firmware
    {0x1020, "GAUDI2", 96 * kGiB, 3, 100},   // HL-225
    {0x1060, "GAUDI3", 128 * kGiB, 3, 200},  // HL-325
};

}  // namespace

const GaudiModel* FindGaudiModel(uint16_t device_id) {
  for (const GaudiModel& m : kModels) {
    if (m.device_id == device_id) return &m;
  }
  return nullptr;
}

}  // namespace tessera

#include "hardware/plugins/intel_gpu/intel_gpu_ids.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/string_util.h"

namespace tessera {
namespace {

constexpr uint64_t kGiB = 1024ull * 1024 * 1024;

constexpr IntelDiscreteGpu kDiscrete[] = {
    {0x0bd5, "Intel(R) Data Center GPU Max 1550", 128 * kGiB},
    {0x0bda, "Intel(R) Data Center GPU Max 1100", 48 * kGiB},
    {0x56c0, "Intel(R) Data Center GPU Flex 170", 16 * kGiB},
    {0x56c1, "Intel(R) Data Center GPU Flex 140", 6 * kGiB},  // per GPU; two per card
    {0x56a0, "Intel(R) Arc(TM) A770 Graphics", 16 * kGiB},
    {0x56a1, "Intel(R) Arc(TM) A750 Graphics", 8 * kGiB},
    {0x56a5, "Intel(R) Arc(TM) A380 Graphics", 6 * kGiB},
    {0xe20b, "Intel(R) Arc(TM) B580 Graphics", 12 * kGiB},
};

}  // namespace

const IntelDiscreteGpu* FindIntelDiscreteGpu(uint16_t device_id) {
  for (const IntelDiscreteGpu& g : kDiscrete) {
    if (g.device_id == device_id) return &g;
  }
  return nullptr;
}

std::string IntelGpuType(std::string_view device_name) {
  std::vector<absl::string_view> words =
      absl::StrSplit(ToAbsl(device_name), ' ', absl::SkipEmpty());
  if (words.empty()) return "Intel-GPU";
  if (words.size() == 1) return absl::StrCat("Intel-GPU-", words[0]);
  return absl::StrCat("Intel-GPU-", words[words.size() - 2], "-", words.back());
}

}  // namespace tessera

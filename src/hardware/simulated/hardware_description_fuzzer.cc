// Feeds arbitrary text to the hardware description parser: it must return a value or an error,
// never crash, hang or throw.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hardware/simulated/hardware_description.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::string> kFamilies = {"nvidia", "amd",    "intel-gpu",
                                                     "tpu",    "neuron", "gaudi"};
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto hw = tessera::ParseHardwareDescription(text, "fuzz.yaml", kFamilies);
  if (hw.ok()) {
    // Touch the result so a malformed value would be noticed by the sanitizers.
    size_t devices = 0;
    for (const auto& [family, detection] : hw->families) devices += detection.devices.size();
    if (devices > 1024 || hw->host.pus <= 0) __builtin_trap();
  } else if (hw.status().message().find('\n') != std::string_view::npos) {
    __builtin_trap();  // errors are one line
  }
  return 0;
}

#include "hardware/plugins/common/device_attributes.h"

#include "absl/strings/numbers.h"

namespace tessera {

std::optional<int> IndexAttribute(const Device& device, const std::string& name) {
  auto it = device.attributes.find(name);
  int value = 0;
  if (it == device.attributes.end() || !absl::SimpleAtoi(it->second, &value) || value < 0) {
    return std::nullopt;
  }
  return value;
}

}  // namespace tessera

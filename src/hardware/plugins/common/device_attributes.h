// Reading back the numbers a family's detection leaves in a Device's attributes (a Neuron core's
// "chip" and "core_in_chip"), for the readers that find the device's files with them.
// Part of tessera_plugin_support. Thread-safe: a free function.
#pragma once

#include <optional>
#include <string>

#include "hardware/device.h"

namespace tessera {

// The attribute `name` as a non-negative decimal int; nullopt when it is absent, not a number,
// or negative.
std::optional<int> IndexAttribute(const Device& device, const std::string& name);

}  // namespace tessera

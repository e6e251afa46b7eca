// Renders what node discovery found: JSON for programs, a readable report for people.
// Thread-safe: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "hardware/node_discovery.h"

namespace tessera::cli {

nlohmann::json HardwareReportJson(const NodeHardware& node);
std::string HardwareReportText(const NodeHardware& node);

}  // namespace tessera::cli

// The amd accelerator family. (Placeholder until the plugin lands: detects nothing.)
#pragma once

#include <memory>

#include "hardware/accelerator_plugin.h"

namespace tessera {

std::unique_ptr<AcceleratorPlugin> MakeAmdPlugin();

}  // namespace tessera

// The gaudi accelerator family: Intel Gaudi HPUs (gaudi_detection.h), resource "HPU", whole
// numbers only, mask HABANA_VISIBLE_MODULES (module ids, which are the device indices). No device
// figures yet: they need HLML (see OpenTelemetry).
#pragma once

#include <memory>

#include "hardware/accelerator_plugin.h"

namespace tessera {

std::unique_ptr<AcceleratorPlugin> MakeGaudiPlugin();

}  // namespace tessera

// The Google TPU accelerator family: resource "TPU", mask TPU_VISIBLE_CHIPS (plus the libtpu
// bounds variables), requests of 1, 2, 4 or 8. Detection: tpu_detection.h. Device figures: libtpu's
// runtime-metric service (tpu_telemetry.h). Device messages for failure reasons: the runtime's
// log folder (tpu_error_reader.h).
#pragma once

#include <memory>

#include "hardware/accelerator_plugin.h"

namespace tessera {

std::unique_ptr<AcceleratorPlugin> MakeTpuPlugin();

}  // namespace tessera

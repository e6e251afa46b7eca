// AMD GPU detection from the KFD topology in sysfs (reference §3): what counts as an AMD GPU, in
// which order (HIP ordinals), and the XGMI links between them. Thread-safe: stateless functions.
#pragma once

#include <string>
#include <vector>

#include "hardware/accelerator_plugin.h"

namespace tessera {

// A KFD node counts as a GPU when it has SIMDs (CPU nodes have none), its vendor_id is 0x1002,
// its location_id/domain name a PCI function that is AMD, of display (0x03) or processing-
// accelerator (0x12) class and bound to amdgpu, /dev/kfd exists and its render node
// /dev/dri/renderD<drm_render_minor> exists (containers get only the render nodes they were
// given). Counted GPUs are numbered 0..N-1 in KFD node order, which is ROCm's enumeration order,
// so the index is the HIP ordinal. XGMI io_links (type 11) between counted GPUs become kXgmi
// links with the bandwidth KFD reports.
Detection DetectAmdGpus(const DetectionContext& context);

// Reference §5.1: ROCR_VISIBLE_DEVICES must not be set (it renumbers GPUs under HIP's mask), and
// CUDA_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES, when both set, must be identical (HIP honours
// both). One message per violated rule.
std::vector<std::string> AmdEnvironmentErrors(const Environment& env);

}  // namespace tessera

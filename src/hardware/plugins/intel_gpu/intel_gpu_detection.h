// Discrete Intel GPU detection from DRM sysfs (reference §3, §3.1). Thread-safe: stateless.
#pragma once

#include "hardware/accelerator_plugin.h"

namespace tessera {

// Candidates are the render nodes /sys/class/drm/renderD<N>, each mapped to its PCI function.
// A function counts when it is Intel (0x8086), display class (0x03xxxx), bound to i915 or xe,
// its device id is in the discrete-GPU allow-list (intel_gpu_ids.h) and /dev/dri/renderD<N>
// exists. Discrete only, by this rule: integrated GPUs sit at 0000:00:02.0 on the root bus and
// are not in the allow-list; they, unknown ids and other Intel display functions are rejected
// with a warning naming the bus id and the reason. Counted GPUs are numbered in PCI bus order,
// the order Level Zero uses with ZE_ENABLE_PCI_ID_DEVICE_ORDER=1 (set by IsolationEnv).
Detection DetectIntelGpus(const DetectionContext& context);

}  // namespace tessera

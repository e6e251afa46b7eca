// The neuron family's telemetry reader, from the driver's sysfs under
// /sys/devices/virtual/neuron_device/neuron<chip>/ (the chip and core of each NeuronCore device
// come from its "chip" and "core_in_chip" attributes):
//   neuron_core<k>/stats/memory_usage/device_mem/<category>/total, summed over the categories
//                        -> memory_used_bytes (the core's device memory in use now)
//   stats/power/utilization "<status>,<epoch s>,<min>,<max>,<avg>" (% of the chip's maximum
//   power, per minute): avg when status is POWER_STATUS_VALID -> power_ratio, the same for both
//                           cores of a chip (NO_DATA: absent; INVALID: absent with a warning)
// NeuronCore utilization comes only from neuron-monitor's runtime reports, and the driver gives
// no memory total, temperature, clocks or watts: those stay absent. Stateless between reads.
// Not thread-safe (one reader, one caller); a Read is about a dozen small file reads per core.
#pragma once

#include <memory>

#include "hardware/telemetry_reader.h"

namespace tessera {

std::unique_ptr<TelemetryReader> MakeNeuronTelemetryReader(const TelemetryContext& context);

}  // namespace tessera

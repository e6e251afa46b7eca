// The neuron family's device messages: the driver's error counters under
// /sys/devices/virtual/neuron_device/neuron<chip>/ (each a folder with `total` and `present`;
// the chip and core of a NeuronCore come from its "chip" and "core_in_chip" attributes):
//   neuron_core<k>/stats/status/hw_error/total   runtime calls of that core that ended
//                                                NRT_HW_ERROR
//   stats/hardware/mem_ecc_uncorrected/total, mem_ecc_repairable_uncorrected/total,
//   sram_ecc_uncorrected/total                   the chip's uncorrected ECC events
// A Snapshot reads them; MessagesSince reads them again and reports each rise, a chip's once
// (with the first of its cores the worker holds):
//
//   NeuronCore 5: hardware errors (NRT_HW_ERROR) rose by 1
//   Neuron device 2: uncorrected device-memory ECC errors rose by 1
//
// The counters clear when written to; a counter that went down reports nothing.
// Not thread-safe (one reader, one caller); each call reads a few small files per core.
#pragma once

#include <memory>

#include "hardware/device_error_reader.h"

namespace tessera {

std::unique_ptr<DeviceErrorReader> MakeNeuronErrorReader(const DeviceErrorContext& context);

}  // namespace tessera

// AWS Neuron detection from the neuron driver's sysfs (reference §3). Thread-safe: stateless.
#pragma once

#include "hardware/accelerator_plugin.h"

namespace tessera {

// Chips are the driver's /sys/class/neuron_device/neuron<N> entries (links into
// /sys/devices/virtual/neuron_device/). Files read per chip: core_count, connected_devices
// ("12, 3, 4, 1": neighbour chip numbers), info/serial_number, info/architecture/{arch_type,
// device_name, instance_type}. A chip counts only when /dev/neuron<N> exists (containers get
// only their chips) and its PCI function is Amazon (0x1d0f), a Neuron device id and bound to the
// neuron driver. The class entries are virtual (no device link), so chip N is matched to the N-th
// neuron-bound Neuron function in PCI bus order (the driver's probe order); a real device link is
// preferred when present. Neuron chips report PCI class 0x0880 (system peripheral), so the class
// is not checked; the device-id table is. Without the class directory (old drivers), the
// neuron-bound functions in bus order are the chips, with the table's core counts.
// One Device per NeuronCore: index = global core id over the visible chips in chip order
// (chip c, core k -> sum of earlier chips' cores + k), which NEURON_RT_VISIBLE_CORES names.
// Every core carries its chip's PCI bus id and NUMA node; attribute "chip" is the chip number.
// Links: every core pair of two connected chips (kNeuronLink, inter-chip estimate) and every core
// pair inside one chip (kNeuronLink, the chip's memory bandwidth).
Detection DetectNeuronCores(const DetectionContext& context);

}  // namespace tessera

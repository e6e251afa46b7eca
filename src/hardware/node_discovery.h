// Whole-node discovery: runs every accelerator plugin (or reads a simulated hardware
// description), reads the host topology, applies the node agent's inherited masks, and derives
// what the node advertises: resources, labels, and the visible devices of each family.
// Thread-safe: DiscoverNode may be called concurrently (host topology discovery serializes
// itself internally).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hardware/accelerator_plugin.h"
#include "hardware/environment.h"
#include "hardware/host/host_topology.h"
#include "hardware/isolation.h"
#include "hardware/simulated/hardware_description.h"
#include "labels/label.h"
#include "resources/resource_set.h"

namespace tessera {

struct DiscoveryOptions {
  // Root of the Linux tree to read ("/" for this machine, or a fake tree).
  std::string sysroot = "/";
  // A simulated hardware description (YAML); when set, nothing is probed.
  std::optional<std::string> simulate_file;
  DetectionOptions detection;
  // The node agent's environment (inherited masks, isolation policy, deployment labels). When
  // unset: the process's own on the live machine, <sysroot>/proc/1/environ on a fake tree, and
  // none for a simulated host (the shell's masks name real devices, not simulated ones).
  std::optional<Environment> environment;
  // What the operator says the node has (`--resources`): beats detection. For an accelerator
  // resource the count must not exceed the visible devices (the first N are advertised); other
  // resources (CPU, memory, custom) are set as given.
  ResourceSet resource_overrides;
  // Operator labels (`--labels`), on top of defaults and a description's labels. Never under
  // the reserved prefix tessera.io/.
  LabelSet user_labels;
};

// One family that has devices on the node.
struct FamilyReport {
  const AcceleratorPlugin* plugin = nullptr;
  Detection detection;  // every device the plugin found, by physical index
  // The instances the node advertises, in instance order: all detected devices, or those named
  // by the agent's inherited mask, in mask order. Empty when the family is not advertised.
  std::vector<Device> visible;
  bool advertised = false;
  std::optional<std::string> inherited_mask;  // the mask variable's value when it was set
  std::string note;                           // why the family is not (fully) advertised
};

struct NodeHardware {
  std::string source;  // "probe <sysroot>" or "simulated <file>"
  HostTopology host;
  std::vector<FamilyReport> families;  // in registry (claim priority) order
  ResourceSet resources;
  LabelSet labels;
  IsolationPolicy isolation;
  std::vector<std::string> warnings;  // things a person should know (rejected devices, no NVML)
  std::vector<std::string> errors;    // conditions a node agent must refuse to start under

  int AcceleratorCount() const;
  std::vector<VisibleFamily> VisibleFamilies() const;
};

// The node a parsed simulated description makes, with the same rules as DiscoverNode (used by
// cluster files, which embed one description per node group). `source` names it in reports.
// options.sysroot and options.simulate_file are ignored.
absl::StatusOr<NodeHardware> NodeFromSimulatedHardware(SimulatedHardware simulated,
                                                       std::string source,
                                                       const DiscoveryOptions& options);

// The accelerator family names of the registry, for ParseHardwareDescription.
std::vector<std::string> AcceleratorFamilyNames();

// InvalidArgument / NotFound for bad input (a sysroot that is not a directory, an unreadable or
// malformed description, malformed isolation variables); hardware problems are warnings.
absl::StatusOr<NodeHardware> DiscoverNode(const DiscoveryOptions& options);

}  // namespace tessera

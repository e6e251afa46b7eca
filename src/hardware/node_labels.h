// Default node labels that come from the deployment rather than from the hardware: a Kubernetes
// manifest (or any launcher) sets these variables on the node agent, usually from the node's own
// labels through the downward API.
//   TESSERA_NODE_MARKET_TYPE -> tessera.io/market-type        (spot, on-demand, reserved)
//   TESSERA_NODE_ZONE        -> tessera.io/availability-zone
//   TESSERA_NODE_REGION      -> tessera.io/availability-region
//   TESSERA_NODE_GROUP       -> tessera.io/node-group
// Thread-safe: pure function.
#pragma once

#include <string>
#include <vector>

#include "hardware/environment.h"
#include "labels/label.h"

namespace tessera {

// Adds the labels whose variables are set and valid; an invalid value is skipped with a
// warning naming the variable, so a bad deployment setting never stops discovery.
void AddDeploymentLabels(const Environment& env, LabelSet& labels,
                         std::vector<std::string>& warnings);

}  // namespace tessera

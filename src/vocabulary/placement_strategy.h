// PlacementStrategy: how a placement group's (or a gang's) bundles are spread over nodes, as Ray
// names the four: PACK, SPREAD, STRICT_PACK, STRICT_SPREAD. The C++ API takes the enum
// (tessera/placement_group.h, tessera/gang.h); the command line and the Python binding parse
// Ray's word once (ParsePlacementStrategy), and wire/ converts it to the protocol's enum.
// Thread-safe: a value and pure functions.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"

namespace tessera {

enum class PlacementStrategy {
  kPack,          // best effort: fewest nodes
  kSpread,        // best effort: distinct nodes
  kStrictPack,    // every bundle on one node
  kStrictSpread,  // every bundle on a different node
};

// "PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD".
std::string_view PlacementStrategyName(PlacementStrategy strategy);
// The strategy of one of those words; InvalidArgument otherwise.
absl::StatusOr<PlacementStrategy> ParsePlacementStrategy(std::string_view text);

}  // namespace tessera

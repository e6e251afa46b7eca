#include "vocabulary/placement_strategy.h"

#include "absl/strings/str_cat.h"
#include "base/string_util.h"

namespace tessera {

std::string_view PlacementStrategyName(PlacementStrategy strategy) {
  switch (strategy) {
    case PlacementStrategy::kPack: return "PACK";
    case PlacementStrategy::kSpread: return "SPREAD";
    case PlacementStrategy::kStrictPack: return "STRICT_PACK";
    case PlacementStrategy::kStrictSpread: return "STRICT_SPREAD";
  }
  return "UNKNOWN";
}

absl::StatusOr<PlacementStrategy> ParsePlacementStrategy(std::string_view text) {
  for (PlacementStrategy s : {PlacementStrategy::kPack, PlacementStrategy::kSpread,
                              PlacementStrategy::kStrictPack, PlacementStrategy::kStrictSpread}) {
    if (text == PlacementStrategyName(s)) return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown placement strategy ", Quote(text),
                   "; expected PACK, SPREAD, STRICT_PACK or STRICT_SPREAD"));
}

}  // namespace tessera

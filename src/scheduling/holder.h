// Who holds an allocation of the cluster view, as other requests' explanations name it
// ("held by task t1", "held by slice group train").
#pragma once

#include <compare>
#include <string>
#include <string_view>

namespace tessera {

enum class HolderKind { kUnknown, kTask, kActor, kLease, kPlacementGroup, kSliceGroup };
// "task", "actor", "lease", "placement group", "slice group"; "" for kUnknown.
std::string_view HolderKindName(HolderKind kind);
// "tasks", ...; "other work" for kUnknown.
std::string_view HolderKindPlural(HolderKind kind);

struct Holder {
  HolderKind kind = HolderKind::kUnknown;
  std::string name;
  auto operator<=>(const Holder&) const = default;
  // "task t1"; "other work" for an unknown holder.
  std::string ToString() const;
};

}  // namespace tessera

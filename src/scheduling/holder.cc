#include "scheduling/holder.h"

#include "absl/strings/str_cat.h"
#include "base/string_util.h"

namespace tessera {

std::string_view HolderKindName(HolderKind kind) {
  switch (kind) {
    case HolderKind::kUnknown: return "";
    case HolderKind::kTask: return "task";
    case HolderKind::kActor: return "actor";
    case HolderKind::kLease: return "lease";
    case HolderKind::kPlacementGroup: return "placement group";
    case HolderKind::kSliceGroup: return "slice group";
  }
  return "";
}

std::string_view HolderKindPlural(HolderKind kind) {
  switch (kind) {
    case HolderKind::kUnknown: return "other work";
    case HolderKind::kTask: return "tasks";
    case HolderKind::kActor: return "actors";
    case HolderKind::kLease: return "leases";
    case HolderKind::kPlacementGroup: return "placement groups";
    case HolderKind::kSliceGroup: return "slice groups";
  }
  return "other work";
}

std::string Holder::ToString() const {
  if (kind == HolderKind::kUnknown) return "other work";
  return absl::StrCat(ToAbsl(HolderKindName(kind)), " ", name);
}

}  // namespace tessera

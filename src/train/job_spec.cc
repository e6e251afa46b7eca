#include "train/job_spec.h"

#include "absl/strings/str_cat.h"
#include "node/working_dir.h"
#include "wire/proto_convert.h"

namespace tessera::train {
namespace {

constexpr int kMaxRanks = 100000;

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

bool ValidEnvName(const std::string& name) {
  if (name.empty() || name.size() > 256) return false;
  if (name[0] >= '0' && name[0] <= '9') return false;
  for (char c : name) {
    const bool ok =
        (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

absl::Status CheckResources(const v1::Resources& resources, const std::string& what) {
  auto parsed = wire::ResourcesFromProto(resources, what);
  if (!parsed.ok()) return Invalid(std::string(parsed.status().message()));
  for (const auto& [name, raw] : resources.raw()) {
    if (raw < 0) return Invalid(absl::StrCat(what, ": ", name, " is negative"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateJobSpec(const v1::JobSpec& spec) {
  if (spec.argv().empty() || spec.argv(0).empty()) {
    return Invalid("spec.argv: no command given");
  }
  if (spec.name().size() > 128) return Invalid("spec.name: longer than 128 characters");
  for (const auto& [name, value] : spec.env()) {
    if (!ValidEnvName(name)) {
      return Invalid(absl::StrCat("spec.env: \"", name.substr(0, 64),
                                  "\" is not a variable name (letters, digits, '_')"));
    }
    if (value.find('\0') != std::string::npos) {
      return Invalid(absl::StrCat("spec.env: ", name, " holds a NUL byte"));
    }
  }
  if (!spec.working_dir().empty()) {
    // The check every agent makes before it unpacks, made here so the submit call answers.
    if (absl::Status s = ValidateWorkingDirArchive(spec.working_dir()); !s.ok()) {
      return Invalid(absl::StrCat("spec.working_dir: ", s.message()));
    }
  }
  if (spec.max_restarts() < 0) return Invalid("spec.max_restarts: must be 0 or more");
  if (spec.hang_timeout_ms() < 0) return Invalid("spec.hang_timeout_ms: must be 0 or more");
  if (spec.stop_grace_ms() < 0) return Invalid("spec.stop_grace_ms: must be 0 or more");
  if (spec.start_timeout_ms() < 0) return Invalid("spec.start_timeout_ms: must be 0 or more");
  if (spec.elastic_check_ms() < 0) return Invalid("spec.elastic_check_ms: must be 0 or more");
  const v1::GangPlacement& p = spec.placement();
  const int kinds =
      (p.slices_size() > 0 ? 1 : 0) + (p.max_workers() > 0 ? 1 : 0) + (p.max_nodes() > 0 ? 1 : 0);
  if (kinds != 1) {
    return Invalid("spec.placement: exactly one of slices, workers or nodes must be given");
  }
  if (p.slices_size() > 0) {
    for (int i = 0; i < p.slices_size(); ++i) {
      const v1::SliceAlternative& s = p.slices(i);
      const std::string where = absl::StrCat("spec.placement.slices[", i, "]");
      if (s.nvlink_hosts() < 0 || s.num_slices() < 0) return Invalid(where + ": negative count");
      if (s.nvlink_hosts() == 0 && !s.has_shape()) {
        return Invalid(absl::StrCat(where, ": a TPU slice shape is needed"));
      }
      if (s.has_shape()) {
        absl::StatusOr<SliceShape> shape = wire::SliceShapeFromProto(s.shape(), where + ".shape");
        if (!shape.ok()) return shape.status();
      }
      if (absl::Status st = CheckResources(s.per_host(), "spec.placement.slices.per_host");
          !st.ok()) {
        return st;
      }
    }
    if (p.min_slices() < 0 || p.min_slices() > std::max(1, p.slices(0).num_slices())) {
      return Invalid("spec.placement.min_slices: must be between 1 and the number of slices");
    }
  }
  if (p.max_workers() > 0) {
    if (p.max_workers() > kMaxRanks) return Invalid("spec.placement.max_workers: too many");
    if (p.min_workers() < 0 || p.min_workers() > p.max_workers()) {
      return Invalid("spec.placement.min_workers: must be between 1 and max_workers");
    }
    if (absl::Status st =
            CheckResources(p.resources_per_worker(), "spec.placement.resources_per_worker");
        !st.ok()) {
      return st;
    }
    if (p.resources_per_worker().raw().empty()) {
      return Invalid("spec.placement.resources_per_worker: a worker must ask for something");
    }
    // UNSPECIFIED is PACK; a number this build does not know is refused.
    if (!v1::PlacementStrategy_IsValid(p.strategy())) {
      return Invalid(absl::StrCat("spec.placement.strategy: ", static_cast<int>(p.strategy()),
                                  " is not PACK, SPREAD, STRICT_PACK or STRICT_SPREAD"));
    }
  }
  if (p.max_nodes() > 0) {
    if (p.min_nodes() < 0 || p.min_nodes() > p.max_nodes()) {
      return Invalid("spec.placement.min_nodes: must be between 1 and max_nodes");
    }
    if (p.nproc_per_node() < 1 ||
        static_cast<int64_t>(p.nproc_per_node()) * p.max_nodes() > kMaxRanks) {
      return Invalid("spec.placement.nproc_per_node: must be 1 or more");
    }
    if (absl::Status st =
            CheckResources(p.resources_per_node(), "spec.placement.resources_per_node");
        !st.ok()) {
      return st;
    }
    for (const auto& [name, raw] : p.resources_per_node().raw()) {
      if (raw % p.nproc_per_node() != 0) {
        return Invalid(absl::StrCat("spec.placement.resources_per_node: ", name,
                                    " does not divide evenly among ", p.nproc_per_node(),
                                    " ranks per node"));
      }
    }
  }
  for (int i = 0; i < p.label_selectors_size(); ++i) {
    auto parsed = wire::LabelSelectorFromProto(
        p.label_selectors(i), absl::StrCat("spec.placement.label_selectors[", i, "]"));
    if (!parsed.ok()) return Invalid(std::string(parsed.status().message()));
  }
  return absl::OkStatus();
}

}  // namespace tessera::train

#include "hardware/isolation.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "hardware/plugin_registry.h"

namespace tessera {
namespace {

constexpr std::string_view kNosetPrefix = "TESSERA_NOSET_";
constexpr std::string_view kZeroPolicy = "TESSERA_ZERO_ASSIGNED_POLICY";

absl::StatusOr<ZeroAssignedPolicy> ParseZeroPolicy(std::string_view variable,
                                                   std::string_view value) {
  const std::string v = absl::AsciiStrToLower(ToAbsl(Trim(value)));
  if (v == "inherit") return ZeroAssignedPolicy::kInherit;
  if (v == "hide") return ZeroAssignedPolicy::kHide;
  return absl::InvalidArgumentError(
      absl::StrCat(ToAbsl(variable), "=", Quote(value), ": expected \"inherit\" or \"hide\""));
}

}  // namespace

std::string_view ZeroAssignedPolicyName(ZeroAssignedPolicy policy) {
  return policy == ZeroAssignedPolicy::kHide ? "hide" : "inherit";
}

absl::StatusOr<IsolationPolicy> IsolationPolicy::FromEnvironment(const Environment& env) {
  IsolationPolicy result;
  ZeroAssignedPolicy default_zero = ZeroAssignedPolicy::kInherit;
  if (auto v = env.Get(kZeroPolicy)) {
    TESSERA_ASSIGN_OR_RETURN(default_zero, ParseZeroPolicy(kZeroPolicy, *v));
  }
  for (const AcceleratorPlugin* plugin : AcceleratorPlugins()) {
    FamilyIsolationPolicy policy;
    policy.zero_assigned = default_zero;
    const std::string noset =
        absl::StrCat(ToAbsl(kNosetPrefix), ToAbsl(plugin->visible_devices_env()));
    if (auto v = env.Get(noset)) {
      auto on = ParseBool(*v);
      if (!on.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(noset, ": ", on.status().message()));
      }
      policy.opt_out = *on;
    }
    const std::string zero =
        absl::StrCat(ToAbsl(kZeroPolicy), "_", ToAbsl(plugin->visible_devices_env()));
    if (auto v = env.Get(zero)) {
      TESSERA_ASSIGN_OR_RETURN(policy.zero_assigned, ParseZeroPolicy(zero, *v));
    }
    result.Set(std::string(plugin->family()), policy);
  }
  return result;
}

FamilyIsolationPolicy IsolationPolicy::For(std::string_view family) const {
  auto it = families_.find(family);
  return it == families_.end() ? FamilyIsolationPolicy{} : it->second;
}

void IsolationPolicy::Set(std::string family, FamilyIsolationPolicy policy) {
  families_[std::move(family)] = policy;
}

absl::StatusOr<EnvChanges> WorkerIsolationEnv(const std::vector<VisibleFamily>& families,
                                              const DeviceAssignment& assignment,
                                              const IsolationPolicy& policy) {
  for (const auto& [family, ids] : assignment) {
    bool known = false;
    for (const VisibleFamily& f : families) known = known || f.plugin->family() == family;
    if (!known && !ids.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("assignment names family ", Quote(family),
                                                     ", which this node does not advertise"));
    }
  }
  EnvChanges changes;
  for (const VisibleFamily& f : families) {
    const AcceleratorPlugin& plugin = *f.plugin;
    const FamilyIsolationPolicy p = policy.For(plugin.family());
    auto it = assignment.find(plugin.family());
    const std::vector<int> none;
    const std::vector<int>& instances = it == assignment.end() ? none : it->second;

    std::vector<int> physical;
    std::set<int> seen;
    for (int instance : instances) {
      if (instance < 0 || instance >= static_cast<int>(f.visible.size())) {
        return absl::InvalidArgumentError(
            absl::StrCat(ToAbsl(plugin.family()), " instance ", instance,
                         " is out of range: this node advertises ", f.visible.size(), " ",
                         ToAbsl(plugin.resource_name())));
      }
      if (!seen.insert(instance).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(ToAbsl(plugin.family()), " instance ", instance, " is assigned twice"));
      }
      physical.push_back(f.visible[instance].index);
    }
    if (p.opt_out) continue;
    if (physical.empty()) {
      if (p.zero_assigned == ZeroAssignedPolicy::kHide) {
        changes.push_back({std::string(plugin.visible_devices_env()), std::string()});
      }
      continue;
    }
    for (EnvChange& change : plugin.IsolationEnv(physical, f.visible)) {
      changes.push_back(std::move(change));
    }
  }
  return changes;
}

void ApplyEnvChanges(const EnvChanges& changes, Environment& env) {
  for (const EnvChange& change : changes) {
    if (change.value.has_value()) {
      env.Set(change.name, *change.value);
    } else {
      env.Unset(change.name);
    }
  }
}

}  // namespace tessera

// Device isolation: the environment a worker process gets so that it sees exactly the devices
// it was assigned, through one code path for every family and every worker language.
//   * assigned instance ids are translated to physical ids through the node's visible devices
//     (so an agent started under CUDA_VISIBLE_DEVICES=2,5 writes 5 for instance 1);
//   * a family can be opted out (TESSERA_NOSET_<MASK VARIABLE>=1): nothing is written for it;
//   * a family the worker holds none of is left alone by default (the worker inherits the
//     node's mask), or hidden entirely when its zero-assigned policy is "hide".
// Thread-safe: pure functions over values.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hardware/accelerator_plugin.h"
#include "hardware/environment.h"

namespace tessera {

enum class ZeroAssignedPolicy { kInherit, kHide };
std::string_view ZeroAssignedPolicyName(ZeroAssignedPolicy policy);

struct FamilyIsolationPolicy {
  bool opt_out = false;
  ZeroAssignedPolicy zero_assigned = ZeroAssignedPolicy::kInherit;
  friend bool operator==(const FamilyIsolationPolicy&, const FamilyIsolationPolicy&) = default;
};

// Per-family policies, keyed by family name; a family not listed gets the defaults.
class IsolationPolicy {
 public:
  // Reads, for every registered family with mask variable VAR:
  //   TESSERA_NOSET_<VAR>                    boolean (1/true/yes/on, 0/false/no/off)
  //   TESSERA_ZERO_ASSIGNED_POLICY_<VAR>     inherit | hide
  // and TESSERA_ZERO_ASSIGNED_POLICY (inherit | hide), the default for every family.
  // A malformed value is an InvalidArgument error naming the variable.
  static absl::StatusOr<IsolationPolicy> FromEnvironment(const Environment& env);

  FamilyIsolationPolicy For(std::string_view family) const;
  void Set(std::string family, FamilyIsolationPolicy policy);

 private:
  std::map<std::string, FamilyIsolationPolicy, std::less<>> families_;
};

// The devices of one family that a node advertises, in instance order (instance i is
// visible[i]; its physical index is visible[i].index).
struct VisibleFamily {
  const AcceleratorPlugin* plugin = nullptr;
  std::vector<Device> visible;
};

// Instance ids assigned to a worker, per family name.
using DeviceAssignment = std::map<std::string, std::vector<int>, std::less<>>;

// The environment changes for a worker holding `assignment` on a node advertising `families`.
// InvalidArgument when an instance id is out of range or repeated, or a family is unknown.
absl::StatusOr<EnvChanges> WorkerIsolationEnv(const std::vector<VisibleFamily>& families,
                                              const DeviceAssignment& assignment,
                                              const IsolationPolicy& policy);

// Applies changes to an environment (set or unset each variable).
void ApplyEnvChanges(const EnvChanges& changes, Environment& env);

}  // namespace tessera

// BundleLedger: requests served from placement-group bundles (reference scheduling.md §4.6).
// Each bundle's reservation (the Allocation the group holds on its node) is a small private
// node: a request targeted at bundle i takes from what is left of bundle i; one targeted at any
// bundle (-1) takes from the first bundle, in index order, that can hold the whole demand now.
// A demand never spans bundles. Whole devices are chosen among the bundle's untouched devices
// with the node's device-set chooser (best connected first); a fraction best-fits onto one of
// the bundle's devices. The reservation itself is never changed: the cluster view already
// counts it as used.
//
// The head's simulator and the node agent share it. Allocation ids it returns are its own,
// a different space from the ClusterView's. Not thread-safe: one owner calls it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "scheduling/cluster_view.h"
#include "scheduling/scheduling_request.h"
#include "scheduling/task_scheduler.h"

namespace tessera {

class BundleLedger {
 public:
  // `cluster` (which must outlive the ledger) provides each node's device topology for
  // device-set choice; the ledger never changes it.
  explicit BundleLedger(const ClusterView* cluster) : cluster_(cluster) {}

  // Registers bundle `bundle` of `group` with its reservation. AlreadyExists when that bundle is
  // registered; InvalidArgument for an empty group or a negative index.
  absl::Status AddBundle(std::string_view group, int bundle, const Allocation& reservation);

  // Forgets one bundle (or every bundle of the group with nullopt) and returns what was being
  // served from it, in allocation order: that work lost its reservation.
  std::vector<Allocation> RemoveBundles(std::string_view group, std::optional<int> bundle);

  // Serves `demand` from the target. kPlaced: Placement{node, allocation, 0, bundle}. kPending:
  // the target could hold it but has not enough left now, or the bundle is not reserved now
  // (never placed yet, or lost with its node). kInfeasible: no bundle of the target could ever
  // hold it. The explanation is one line, naming who holds what is left short. `holder` names
  // the request in other requests' explanations (SetHolder may name it later).
  ScheduleResult Allocate(const BundleTarget& target, const ResourceSet& demand,
                          Holder holder = {});
  // Names who holds a served allocation; NotFound when it is not held.
  absl::Status SetHolder(AllocationId id, Holder holder);

  // Returns exactly what the allocation took to its bundle. NotFound when not held (released
  // twice, or its bundle was removed).
  absl::StatusOr<Allocation> Release(AllocationId id);

  // The reservation allocation id bundle `bundle` of `group` is registered with.
  std::optional<AllocationId> ReservationOf(std::string_view group, int bundle) const;
  // Registered bundle indices of the group, ascending.
  std::vector<int> BundlesOf(std::string_view group) const;
  // What is left of a registered bundle (for status output and tests).
  const ResourceSet* RemainingOf(std::string_view group, int bundle) const;

 private:
  struct DevicesLeft {
    std::string resource;
    std::vector<int> instances;     // the reservation's instances, ascending
    std::vector<Quantity> granted;  // per instance, as reserved
    std::vector<Quantity> left;     // per instance, not yet served
  };
  struct Bundle {
    Allocation reservation;
    ResourceSet left;
    std::vector<DevicesLeft> devices;  // sorted by resource
    std::vector<int64_t> served;       // allocation ids, ascending
  };
  using Key = std::pair<std::string, int>;

  bool Holds(const Bundle& b, const ResourceSet& demand, bool now) const;
  std::optional<std::vector<DeviceGrant>> ChooseDevices(const Bundle& b,
                                                        const ResourceSet& demand) const;
  std::string Shortfall(const Bundle& b, const ResourceSet& demand) const;
  // Changes what the device instances of a bundle have left by `sign` (-1 when the grants are
  // served from it, +1 when they come back) times the grants' amounts.
  static void AdjustDevicesLeft(std::vector<DevicesLeft>& devices,
                                const std::vector<DeviceGrant>& grants, int64_t sign);

  const ClusterView* cluster_;
  std::map<Key, Bundle, std::less<>> bundles_;
  struct Served {
    Key bundle;
    Allocation allocation;
    Holder holder;
  };
  std::map<int64_t, Served> served_;  // allocation id -> what it took, from which bundle
  int64_t next_id_ = 1;
};

}  // namespace tessera

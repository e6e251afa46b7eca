// Which devices of one node a request gets: k whole devices with the best interconnect that
// keep the best-connected groups free for later requests, or one device with room for a
// fractional demand (reference scheduling.md §5). Pure functions: no I/O, deterministic (the
// same inputs give the same answer), thread-safe.
//
// ChooseDeviceSet scores each candidate set S lexicographically, first difference wins:
//   1. min pairwise link class inside S, higher first (no direct link counts below kLow; a
//      single device has no pairs and ties with every other single device). Keeps a set inside
//      one NVSwitch / XGMI / cube-mesh quad rather than across quads.
//   2. islands spanned, fewer first. An island is a connected component of the node's link
//      graph (all links of any class): one NVLink/NVSwitch/XGMI/ICI/NeuronLink domain.
//   3. pieces, fewer first: connected components of S using only links between members of S
//      (contiguous ring segments beat scattered devices of the same ring).
//   4. NUMA nodes spanned, fewer first (unknown counts as one more node).
//   5. distinct nearest NICs, fewer first (unknown counts as one more NIC).
//   6. fragmentation, less first. The well-connected groups are the maximal cliques of the
//      link graph at each link class present (links of that class or better), strongest class
//      first, then the NUMA nodes. Per level, the free-device counts left in each group after
//      taking S, sorted descending, compare lexicographically: the larger the biggest groups
//      left free, the better. So a 1-device request goes into an already-broken island, on the
//      NUMA node with the fewest free devices, and a whole free island stays whole.
//   7. the sorted instance indices, lowest first (deterministic tie-break).
//
// Search: every k-subset of the free devices when there are at most
// DeviceSetChoiceOptions::exhaustive_limit of them; otherwise a deterministic greedy search
// that grows one set from each free device (adding, each step, the device with the best link
// class to the set, then in an island already used, then with the most links into the set,
// then on a NUMA node and NIC already used, then lowest index) and scores the grown sets as
// above. Clique enumeration stops after kMaxCliquesPerLevel cliques per level (pathological
// link graphs only).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "resources/quantity.h"
#include "scheduling/device_topology.h"

namespace tessera {

struct DeviceSetChoiceOptions {
  // Enumerate all C(free, k) subsets when that number is at most this; else search greedily.
  int64_t exhaustive_limit = 4096;
};

inline constexpr int kMaxCliquesPerLevel = 1024;

namespace device_set_choice_internal {
struct GroupLevel;
struct Prepared;
}  // namespace device_set_choice_internal

// One node's topology prepared once (link classes, islands, well-connected groups), so that
// each choice costs only the search: keep one per node and reuse it while the topology holds.
// Immutable after construction; copies share the prepared data; const methods are thread-safe.
class DeviceSetChooser {
 public:
  explicit DeviceSetChooser(const DeviceTopology& topology);

  // Same contract as ChooseDeviceSet below.
  std::vector<int> Choose(const std::vector<bool>& free, int k,
                          const DeviceSetChoiceOptions& options = {}) const;
  // Same contract as CompareDeviceSets below.
  int Compare(const std::vector<bool>& free, std::vector<int> a, std::vector<int> b) const;

 private:
  std::shared_ptr<const device_set_choice_internal::Prepared> topology_;
};

// k whole devices among the fully free ones (free[i]), sorted ascending; empty when fewer than
// k are free or k <= 0. Instances past the end of `free` are not free; links and per-instance
// facts outside 0..topology.count-1 are ignored.
std::vector<int> ChooseDeviceSet(const DeviceTopology& topology, const std::vector<bool>& free,
                                 int k);
std::vector<int> ChooseDeviceSet(const DeviceTopology& topology, const std::vector<bool>& free,
                                 int k, const DeviceSetChoiceOptions& options);

// Criteria 1-6 above for two candidate sets of the same node and free vector (members must be
// valid instance indices): < 0 when `a` is better, > 0 when `b` is, 0 when only the index
// tie-break separates them. For tests and explanations; ChooseDeviceSet does not call it.
int CompareDeviceSets(const DeviceTopology& topology, const std::vector<bool>& free,
                      std::vector<int> a, std::vector<int> b);

// For 0 < demand < 1: the instance left with the least spare capacity that still fits (best
// fit; ties: lowest index), -1 when none fits or demand is outside (0, 1).
int BestFitFraction(const std::vector<Quantity>& available, Quantity demand);

}  // namespace tessera

// ClusterView: what the scheduler knows about every node — state, total and available
// resources, labels, per-device availability of unit-instance resources with their link
// topology, and fabric-domain membership — plus the allocation primitives that change it.
//
// Cost model: every update (add, remove, fail, drain, change totals, allocate, release) costs in
// proportion to the change (O(resources + labels) of one node, times log n for the indexes),
// never a scan of the cluster. Label lookups go through an index key -> value -> nodes, and the
// schedulable nodes of each resource are kept ordered by utilization (pack choices) and by index
// (round-robin spread choices), with and without the nodes that carry accelerators.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/strong_id.h"
#include "hardware/node_discovery.h"
#include "labels/label.h"
#include "labels/label_selector.h"
#include "resources/quantity.h"
#include "resources/resource_set.h"
#include "scheduling/device_set_choice.h"
#include "scheduling/device_topology.h"
#include "scheduling/holder.h"
#include "vocabulary/tpu_generation.h"
#include "vocabulary/tpu_topology.h"

namespace tessera {

using AllocationId = StrongId<struct AllocationIdTag, int64_t>;

enum class NodeState { kAlive, kDraining, kDead };
std::string_view NodeStateName(NodeState state);

// Shared because identical hosts have identical topologies; a topology never changes once built.
using DeviceTopologyPtr = std::shared_ptr<const DeviceTopology>;

// The kind of TPU slice a host is in: its generation and topology (a v6e 4x4).
struct TpuSliceType {
  TpuGeneration generation = TpuGeneration::kV6e;
  TpuTopology topology;
  friend bool operator==(const TpuSliceType&, const TpuSliceType&) = default;
};

// Fast-fabric membership, read from the node's labels once, when it registers (AddNode).
struct FabricMembership {
  std::string tpu_slice_name;  // tessera.io/tpu-slice-name; "" when absent
  // tessera.io/tpu-worker-id; nullopt when absent or not a number from 0.
  std::optional<int> tpu_worker_id;
  // tessera.io/tpu-pod-type ("v6e-16") and tessera.io/tpu-topology ("4x4") read together;
  // nullopt when either is absent or does not parse, or when they disagree (a topology that is
  // not a slice of the pod type's generation, or of another chip count): such a host is no
  // slice's host to the slice scheduler.
  std::optional<TpuSliceType> tpu_slice;
  std::string fabric_domain;  // tessera.io/fabric-domain; "" when absent
  friend bool operator==(const FabricMembership&, const FabricMembership&) = default;
};
FabricMembership FabricMembershipFromLabels(const LabelSet& labels);

// What a node registers with.
// Devices of one resource on one node: far above any real host, low enough that a hostile count
// cannot make a receiver allocate gigabytes (AddNode refuses more; so does the protocol).
inline constexpr int kMaxDevicesPerResource = 4096;

struct NodeSpec {
  NodeId id;
  ResourceSet resources;
  LabelSet labels;
  // Per unit-instance resource name ("GPU", "TPU"): its devices by instance index. A unit-instance
  // resource of the plugin registry without an entry gets a topology of total-many unlinked
  // devices.
  std::map<std::string, DeviceTopologyPtr, std::less<>> devices;
  // What `labels` say of the node's fabric, when a copy of a registered node already holds it
  // (the bounded search's idle copies), so labels are read once per registration; unset: AddNode
  // reads it from `labels`.
  std::optional<FabricMembership> fabric;
};

// The node hardware discovery reports: its resources and labels, and for every advertised family
// a topology of the visible devices (instance i = visible[i]) with the family's links.
NodeSpec NodeSpecFromHardware(NodeId id, const NodeHardware& hardware);

// The devices of one unit-instance resource on a node and how much of each is free (capacity 1).
struct DeviceInstances {
  std::string resource;
  DeviceTopologyPtr topology;
  // Prepared once per distinct topology and shared by the nodes that have it.
  std::shared_ptr<const DeviceSetChooser> chooser;
  std::vector<Quantity> available;  // by instance index, each in [0, 1]
  // Instances whose whole capacity is free.
  int FullyFree() const;
  // The largest free amount on one instance.
  Quantity LargestFree() const;
};

// What one allocation took on one unit-instance resource.
struct DeviceGrant {
  std::string resource;
  std::vector<int> instances;     // instance indices, ascending
  std::vector<Quantity> amounts;  // per instance: 1 for whole devices, the fraction otherwise
  friend bool operator==(const DeviceGrant&, const DeviceGrant&) = default;
};

struct Allocation {
  AllocationId id;
  NodeId node;
  ResourceSet resources;
  std::vector<DeviceGrant> devices;  // sorted by resource name
  friend bool operator==(const Allocation&, const Allocation&) = default;
};

// Dense handle of a registered node; stable for the life of the view (never reused).
using NodeIndex = int;

// The fields every decision reads of every node it passes (state, whether it was removed, its
// pack key, whether anything is allocated) come first, so they share the record's first cache
// lines: a scan over thousands of nodes (a slice reservation checks every host of its shape)
// then costs one or two lines per node, not one per field.
struct NodeRecord {
  NodeState state = NodeState::kAlive;
  bool removed = false;
  // Whether its totals carry an accelerator resource (IsAcceleratorResource).
  bool carries_accelerators = false;
  // max over resources of used / total, in parts per million: the pack/spread key.
  int64_t utilization_ppm = 0;
  absl::btree_set<int64_t> allocations;  // outstanding allocation ids on this node
  NodeId id;
  ResourceSet total;
  ResourceSet available;
  LabelSet labels;
  FabricMembership fabric;
  std::vector<DeviceInstances> devices;  // sorted by resource name

  const DeviceInstances* FindDevices(std::string_view resource) const;
};

// Nodes ordered by (utilization, index): the pack order of one resource.
using UtilizationIndex = absl::btree_set<std::pair<int64_t, NodeIndex>>;
// Nodes in ascending index: the round-robin order of spread choices.
using NodeOrder = absl::btree_set<NodeIndex>;

// Not thread-safe: one owner (the scheduler's caller) mutates and reads it.
class ClusterView {
 public:
  ClusterView() = default;
  ClusterView(const ClusterView&) = delete;
  ClusterView& operator=(const ClusterView&) = delete;

  // InvalidArgument for an empty or taken id, invalid labels, or devices that disagree with the
  // resource totals (a unit-instance total must be a whole number equal to its device count).
  absl::StatusOr<NodeIndex> AddNode(NodeSpec spec);
  // Marks the node dead: it takes no work and its allocations are dropped and returned (the work
  // on them is lost; the caller must reschedule or fail it). NotFound for an unknown node.
  absl::StatusOr<std::vector<Allocation>> FailNode(const NodeId& id);
  // Forgets the node (its id may register again); returns its outstanding allocations like
  // FailNode.
  absl::StatusOr<std::vector<Allocation>> RemoveNode(const NodeId& id);
  // A draining node keeps its allocations but takes no new work; kAlive undrains it.
  absl::Status SetDraining(const NodeId& id, bool draining);
  // New totals for non-device resources (CPU, memory, custom). Refused when it would leave less
  // than is allocated, or when it changes a unit-instance resource (re-register the node).
  absl::Status SetTotals(const NodeId& id, const ResourceSet& totals);

  // Takes `demand` on the node: whole devices through ChooseDeviceSet, a fraction through
  // BestFitFraction. Never over-allocates: FailedPrecondition for a node that is not alive,
  // ResourceExhausted when it does not fit now; nothing changes on error. `holder` names who
  // holds it (SetHolder may name it later).
  absl::StatusOr<Allocation> Allocate(NodeIndex node, const ResourceSet& demand,
                                      Holder holder = {});
  // Takes `demand` with the device instances the caller names (a reservation decided elsewhere,
  // e.g. the head's choice a node agent prepares, or a lease a node agent reports). Same errors
  // as Allocate, plus InvalidArgument when the grants do not match the demand exactly (whole
  // devices at 1 each, a fraction on one instance, every unit-instance resource granted once).
  absl::StatusOr<Allocation> AllocateExact(NodeIndex node, const ResourceSet& demand,
                                           std::vector<DeviceGrant> devices);
  // AllocateExact for a reservation that already exists elsewhere and is being taken back into a
  // fresh view (a head restarted from its state store restoring what the node agents hold): the
  // same checks and errors, except that a draining node is accepted too — draining refuses new
  // work, not what a node already holds. A dead node is still refused.
  absl::StatusOr<Allocation> RestoreExact(NodeIndex node, const ResourceSet& demand,
                                          std::vector<DeviceGrant> devices);
  // Returns exactly what the allocation took. NotFound when it is not held (released twice, or
  // its node failed).
  absl::StatusOr<Allocation> Release(AllocationId id);
  // Names who holds a held allocation (until it is released or its node fails); NotFound when
  // it is not held. An allocation nobody named is held by "other work".
  absl::Status SetHolder(AllocationId id, Holder holder);
  // The holder of a held allocation (kUnknown when unnamed or not held).
  const Holder& HolderOf(AllocationId id) const;

  // Whether the demand could ever fit the node (its totals and device counts).
  bool FeasibleOn(NodeIndex node, const ResourceSet& demand) const;
  // Whether the demand fits the node now (available amounts and free devices).
  bool FitsNow(NodeIndex node, const ResourceSet& demand) const;

  std::optional<NodeIndex> Find(const NodeId& id) const;
  const NodeRecord& node(NodeIndex index) const { return nodes_[index]; }
  // Every index ever registered, including dead and removed ones (check `removed`/`state`).
  int slot_count() const { return static_cast<int>(nodes_.size()); }
  int alive_count() const { return alive_count_; }
  const Allocation* FindAllocation(AllocationId id) const;

  // Alive nodes that carry `resource` (every alive node for ""), by utilization.
  const UtilizationIndex* UtilizationOrder(std::string_view resource) const;
  // Alive nodes that carry no accelerator resource, by utilization.
  const UtilizationIndex& UtilizationOrderWithoutAccelerators() const {
    return without_accelerators_;
  }
  // Alive nodes that carry `resource` (every alive node for ""), by index; nullptr when none ever
  // did. Changes only when a node joins, leaves, drains or gets new totals, never on allocation.
  const NodeOrder* IndexOrder(std::string_view resource) const;
  // Alive nodes that carry no accelerator resource, by index.
  const NodeOrder& IndexOrderWithoutAccelerators() const { return without_accelerators_by_index_; }
  // Registered nodes whose label `key` has `value` / any value (nullptr when none).
  const absl::btree_set<NodeIndex>* NodesWithLabel(std::string_view key,
                                                   std::string_view value) const;
  // The alive nodes of each value of label `key`, by value (values with none are left out);
  // O(nodes carrying the key).
  std::vector<std::pair<std::string, std::vector<NodeIndex>>> NodesByLabelValue(
      std::string_view key) const;
  // Registered (not removed) nodes that may satisfy the selector, through the label index: the
  // nodes of its most selective IN / EXISTS constraint, ascending. nullopt when the selector has
  // no such constraint (every node is a candidate). Candidates still need Matches().
  std::optional<std::vector<NodeIndex>> SelectorCandidates(const LabelSelector& selector) const;
  // How many nodes SelectorCandidates would return, without building the list.
  std::optional<size_t> SelectorCandidateCount(const LabelSelector& selector) const;

  // Nodes whose change could make an infeasible request feasible (added, undrained, totals
  // changed), in event order. feasibility_log()[i] for i >= a cursor are the news since then.
  const std::vector<NodeIndex>& feasibility_log() const { return feasibility_log_; }

 private:
  using LabelIndex =
      std::map<std::string, std::map<std::string, absl::btree_set<NodeIndex>, std::less<>>,
               std::less<>>;

  absl::StatusOr<NodeIndex> Lookup(const NodeId& id) const;
  absl::StatusOr<std::vector<Allocation>> TakeAllocations(NodeRecord& record);
  // NotFound / FailedPrecondition / ResourceExhausted when the node cannot take `demand` now
  // (device shapes aside): what Allocate and AllocateExact both check first.
  // `allow_draining`: a draining node passes too (RestoreExact).
  absl::Status CheckAllocatable(NodeIndex node, const ResourceSet& demand,
                                bool allow_draining = false) const;
  // AllocateExact and RestoreExact.
  absl::StatusOr<Allocation> TakeExact(NodeIndex node, const ResourceSet& demand,
                                       std::vector<DeviceGrant> devices, bool allow_draining);
  // Applies a checked allocation: subtracts the demand and the grants, records it.
  absl::StatusOr<Allocation> Apply(NodeIndex node, const ResourceSet& demand,
                                   std::vector<DeviceGrant> devices, Holder holder);
  void Unindex(NodeIndex index);  // out of the utilization indexes
  void Reindex(NodeIndex index);  // into them, with a fresh utilization
  // Out of / into every index of alive nodes (utilization and index order): the node stops or
  // starts taking work, or its totals change.
  void Leave(NodeIndex index);
  void Join(NodeIndex index);
  void UpdateUtilization(NodeIndex index);
  void IndexLabels(NodeIndex index);
  void UnindexLabels(NodeIndex index);
  static bool DevicesFit(const NodeRecord& record, const ResourceSet& demand, bool now);
  // The selector's constraint whose candidates are fewest, with their count.
  std::optional<std::pair<const LabelConstraint*, size_t>> MostSelective(
      const LabelSelector& selector) const;

  std::vector<NodeRecord> nodes_;
  absl::flat_hash_map<std::string, NodeIndex> by_id_;
  std::map<std::string, UtilizationIndex, std::less<>> by_resource_;  // "" = every alive node
  UtilizationIndex without_accelerators_;
  std::map<std::string, NodeOrder, std::less<>> by_resource_in_order_;  // "" = every alive node
  NodeOrder without_accelerators_by_index_;
  LabelIndex label_index_;
  struct Held {
    Allocation allocation;
    Holder holder;
  };
  absl::flat_hash_map<int64_t, Held> allocations_;
  int64_t next_allocation_ = 1;
  int alive_count_ = 0;
  std::vector<NodeIndex> feasibility_log_;
  // One chooser per distinct topology object (identical hosts share one).
  std::map<DeviceTopologyPtr, std::shared_ptr<const DeviceSetChooser>> choosers_;
};

}  // namespace tessera

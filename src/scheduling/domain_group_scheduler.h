// DomainGroupScheduler: reserves whole fast-fabric domains — K distinct intact, idle TPU slices of
// a generation and topology, or N hosts inside one NVLink domain — all hosts or none, trying an
// ordered list of alternatives (e.g. one v6e 8x8, else two v6e 4x8, else one v5e 8x8).
//
// Rules (docs/scheduling-formats.md):
// - A slice is the set of registered hosts labelled with one tessera.io/tpu-slice-name whose
//   pod type and topology labels (read into types once, when each host registered:
//   FabricMembership) are the alternative's generation and topology; hosts whose labels do not
//   parse or disagree belong to no slice. It is INTACT when every worker id
//   0..hosts-1 has an alive host (hosts = chips of the topology / chips per host); it is IDLE
//   when no host has a TPU in use.
// - Least fragmentation: among the qualifying slices the ones whose hosts are otherwise busiest
//   (highest summed utilization) are taken first, ties by slice name; so idle slices on empty
//   hosts stay whole for others. An NVLink request goes to the domain with the fewest usable
//   hosts that still holds N (best fit), ties by domain name; inside it the lowest node indices.
// - An alternative may be pinned to one named slice or NVLink domain, and restricted to slices
//   whose every host (NVLink: to hosts that) match a label selector (a zone, a pool).
// - A sub-slice alternative takes ICI-contiguous blocks of its topology inside larger slices:
//   smallest parent first, then the parents whose hosts are otherwise busiest, then by name and
//   block index; a block is usable when its hosts are alive and idle (the rest of the parent
//   does not matter).
// - A reservation takes one bundle per host (the host's TPU chips plus the optional per-host
//   demand) or one per chip; on any failure everything this attempt took is released.
// - Restore takes back a group that existed before (a restarted head) with exactly its hosts and
//   allocations, whole or not at all; hosts that did not come back leave it broken.
//
// Cost: slices are catalogued incrementally as nodes register (labels never change after
// registration); a reservation checks the hosts of every slice of the requested shape
// (O(slices of that shape x hosts per slice)). Release is O(bundles).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/status/statusor.h"
#include "scheduling/cluster_view.h"
#include "scheduling/task_scheduler.h"
#include "vocabulary/slice_shape.h"
#include "vocabulary/tpu_generation.h"
#include "vocabulary/tpu_topology.h"

namespace tessera {

using DomainGroupId = StrongId<struct DomainGroupIdTag, int64_t>;

enum class BundleGranularity { kPerHost, kPerChip };

// One way to satisfy a request.
struct DomainAlternative {
  // TPU slices of this shape (its generation and topology: a v6e 4x4), parsed or built where
  // the request entered; nullopt: an NVLink-domain alternative.
  std::optional<SliceShape> shape;
  int count = 1;  // K distinct slices, or N hosts in one NVLink domain
  BundleGranularity granularity = BundleGranularity::kPerHost;
  // Added to every host bundle (e.g. CPU=8); for an NVLink alternative, the whole per-host demand.
  ResourceSet per_host;
  // Set: only this slice (tessera.io/tpu-slice-name) or NVLink domain may be taken.
  std::string domain;
  // TPU: an ICI-contiguous block of `shape` inside a larger slice of the generation (or a
  // whole slice of that shape) is taken instead of a whole slice: never straddling slices, its
  // hosts numbered 0..n-1 as the block's own workers, its domain named `<slice>/<block>`
  // (vocabulary/sub_slice.h numbers the blocks).
  bool sub_slice = false;
  // Only slices whose every registered host matches it, or NVLink hosts that match it.
  LabelSelector selector;

  // " named v6e-1", " with every host matching zone=b" (hosts matching, for NVLink), both, or "".
  std::string FilterText() const;
};

struct DomainGroupRequest {
  std::string name;                             // names the holder in other requests' explanations
  std::vector<DomainAlternative> alternatives;  // tried in order
};

struct DomainBundle {
  NodeId node;
  std::string domain;  // slice name or NVLink domain
  int worker = -1;     // TPU worker id (-1 for NVLink hosts)
  Allocation allocation;
  friend bool operator==(const DomainBundle&, const DomainBundle&) = default;
};

struct DomainGroupResult {
  ScheduleStatus status = ScheduleStatus::kPlaced;
  std::optional<DomainGroupId> id;    // when kPlaced
  size_t alternative = 0;             // the one that was taken (when kPlaced)
  std::vector<std::string> domains;   // slice / domain names taken, in order (when kPlaced)
  std::vector<DomainBundle> bundles;  // by domain, then worker id / node, then chip
  std::string explanation;            // one line when not placed; nothing is held then
};

// What Restore made of a group that existed before.
enum class DomainRestoreStatus {
  kRestored,  // every host's bundle is held again, exactly as before
  // Some hosts are not in the view or are dead: the other hosts' bundles are held, theirs are
  // not — the state a host loss leaves a group in (the head shows it BROKEN).
  kBroken,
  // Some host's bundle cannot be taken back (its devices are held by something else, the host
  // registered as another slice's worker, ...): nothing is held and the group is not kept.
  kRefused,
};
std::string_view DomainRestoreStatusName(DomainRestoreStatus status);

struct DomainGroupRestoreResult {
  DomainRestoreStatus status = DomainRestoreStatus::kRestored;
  std::optional<DomainGroupId> id;  // fresh, this scheduler's own; unset when kRefused
  size_t alternative = 0;
  std::vector<std::string> domains;  // in the order the bundles name them (unless kRefused)
  // As given, with this view's allocations (unless kRefused). A bundle whose host is missing
  // keeps its node, resources and devices, with AllocationId() (0, which no view ever holds).
  std::vector<DomainBundle> bundles;
  std::vector<NodeId> missing;  // kBroken: the hosts not held, in bundle order
  std::string explanation;      // one line unless kRestored: which hosts, and why
};

// Not thread-safe: one owner calls it; it changes the cluster view (which must outlive it) only
// through Allocate, RestoreExact and Release.
class DomainGroupScheduler {
 public:
  explicit DomainGroupScheduler(ClusterView* cluster) : cluster_(cluster) {}

  // InvalidArgument for no alternatives, a count < 1, a shape whose topology is not a slice of
  // its generation (shapes are built again with MakeSliceShape, never parsed), a per-chip NVLink
  // alternative; AlreadyExists for a name in use. Otherwise all hosts of the first alternative
  // that fits now are reserved (kPlaced), or nothing is (kPending when some alternative could fit
  // once busy slices free up, else kInfeasible), with a one-line explanation per alternative.
  absl::StatusOr<DomainGroupResult> ReserveSlices(const DomainGroupRequest& request);

  // Re-creates a group that existed before (a head restarted from its state store) with exactly
  // its hosts and allocations, so the work on its slices continues untouched. `alternative` is
  // the one that was taken; `bundles` are the group's bundles as ReserveSlices returned them (of
  // each allocation only the resources and devices are read: ids and nodes of the old view are
  // ignored). Whole slices or nothing:
  //   - InvalidArgument (nothing changes) when the bundles are not a whole reservation of that
  //     alternative: for slices, `count` distinct slices, each with one host per worker id
  //     0..hosts-1 (hosts from the slice's chips and the TPU each host's bundles take) and, per
  //     host, the bundles ReserveSlices makes (one of all its TPU plus per_host, or one per chip
  //     with per_host on the first); for NVLink, `count` distinct hosts of one domain, each with
  //     per_host. Also for what ReserveSlices refuses (the request), an alternative the request
  //     does not have, and no bundles; AlreadyExists for a name in use.
  //   - A host that is not in the view or is dead is missing: the group is restored kBroken —
  //     the other hosts' bundles are held, the missing ones' are not — as a host loss leaves it.
  //     Nothing is re-reserved here; the caller reserves the group anew once its hosts are back
  //     (Release, then ReserveSlices), as it does after a host loss.
  //   - kRefused, nothing held and no group kept, when any present host cannot take its bundle
  //     back: it registered with other labels (another slice, worker id or shape; another NVLink
  //     domain), another TPU count than the bundles say, or the view cannot give the exact
  //     allocation (ClusterView::RestoreExact: instances held by something else — another group,
  //     a lease —, more than the host has). A slice is never split or double-booked.
  // Restore order does not matter between groups that do not conflict: nothing is chosen.
  absl::StatusOr<DomainGroupRestoreResult> Restore(const DomainGroupRequest& request,
                                                   size_t alternative,
                                                   std::span<const DomainBundle> bundles);

  // Releases every bundle still held (a failed node's bundles are already gone) and forgets the
  // group; returns exactly what was released.
  absl::StatusOr<std::vector<Allocation>> Release(DomainGroupId id);

  std::optional<DomainGroupId> FindByName(std::string_view name) const;
  // The bundles a group holds (nullptr for an unknown id).
  const std::vector<DomainBundle>* Bundles(DomainGroupId id) const;

 private:
  struct Slice {
    std::string name;
    std::map<int, std::vector<NodeIndex>> workers;  // worker id -> every registration, ascending
    int64_t host_tpu = 0;  // the most TPU any registration has (totals of devices never change)
  };
  // A slice's generation and topology dims, as its hosts' labels said them when they registered
  // (FabricMembership) and as a request's shape says them.
  struct ShapeKey {
    TpuGeneration generation = TpuGeneration::kV6e;
    std::vector<int> dims;
    auto operator<=>(const ShapeKey&) const = default;
  };
  struct ResolvedShape {
    ShapeKey key;
    std::string label;  // "v6e 4x4"
    int chips = 0;
    int resources_per_chip = 1;
    TpuGeneration generation = TpuGeneration::kV6e;
    TpuTopology topology;
  };
  struct Outcome {
    bool placed = false;
    bool feasible = false;
    std::vector<std::string> domains;
    std::vector<DomainBundle> bundles;
    std::string explanation;
  };
  struct Group {
    std::string name;
    std::vector<DomainBundle> bundles;
  };

  // The request checks ReserveSlices and Restore share (name, alternatives, shapes, name in use);
  // the resolved shape of each alternative, nullopt for an NVLink one.
  absl::StatusOr<std::vector<std::optional<ResolvedShape>>> CheckRequest(
      const DomainGroupRequest& request) const;
  // The shape of restored bundles that passed CheckRestoredBundles.
  struct RestoredLayout {
    std::vector<std::string> domains;         // in the order the bundles name them
    std::map<std::string, int64_t> host_tpu;  // slice -> TPU of each of its hosts (slices only)
  };
  // InvalidArgument unless `bundles` are a whole reservation of `alt` (see Restore).
  static absl::StatusOr<RestoredLayout> CheckRestoredBundles(
      const std::string& where, const DomainAlternative& alt,
      const std::optional<ResolvedShape>& shape, std::span<const DomainBundle> bundles);
  // The steps of CheckRestoredBundles.
  // The bundles of an NVLink alternative: one domain, `alt.count` hosts (`hosts` of them here),
  // one per-host bundle each.
  static absl::Status CheckRestoredNvLinkHosts(const std::string& where,
                                               const DomainAlternative& alt,
                                               const RestoredLayout& layout, size_t hosts,
                                               std::span<const DomainBundle> bundles);
  // The TPU chips each host of slice `domain` holds (the same on every host), from the bundles
  // of its `workers` (worker id -> bundle indices).
  static absl::StatusOr<int64_t> RestoredHostTpu(const std::string& where,
                                                 const std::string& domain,
                                                 const std::map<int, std::vector<size_t>>& workers,
                                                 std::span<const DomainBundle> bundles);
  // Whether the bundles at `indices` are those Take makes for a host of `domain` holding `tpu`.
  static absl::Status CheckRestoredHostBundles(const std::string& where,
                                               const DomainAlternative& alt, int64_t per_bundle,
                                               int64_t tpu, const std::string& domain, int worker,
                                               const std::vector<size_t>& indices,
                                               std::span<const DomainBundle> bundles);
  // Why the registered, not dead host `node` cannot be `bundle`'s host ("" when it can, its free
  // devices aside).
  std::string HostMismatch(NodeIndex node, const DomainBundle& bundle,
                           const std::optional<ResolvedShape>& shape, bool sub_slice,
                           const RestoredLayout& layout) const;
  void Catalog();
  // Whether the alternative's name pin and selector let it take the slice; Filters: whether it
  // has either (else every slice is admitted).
  bool Admits(const Slice& slice, const DomainAlternative& alt) const;
  static bool Filters(const DomainAlternative& alt);
  // The alive host of every worker id, or the first missing / dead worker.
  bool SliceHosts(const Slice& slice, const ResolvedShape& shape, std::vector<NodeIndex>& out,
                  std::string& problem) const;
  bool TpuBusy(NodeIndex node) const;
  // No host has a TPU in use and every one fits the per-host demand now; `score` gets the hosts'
  // summed utilization (the busiest-first order).
  bool HostsIdle(const std::vector<NodeIndex>& hosts, const DomainAlternative& alt,
                 int64_t* score) const;
  // Whether hosts HostsIdle finds idle can each take their bundle (all their TPU free, the
  // per-host demand fitting beside it): so unless the per-host demand names TPU itself, only
  // busy hosts need HostsMisfit (a demand built per host) on the path of every reservation.
  static bool IdleHostsFit(const DomainAlternative& alt);
  // Who holds what `alt` asks for (TPU and the per-host demand) on the hosts.
  std::string Holders(const std::vector<NodeIndex>& hosts, const DomainAlternative& alt) const;
  // Why the host can never take its bundle of `alt` (all its TPU plus the per-host demand), or
  // nullopt when it could.
  std::optional<std::string> HostMisfit(NodeIndex node, const DomainAlternative& alt) const;
  // The first host's HostMisfit, or nullopt when every host could take its bundle.
  std::optional<std::string> HostsMisfit(const std::vector<NodeIndex>& hosts,
                                         const DomainAlternative& alt) const;
  // The candidates (slices or blocks, their hosts all there) TrySlices and TrySubSlices pass
  // over: the busy ones, with their hosts to name who holds them, and those that can never fit,
  // with the first one's reason.
  struct PassedOver {
    size_t busy = 0;
    std::vector<NodeIndex> busy_hosts;
    size_t misfits = 0;
    std::optional<std::string> misfit;
  };
  // Whether the candidate on `hosts` is passed over, and then counted in `passed`: it can never
  // fit (HostsMisfit, asked unless its hosts are idle, `hosts_idle`, and idle hosts fit,
  // `idle_fits`), or it is busy. False: its hosts are idle, it can be taken now.
  bool PassOver(const std::vector<NodeIndex>& hosts, const DomainAlternative& alt, bool hosts_idle,
                bool idle_fits, PassedOver& passed) const;
  // "; all are busy (held by ...)" and "; none can hold CPU=64 per host beside its TPU (...)"
  // for `total` slices or blocks, of which `passed` says which are busy and which never fit.
  void AppendBusyAndMisfits(std::string& text, size_t total, const PassedOver& passed,
                            const DomainAlternative& alt) const;
  Outcome TrySlices(const DomainAlternative& alt, const ResolvedShape& shape);
  Outcome TrySubSlices(const DomainAlternative& alt, const ResolvedShape& shape);
  // The blocks of `shape` inside the slice (parent worker ids per block, sub-slice worker
  // order), or nullopt when the slice cannot hold such blocks (another generation, hosts that
  // hold other chip blocks, a grid the block does not divide).
  std::optional<std::vector<std::vector<int>>> SubBlocks(const Slice& slice, const ShapeKey& key,
                                                         const ResolvedShape& shape) const;
  // HostMismatch for a bundle of a sub-slice block (domain "<slice>/<block>").
  std::string SubSliceHostMismatch(NodeIndex node, const DomainBundle& bundle,
                                   const ResolvedShape& shape, const RestoredLayout& layout) const;
  // The registered (not removed) host of worker `w`, whatever its state.
  // Inlined: it runs for every host of every slice a reservation looks at.
  ABSL_ATTRIBUTE_ALWAYS_INLINE std::optional<NodeIndex> Registered(const Slice& slice, int w) const;
  // The slice `name` of any shape (nullptr when none is catalogued).
  const Slice* FindSlice(const std::string& name, ShapeKey* key) const;
  Outcome TryNvLink(const DomainAlternative& alt);
  // Takes every chosen domain (its name and hosts, numbered 0..n-1 as its workers) into
  // `outcome`, all or nothing; a failure releases what was taken and explains which `noun`
  // ("slice", "block") could not be reserved.
  void TakeDomains(const std::vector<std::pair<std::string, std::vector<NodeIndex>>>& chosen,
                   const DomainAlternative& alt, const ResolvedShape& shape, std::string_view noun,
                   Outcome& outcome);
  // Takes the bundles of `hosts` in order; all or nothing.
  bool Take(const std::vector<NodeIndex>& hosts, const std::string& domain,
            const std::vector<int>& workers, const DomainAlternative& alt, int chips_per_bundle,
            std::vector<DomainBundle>& out);
  std::string ExistingSlices() const;

  ClusterView* cluster_;
  int catalogued_ = 0;  // slots of the cluster view already read into the catalogs
  std::map<ShapeKey, std::map<std::string, Slice>> slices_;
  std::map<std::string, std::vector<NodeIndex>, std::less<>> nvlink_domains_;
  std::map<int64_t, Group> groups_;
  std::map<std::string, int64_t, std::less<>> by_name_;
  int64_t next_id_ = 1;
};

}  // namespace tessera

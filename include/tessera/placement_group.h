// Reservations from a driver: placement groups (bundles of resources reserved all or nothing
// under a strategy) and whole accelerator slices (a TPU slice's hosts, or hosts of one NVLink
// domain), each named by its type of name (vocabulary/ids.h: PlacementGroupName, SliceGroupName).
// Tasks and actors are placed in them with `.PlacementGroup(name, bundle)`; a slice reservation
// is a placement group with one bundle per host, bundle i on TPU worker i.
//
//   tessera::ResourceSet gpu = *tessera::ResourceSet::FromAmounts({{"CPU", 1}, {"GPU", 1}});
//   auto pg = tessera::CreatePlacementGroup({.name = tessera::PlacementGroupName("train"),
//                                            .strategy = tessera::PlacementStrategy::kStrictSpread,
//                                            .bundles = {gpu, gpu}});
//   auto v6e_4x4 = tessera::MakeSliceShape(tessera::TpuGeneration::kV6e, {{4, 4}});
//   auto slice = tessera::ReserveSlices({.name = tessera::SliceGroupName("s"), .shape = *v6e_4x4});
//   ... tessera::Actor(Make).Resources({{"TPU", 4}}).PlacementGroup(slice->name, i).Remote();
//   tessera::ReleaseSlices(slice->name);  tessera::RemovePlacementGroup(pg->name);
//
// They talk to the head of the cluster Init connected to. Bad options are a one-line
// InvalidArgument and reserve nothing. A group or slice that cannot be had within `timeout` is
// withdrawn before the error returns, so a failed call leaves nothing reserved.
//
// Thread-safe: each call is independent.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "labels/label_selector.h"
#include "resources/resource_set.h"
#include "vocabulary/ids.h"
#include "vocabulary/placement_strategy.h"
#include "vocabulary/slice_shape.h"

namespace tessera {

struct PlacementGroupOptions {
  // Unique among the cluster's groups and slice reservations.
  PlacementGroupName name;
  // kPack (fewest nodes), kSpread (distinct nodes, best effort), kStrictPack (one node),
  // kStrictSpread (every bundle on its own node).
  PlacementStrategy strategy = PlacementStrategy::kPack;
  // One resource set per bundle (ResourceSet::FromAmounts({{"CPU", 1}, {"GPU", 2}})); each
  // reserves at least one resource.
  std::vector<ResourceSet> bundles;
  // None, or one label selector per bundle (an empty one matches every node):
  // LabelSelector::Of({{"zone", SelectorOperator::kIn, {"a"}}}).
  std::vector<LabelSelector> bundle_selectors;
  // Other shapes tried in order when the primary cannot be placed.
  struct Alternative {
    std::vector<ResourceSet> bundles;
    std::vector<LabelSelector> bundle_selectors;  // none, or one per bundle
  };
  std::vector<Alternative> fallbacks;
  // Set: every bundle on nodes that share one value of this label key (one rack, one NVLink
  // domain: "tessera.io/fabric-domain"); kept while any bundle is placed.
  std::string same_label;
  // How long to wait for room (zero: take it now or fail; absl::InfiniteDuration(): until it is
  // placed or removed).
  absl::Duration timeout = absl::Seconds(30);
  // What to do while no node of the cluster could ever hold the group: false, fail at once
  // (ResourceExhausted); true, keep waiting (PENDING) up to `timeout` for the cluster to gain
  // such a node, as a Ray placement group does.
  bool wait_while_infeasible = false;
  // A group belongs to the program that created it and is removed when that program ends or
  // dies (its driver stops keeping itself alive at the head). Detached: it lives until
  // RemovePlacementGroup, whoever calls it.
  bool detached = false;
};

// A created group: which shape was taken and the node of each bundle.
struct PlacementGroup {
  PlacementGroupName name;
  int option = 0;                         // 0 the primary, i the i-th fallback
  std::vector<std::string> bundle_nodes;  // bundle index -> node id
};

// Reserves every bundle or none. Errors: InvalidArgument (bad options), ResourceExhausted (the
// cluster can never hold it: the head's explanation follows), DeadlineExceeded (no room within
// the timeout), AlreadyExists (the name is taken), or the cluster being unreachable.
absl::StatusOr<PlacementGroup> CreatePlacementGroup(const PlacementGroupOptions& options);
// CreatePlacementGroup in two steps, for a caller that waits elsewhere (as Python's
// placement_group() does, in a thread behind its ready() ref): SubmitPlacementGroup returns once
// the head has the group (a RemovePlacementGroup from then on withdraws it), or with the errors
// above that need no waiting; WaitPlacementGroup then waits for it as CreatePlacementGroup does
// (options.name, timeout and wait_while_infeasible), and NotFound says it was removed meanwhile.
absl::Status SubmitPlacementGroup(const PlacementGroupOptions& options);
absl::StatusOr<PlacementGroup> WaitPlacementGroup(const PlacementGroupOptions& options);
// Frees the group's bundles: the workers of the tasks and actors in it are ended. A slice
// reservation placed in as a group (PlacementGroupName(slice.value())) is released, as
// ReleaseSlices. A group already removed, or never made, is nothing to do: OK, as Ray's
// remove_placement_group.
absl::Status RemovePlacementGroup(const PlacementGroupName& name);

struct SliceOptions {
  // Unique among the cluster's groups and slice reservations.
  SliceGroupName name;
  // The slice: a generation and a topology valid for it, built once with
  // MakeSliceShape(TpuGeneration::kV6e, {{4, 4}}) (or, from text, ParseSliceShape("TPU-V6E",
  // "4x4", std::nullopt)); only its generation and topology are sent.
  SliceShape shape;
  int num_slices = 1;
  // Resources added to each host's bundle ({"CPU", 4}: ResourceSet::FromAmounts({{"CPU", 4}})).
  ResourceSet per_host;
  // Other shapes tried in order (shape, number of slices).
  struct Alternative {
    SliceShape shape;
    int num_slices = 1;
  };
  std::vector<Alternative> fallbacks;
  // For every alternative: only the slice of this tessera.io/tpu-slice-name ("" any), only
  // slices whose every host matches this label selector (nullopt or empty: any;
  // LabelSelector::Of({{"tessera.io/availability-zone", SelectorOperator::kIn, {"b"}}})), and
  // blocks of the topology inside larger slices instead of whole slices (sub_slice: a 2x4 in a
  // 4x4, its hosts numbered 0..n-1 in the block, the block named "<slice>/<block>").
  std::string slice;
  std::optional<LabelSelector> label_selector;
  bool sub_slice = false;
  absl::Duration timeout = absl::Seconds(30);
  // As PlacementGroupOptions::detached: released with the program unless detached.
  bool detached = false;
};

struct SliceHost {
  std::string node_id;
  std::string slice;    // the slice (domain) this host belongs to
  int tpu_worker = -1;  // TPU_WORKER_ID of the host in its slice
};

// A reservation: its hosts in bundle order (bundle i is hosts[i]).
struct SliceReservation {
  SliceGroupName name;
  int alternative = 0;  // 0 the primary, i the i-th fallback
  std::vector<std::string> slices;
  std::vector<SliceHost> hosts;
};

// Reserves whole slices, never part of one: every host of each slice, or nothing. Errors as for
// CreatePlacementGroup.
absl::StatusOr<SliceReservation> ReserveSlices(const SliceOptions& options);
// Releases the slices; OK when they are released already (or the name was never reserved).
absl::Status ReleaseSlices(const SliceGroupName& name);

}  // namespace tessera

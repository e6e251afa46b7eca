#include "python/cluster_calls.h"

#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/foreign_calls.h"
#include "api/reservations.h"
#include "base/string_util.h"
#include "client/cluster_client.h"
#include "labels/label_selector.h"
#include "python/core_error.h"
#include "python/label_selectors.h"
#include "python/object_ref.h"
#include "python/vocabulary_values.h"
#include "resources/quantity.h"
#include "resources/resource_set.h"
#include "rpc/state_names.h"
#include "tessera/placement_group.h"
#include "vocabulary/slice_shape.h"

namespace tessera::python {
namespace {

std::map<std::string, double> Quantities(const v1::Resources& resources) {
  std::map<std::string, double> out;
  for (const auto& [name, raw] : resources.raw()) {
    out[name] = static_cast<double>(raw) / Quantity::kScale;
  }
  return out;
}

// The head of the cluster init connected to.
std::unique_ptr<client::ClusterClient> Head() {
  std::optional<client::ClusterClientOptions> options = api::ReservationCluster();
  if (!options.has_value()) {
    ThrowStatus(
        absl::FailedPreconditionError("tessera is not connected to a cluster: call "
                                      "tessera.init() first"));
  }
  absl::StatusOr<std::unique_ptr<client::ClusterClient>> client;
  {
    py::gil_scoped_release release;
    client = client::ClusterClient::Connect(*options);
  }
  if (!client.ok()) ThrowStatus(client.status());
  return *std::move(client);
}

template <typename T>
T Get(const py::dict& options, const char* key, T fallback) {
  if (!options.contains(key) || options[key].is_none()) return fallback;
  return options[key].cast<T>();
}

py::list ListNodes() {
  std::unique_ptr<client::ClusterClient> head = Head();
  absl::StatusOr<v1::ListNodesResponse> listed;
  {
    py::gil_scoped_release release;
    listed = head->ListNodes();
  }
  if (!listed.ok()) ThrowStatus(listed.status());
  py::list nodes;
  for (const v1::NodeInfo& info : listed->nodes()) {
    py::dict node;
    node["node_id"] = info.node().node_id();
    node["address"] = info.node().address();
    node["state"] = std::string(rpc::NodeStateName(info.state()));
    node["alive"] = info.state() == v1::NODE_STATE_ALIVE;
    node["resources"] = Quantities(info.node().resources());
    node["available"] = Quantities(info.available());
    node["labels"] = std::map<std::string, std::string>(info.node().labels().begin(),
                                                        info.node().labels().end());
    node["workers"] = info.workers();
    nodes.append(node);
  }
  return nodes;
}

py::list ListPlacementGroups() {
  std::unique_ptr<client::ClusterClient> head = Head();
  absl::StatusOr<v1::ListPlacementGroupsResponse> listed;
  {
    py::gil_scoped_release release;
    listed = head->ListPlacementGroups();
  }
  if (!listed.ok()) ThrowStatus(listed.status());
  py::list groups;
  for (const v1::PlacementGroupInfo& info : listed->groups()) {
    py::dict group;
    group["id"] = info.id();
    group["name"] = info.name();
    group["strategy"] = std::string(rpc::PlacementStrategyName(info.strategy()));
    group["state"] = std::string(rpc::PlacementGroupStateName(info.state()));
    group["option"] = info.option();
    std::map<int, std::string> nodes;
    for (const v1::BundleLocation& bundle : info.bundles())
      nodes[bundle.index()] = bundle.node_id();
    group["bundle_nodes"] = nodes;
    py::list shapes;
    for (const v1::Resources& shape : info.bundle_shapes()) shapes.append(Quantities(shape));
    group["bundles"] = shapes;
    group["explanation"] = info.explanation();
    group["owner"] = info.owner();
    groups.append(group);
  }
  return groups;
}

// What placement_group.py hands over (Ray's values, checked there): bundles as dicts of amounts
// rounded to the core's precision, selectors as Ray's dicts, the strategy as Ray's word; each
// becomes its type here, once.
PlacementGroupOptions PlacementGroupOptionsFrom(const py::dict& options) {
  PlacementGroupOptions create;
  create.name = PlacementGroupName(Get<std::string>(options, "name", ""));
  if (options.contains("strategy") && !options["strategy"].is_none()) {
    create.strategy = PlacementStrategyFrom(options["strategy"], "strategy");
  }
  if (options.contains("bundles")) create.bundles = BundlesFrom(options["bundles"], "bundles");
  if (options.contains("bundle_selectors")) {
    create.bundle_selectors = SelectorsFrom(options["bundle_selectors"], "bundle_label_selector");
  }
  create.same_label = Get<std::string>(options, "same_label", "");
  // timeout_s None: until placed or removed.
  create.timeout = options.contains("timeout_s") && options["timeout_s"].is_none()
                       ? absl::InfiniteDuration()
                       : absl::Seconds(Get<double>(options, "timeout_s", 30));
  create.wait_while_infeasible = Get<bool>(options, "wait_while_infeasible", false);
  create.detached = Get<bool>(options, "detached", false);
  if (options.contains("fallbacks")) {
    const py::list fallbacks = options["fallbacks"].cast<py::list>();
    for (size_t i = 0; i < fallbacks.size(); ++i) {
      const py::dict fallback = fallbacks[i].cast<py::dict>();
      PlacementGroupOptions::Alternative alternative;
      if (fallback.contains("bundles")) {
        alternative.bundles = BundlesFrom(fallback["bundles"], absl::StrCat("fallback ", i + 1));
      }
      if (fallback.contains("bundle_selectors")) {
        alternative.bundle_selectors =
            SelectorsFrom(fallback["bundle_selectors"], "fallback_strategy");
      }
      create.fallbacks.push_back(std::move(alternative));
    }
  }
  return create;
}

py::dict WaitPlacementGroup(const py::dict& options) {
  const PlacementGroupOptions group = PlacementGroupOptionsFrom(options);
  absl::StatusOr<PlacementGroup> placed;
  {
    py::gil_scoped_release release;
    placed = tessera::WaitPlacementGroup(group);
  }
  if (!placed.ok()) ThrowStatus(placed.status());
  py::dict out;
  out["name"] = placed->name.value();
  out["option"] = placed->option;
  out["bundle_nodes"] = placed->bundle_nodes;
  return out;
}

void SubmitPlacementGroup(const py::dict& options) {
  const PlacementGroupOptions group = PlacementGroupOptionsFrom(options);
  absl::Status submitted;
  {
    py::gil_scoped_release release;
    submitted = tessera::SubmitPlacementGroup(group);
  }
  if (!submitted.ok()) ThrowStatus(submitted);
}

// The options of reserve_slices, their text parsed here, once: the shape (accelerator_type and
// topology), per_host ("CPU=1") and the selector. A bad shape or per_host is CoreError INVALID
// with the C++ API's wording ("slice reservation s: accelerator_type/topology: ...").
SliceOptions SliceOptionsFrom(const py::dict& options) {
  SliceOptions reserve;
  reserve.name = SliceGroupName(Get<std::string>(options, "name", ""));
  const auto invalid = [&](std::string_view what, const absl::Status& status) {
    ThrowStatus(absl::InvalidArgumentError(absl::StrCat(
        "slice reservation ", reserve.name.value(), ": ", ToAbsl(what), ": ", status.message())));
  };
  absl::StatusOr<SliceShape> shape =
      ParseSliceShape(Get<std::string>(options, "accelerator_type", ""),
                      Get<std::string>(options, "topology", ""), std::nullopt);
  if (!shape.ok()) invalid("accelerator_type/topology", shape.status());
  reserve.shape = *std::move(shape);
  reserve.num_slices = Get<int>(options, "num_slices", 1);
  const std::string per_host = Get<std::string>(options, "per_host", "");
  if (!per_host.empty()) {
    absl::StatusOr<ResourceSet> parsed = ParseResourceSet(per_host);
    if (!parsed.ok()) invalid(absl::StrCat("per_host ", Quote(per_host)), parsed.status());
    reserve.per_host = *std::move(parsed);
  }
  if (options.contains("label_selector")) {
    // One selector every host must match, as a one-element list of dicts.
    std::vector<LabelSelector> selectors =
        SelectorsFrom(options["label_selector"], "bundle_label_selector");
    if (selectors.size() > 1) {
      throw py::value_error("bundle_label_selector: a slice takes one selector for every host");
    }
    if (!selectors.empty()) reserve.label_selector = std::move(selectors[0]);
  }
  reserve.sub_slice = Get<bool>(options, "sub_slice", false);
  reserve.timeout = absl::Seconds(Get<double>(options, "timeout_s", 30));
  reserve.detached = Get<bool>(options, "detached", false);
  return reserve;
}

py::dict ReserveSlices(const py::dict& options) {
  const SliceOptions reserve = SliceOptionsFrom(options);
  absl::StatusOr<SliceReservation> reserved;
  {
    py::gil_scoped_release release;
    reserved = tessera::ReserveSlices(reserve);
  }
  if (!reserved.ok()) ThrowStatus(reserved.status());
  py::dict out;
  out["name"] = reserved->name.value();
  out["alternative"] = reserved->alternative;
  out["slices"] = reserved->slices;
  py::list hosts;
  for (const SliceHost& host : reserved->hosts) {
    py::dict h;
    h["node_id"] = host.node_id;
    h["slice"] = host.slice;
    h["tpu_worker"] = host.tpu_worker;
    hosts.append(h);
  }
  out["hosts"] = hosts;
  return out;
}

// remove_placement_group, release_slices: Python's str made the kind of name `Call` takes.
template <typename Name, absl::Status (*Call)(const Name&)>
void Remove(const std::string& name) {
  absl::Status status;
  {
    py::gil_scoped_release release;
    status = Call(Name(name));
  }
  if (!status.ok()) ThrowStatus(status);
}

}  // namespace

void BindClusterCalls(py::module_& m) {
  m.def("list_nodes", &ListNodes,
        "The cluster's nodes: node_id, address, state, alive, resources, available, labels.");
  m.def("list_placement_groups", &ListPlacementGroups,
        "The cluster's placement groups and slice reservations as the head knows them.");
  m.def("submit_placement_group", &SubmitPlacementGroup, py::arg("options"),
        "Asks the head for a group that reserves every bundle or none; returns once the head has "
        "it (a remove from then on withdraws it); CoreError for options it refuses.");
  m.def("wait_placement_group", &WaitPlacementGroup, py::arg("options"),
        "Waits for a submitted group (up to timeout_s, None: until placed or removed; "
        "wait_while_infeasible: an infeasible group waits too): name, option, bundle_nodes; "
        "CoreError NOT_FOUND when it was removed meanwhile.");
  m.def("remove_placement_group", &Remove<PlacementGroupName, tessera::RemovePlacementGroup>,
        py::arg("name"));
  m.def("reserve_slices", &ReserveSlices, py::arg("options"),
        "Reserves whole slices (blocking up to timeout_s): name, slices, hosts in bundle order.");
  m.def("release_slices", &Remove<SliceGroupName, tessera::ReleaseSlices>, py::arg("name"));
  m.def(
      "new_promise",
      [] {
        CheckNotForked();
        ObjectRefBase ref;
        {
          py::gil_scoped_release release;
          ref = internal::NewPromise();
        }
        if (!ref.early_error().ok()) ThrowStatus(ref.early_error());
        return WrapRef(std::move(ref));
      },
      "An ObjectRef whose value fulfill_promise gives later.");
  m.def(
      "fulfill_promise",
      [](py::handle promise, py::object value, const std::string& error) {
        const ObjectRefBase& ref = UnwrapRef(promise);
        absl::StatusOr<std::string> outcome =
            value.is_none() ? absl::StatusOr<std::string>(absl::UnknownError(error))
                            : absl::StatusOr<std::string>(value.cast<std::string>());
        py::gil_scoped_release release;
        internal::FulfillPromise(ref, std::move(outcome));
      },
      py::arg("promise"), py::arg("value"), py::arg("error") = "",
      "Gives the promise its value (bytes), or when value is None, fails it with `error`.");
}

}  // namespace tessera::python

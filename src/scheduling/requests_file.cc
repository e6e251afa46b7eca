#include "scheduling/requests_file.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "hardware/plugin_registry.h"
#include "hardware/simulated/description_reader.h"
#include "labels/label.h"
#include "vocabulary/slice_shape.h"

namespace tessera {
namespace {

using simulated::DescriptionReader;
using simulated::DidYouMean;
using simulated::Field;
using simulated::KindName;

constexpr std::string_view kEventKinds[] = {"submit_task",
                                            "submit_actor",
                                            "finish",
                                            "add_nodes",
                                            "fail_node",
                                            "drain_node",
                                            "create_placement_group",
                                            "remove_placement_group",
                                            "reserve_slices",
                                            "release_slices"};
// Keys of a submission that belong to placement groups (a later scheduler).
constexpr int64_t kMaxSubmitCount = 100000;

std::vector<std::string> EventKindNames() {
  return std::vector<std::string>(std::begin(kEventKinds), std::end(kEventKinds));
}

class Parser {
 public:
  Parser(std::string source, const std::set<std::string>& cluster_node_ids)
      : r_(std::move(source)), known_nodes_(cluster_node_ids), live_ids_(cluster_node_ids) {}

  absl::StatusOr<std::vector<SimulatedEvent>> Parse(const YAML::Node& root) {
    const Field top{"", root, root};
    if (root.IsNull() || !root.IsDefined()) {
      return r_.Error(top, "empty requests file: expected a map with key events");
    }
    TESSERA_RETURN_IF_ERROR(r_.CheckMap(top, {"events"}));
    TESSERA_ASSIGN_OR_RETURN(const Field events_field, r_.Required(top, "events"));
    if (events_field.value.IsNull()) return std::vector<SimulatedEvent>{};
    TESSERA_ASSIGN_OR_RETURN(const std::vector<Field> items, r_.List(events_field));
    std::vector<SimulatedEvent> events;
    for (const Field& item : items) {
      TESSERA_RETURN_IF_ERROR(ParseEvent(item, events));
    }
    return events;
  }

 private:
  absl::Status ParseEvent(const Field& item, std::vector<SimulatedEvent>& events) {
    if (!item.value.IsMap() || item.value.size() != 1) {
      return r_.Error(
          item,
          absl::StrCat("an event is a map with one key (", absl::StrJoin(EventKindNames(), ", "),
                       "), got ",
                       item.value.IsMap() ? absl::StrCat("a map with ", item.value.size(), " keys")
                                          : KindName(item.value)));
    }
    const YAML::Node key = item.value.begin()->first;
    const Field key_field{item.path, key, key};
    if (!key.IsScalar()) {
      return r_.Error(key_field,
                      absl::StrCat("an event kind must be a string, got ", KindName(key)));
    }
    const std::string kind = key.Scalar();
    const Field body{absl::StrCat(item.path, ".", kind), item.value.begin()->second, key};
    if (std::find(std::begin(kEventKinds), std::end(kEventKinds), kind) == std::end(kEventKinds)) {
      const std::vector<std::string> names = EventKindNames();
      return r_.Error(key_field,
                      absl::StrCat("unknown event ", Quote(kind), DidYouMean(kind, names),
                                   "; expected one of: ", absl::StrJoin(names, ", ")));
    }
    SimulatedEvent event;
    event.line = key.Mark().is_null() ? 0 : key.Mark().line + 1;
    if (kind == "submit_task" || kind == "submit_actor") {
      return ParseSubmit(body, kind == "submit_actor", event, events);
    }
    if (kind == "create_placement_group") return ParseGroup(body, event, events);
    if (kind == "reserve_slices") return ParseSlices(body, event, events);
    if (kind == "release_slices") {
      event.kind = SimulatedEventKind::kReleaseSlices;
      TESSERA_ASSIGN_OR_RETURN(event.target, r_.String(body));
      if (slice_groups_.erase(event.target) == 0) {
        return r_.Error(body, absl::StrCat("no slice reservation named ", Quote(event.target),
                                           " is made before this event"));
      }
      events.push_back(std::move(event));
      return absl::OkStatus();
    }
    if (kind == "remove_placement_group") {
      event.kind = SimulatedEventKind::kRemovePlacementGroup;
      TESSERA_ASSIGN_OR_RETURN(event.target, r_.String(body));
      if (groups_.erase(event.target) == 0) {
        return r_.Error(body, absl::StrCat("no placement group named ", Quote(event.target),
                                           " is created before this event"));
      }
      events.push_back(std::move(event));
      return absl::OkStatus();
    }
    if (kind == "finish") {
      event.kind = SimulatedEventKind::kFinish;
      TESSERA_ASSIGN_OR_RETURN(event.target, r_.String(body));
      if (submitted_.count(event.target) == 0) {
        return r_.Error(body, absl::StrCat("no task or actor named ", Quote(event.target),
                                           " is submitted before this event"));
      }
    } else if (kind == "add_nodes") {
      event.kind = SimulatedEventKind::kAddNodes;
      TESSERA_ASSIGN_OR_RETURN(event.nodes, ExpandNodeGroup(r_, body, live_ids_));
      for (const ClusterNode& node : event.nodes) known_nodes_.insert(node.id);
    } else {
      event.kind =
          kind == "fail_node" ? SimulatedEventKind::kFailNode : SimulatedEventKind::kDrainNode;
      TESSERA_ASSIGN_OR_RETURN(event.target, r_.String(body));
      TESSERA_RETURN_IF_ERROR(CheckNode(body, event.target));
    }
    events.push_back(std::move(event));
    return absl::OkStatus();
  }

  absl::Status CheckNode(const Field& f, const std::string& id) const {
    if (known_nodes_.count(id) == 0) {
      return r_.Error(f, absl::StrCat("no node ", Quote(id),
                                      " in the cluster (node ids are <group>-<k>, or "
                                      "<group>-<slice>-w<worker> for slice hosts)"));
    }
    return absl::OkStatus();
  }

  absl::Status ParseSubmit(const Field& body, bool actor, SimulatedEvent& event,
                           std::vector<SimulatedEvent>& events) {
    TESSERA_RETURN_IF_ERROR(r_.CheckMap(
        body,
        {"name", "count", "resources", "label_selector", "fallbacks", "strategy", "node_affinity",
         "local_node", "placement_group", "bundle_index", actor ? "max_restarts" : "max_retries"}));
    SimulatedRequest& request = event.request;
    event.kind = SimulatedEventKind::kSubmit;
    request.actor = actor;
    request.max_retries = actor ? kDefaultActorMaxRestarts : kDefaultTaskMaxRetries;
    if (auto f = r_.Child(body, actor ? "max_restarts" : "max_retries")) {
      TESSERA_ASSIGN_OR_RETURN(const int64_t budget, r_.Integer(*f, -1, kMaxRetryBudget));
      request.max_retries = static_cast<int>(budget);
    }
    TESSERA_ASSIGN_OR_RETURN(const Field name_field, r_.Required(body, "name"));
    TESSERA_ASSIGN_OR_RETURN(request.name, r_.String(name_field));
    if (request.name.empty()) return r_.Error(name_field, "must not be empty");
    int64_t count = 1;
    std::optional<Field> count_field = r_.Child(body, "count");
    if (count_field.has_value()) {
      TESSERA_ASSIGN_OR_RETURN(count, r_.Integer(*count_field, 1, kMaxSubmitCount));
    }
    if (auto f = r_.Child(body, "resources")) {
      TESSERA_ASSIGN_OR_RETURN(request.resources, ParseResources(*f));
    }
    if (auto f = r_.Child(body, "label_selector")) {
      TESSERA_ASSIGN_OR_RETURN(request.label_selector, ParseSelector(*f));
    }
    if (auto f = r_.Child(body, "fallbacks")) {
      TESSERA_ASSIGN_OR_RETURN(const std::vector<Field> options, r_.List(*f));
      for (const Field& option : options) {
        TESSERA_ASSIGN_OR_RETURN(LabelSelector selector, ParseSelector(option));
        request.fallbacks.push_back(std::move(selector));
      }
    }
    if (auto f = r_.Child(body, "strategy")) {
      TESSERA_ASSIGN_OR_RETURN(const std::string strategy, r_.String(*f));
      if (strategy == "DEFAULT") {
        request.strategy = SimulatedStrategy::kDefault;
      } else if (strategy == "SPREAD") {
        request.strategy = SimulatedStrategy::kSpread;
      } else if (strategy == "PACK" || strategy == "STRICT_PACK" || strategy == "STRICT_SPREAD") {
        return r_.Error(*f, absl::StrCat(strategy,
                                         " is a placement group strategy; tasks and "
                                         "actors take DEFAULT or SPREAD"));
      } else {
        return r_.Error(*f, absl::StrCat("unknown strategy ", Quote(strategy),
                                         DidYouMean(strategy, {"DEFAULT", "SPREAD"}),
                                         "; expected DEFAULT or SPREAD"));
      }
    }
    if (auto f = r_.Child(body, "node_affinity")) {
      TESSERA_RETURN_IF_ERROR(r_.CheckMap(*f, {"node", "soft"}));
      SimulatedNodeAffinity affinity;
      TESSERA_ASSIGN_OR_RETURN(const Field node_field, r_.Required(*f, "node"));
      TESSERA_ASSIGN_OR_RETURN(affinity.node, r_.String(node_field));
      TESSERA_RETURN_IF_ERROR(CheckNode(node_field, affinity.node));
      if (auto soft = r_.Child(*f, "soft")) {
        TESSERA_ASSIGN_OR_RETURN(const std::string text, r_.String(*soft));
        auto value = ParseBool(text);
        if (!value.ok()) return r_.Error(*soft, ToStd(value.status().message()));
        affinity.soft = *value;
      }
      request.node_affinity = std::move(affinity);
    }
    if (auto f = r_.Child(body, "local_node")) {
      TESSERA_ASSIGN_OR_RETURN(std::string node, r_.String(*f));
      TESSERA_RETURN_IF_ERROR(CheckNode(*f, node));
      request.local_node = std::move(node);
    }
    TESSERA_RETURN_IF_ERROR(ParseBundleTarget(body, request));

    // count: N submits N copies named <name>-0 ... <name>-(N-1).
    const std::string base = request.name;
    for (int64_t i = 0; i < count; ++i) {
      SimulatedEvent copy = event;
      if (count_field.has_value()) copy.request.name = absl::StrCat(base, "-", i);
      if (!submitted_.insert(copy.request.name).second) {
        return r_.Error(name_field, absl::StrCat("a task or actor named ", Quote(copy.request.name),
                                                 " is already submitted"));
      }
      events.push_back(std::move(copy));
    }
    return absl::OkStatus();
  }

  // placement_group: NAME (created before, not removed), bundle_index: -1 (any, the default) or
  // an index below the group's largest bundle count. The bundle's node is fixed, so node choice
  // keys do not apply.
  absl::Status ParseBundleTarget(const Field& body, SimulatedRequest& request) {
    std::optional<Field> group = r_.Child(body, "placement_group");
    std::optional<Field> index = r_.Child(body, "bundle_index");
    if (!group) {
      if (index) return r_.Error(*index, "bundle_index needs placement_group");
      return absl::OkStatus();
    }
    for (std::string_view key :
         {"label_selector", "fallbacks", "strategy", "node_affinity", "local_node"}) {
      if (auto f = r_.Child(body, key)) {
        return r_.Error(*f, absl::StrCat(ToAbsl(key),
                                         " does not apply to a request in a placement group: "
                                         "its bundle's node is fixed"));
      }
    }
    BundleTarget target;
    TESSERA_ASSIGN_OR_RETURN(target.group, r_.String(*group));
    auto bundles = groups_.find(target.group);
    if (bundles == groups_.end()) {
      return r_.Error(*group, absl::StrCat("no placement group named ", Quote(target.group),
                                           " is created before this event"));
    }
    if (index) {
      const int64_t max = static_cast<int64_t>(bundles->second) - 1;
      auto value = r_.Integer(*index, -1, max);
      if (!value.ok()) {
        return r_.Error(
            *index, absl::StrCat("placement group ", Quote(target.group), " has ", bundles->second,
                                 " bundles at most; bundle_index is -1 (any) or 0..", max));
      }
      target.bundle = static_cast<int>(*value);
    }
    request.bundle_target = std::move(target);
    return absl::OkStatus();
  }

  // {name, strategy, bundles: [{resources, label_selector}], fallbacks: [{bundles: [...]}],
  // same_label}.
  absl::StatusOr<BundleOption> ParseBundles(const Field& f) {
    BundleOption option;
    TESSERA_ASSIGN_OR_RETURN(const std::vector<Field> items, r_.List(f));
    bool any_selector = false;
    for (const Field& item : items) {
      TESSERA_RETURN_IF_ERROR(r_.CheckMap(item, {"resources", "label_selector"}));
      TESSERA_ASSIGN_OR_RETURN(const Field resources, r_.Required(item, "resources"));
      TESSERA_ASSIGN_OR_RETURN(ResourceSet bundle, ParseResources(resources));
      option.bundles.push_back(std::move(bundle));
      LabelSelector selector;
      if (auto s = r_.Child(item, "label_selector")) {
        TESSERA_ASSIGN_OR_RETURN(selector, ParseSelector(*s));
        any_selector = true;
      }
      option.selectors.push_back(std::move(selector));
    }
    if (!any_selector) option.selectors.clear();
    return option;
  }

  absl::Status ParseGroup(const Field& body, SimulatedEvent& event,
                          std::vector<SimulatedEvent>& events) {
    TESSERA_RETURN_IF_ERROR(
        r_.CheckMap(body, {"name", "strategy", "bundles", "fallbacks", "same_label"}));
    event.kind = SimulatedEventKind::kCreatePlacementGroup;
    PlacementGroupSpec& spec = event.group;
    TESSERA_ASSIGN_OR_RETURN(const Field name_field, r_.Required(body, "name"));
    TESSERA_ASSIGN_OR_RETURN(spec.name, r_.String(name_field));
    if (spec.name.empty()) return r_.Error(name_field, "must not be empty");
    if (auto f = r_.Child(body, "strategy")) {
      TESSERA_ASSIGN_OR_RETURN(const std::string text, r_.String(*f));
      auto strategy = ParsePlacementStrategy(text);
      if (!strategy.ok()) return r_.Error(*f, ToStd(strategy.status().message()));
      spec.strategy = *strategy;
    }
    TESSERA_ASSIGN_OR_RETURN(const Field bundles, r_.Required(body, "bundles"));
    TESSERA_ASSIGN_OR_RETURN(spec.primary, ParseBundles(bundles));
    if (auto f = r_.Child(body, "fallbacks")) {
      TESSERA_ASSIGN_OR_RETURN(const std::vector<Field> options, r_.List(*f));
      for (const Field& option : options) {
        TESSERA_RETURN_IF_ERROR(r_.CheckMap(option, {"bundles"}));
        TESSERA_ASSIGN_OR_RETURN(const Field fb, r_.Required(option, "bundles"));
        TESSERA_ASSIGN_OR_RETURN(BundleOption parsed, ParseBundles(fb));
        spec.fallbacks.push_back(std::move(parsed));
      }
    }
    if (auto f = r_.Child(body, "same_label")) {
      TESSERA_ASSIGN_OR_RETURN(spec.same_label, r_.String(*f));
      if (absl::Status s = ValidateLabelKey(spec.same_label); !s.ok()) {
        return r_.Error(*f, ToStd(s.message()));
      }
    }
    if (absl::Status s = ValidatePlacementGroupSpec(spec); !s.ok()) {
      return r_.Error(body, ToStd(s.message()));
    }
    size_t most_bundles = spec.primary.bundles.size();
    for (const BundleOption& option : spec.fallbacks) {
      most_bundles = std::max(most_bundles, option.bundles.size());
    }
    if (slice_groups_.contains(spec.name)) {
      // The cluster names both kinds from one space (a head refuses the second).
      return r_.Error(name_field, absl::StrCat("a slice reservation named ", Quote(spec.name),
                                               " exists; a placement group needs another name"));
    }
    if (!groups_.emplace(spec.name, most_bundles).second) {
      return r_.Error(name_field, absl::StrCat("a placement group named ", Quote(spec.name),
                                               " is already created"));
    }
    events.push_back(std::move(event));
    return absl::OkStatus();
  }

  // reserve_slices: {name, alternatives: [{accelerator, topology, count, bundle, per_host, slice,
  // label_selector, sub_slice}]}; an alternative without accelerator and topology asks for `count`
  // hosts of one NVLink domain (pinned by `domain`).
  absl::Status ParseSlices(const Field& body, SimulatedEvent& event,
                           std::vector<SimulatedEvent>& events) {
    TESSERA_RETURN_IF_ERROR(r_.CheckMap(body, {"name", "alternatives"}));
    event.kind = SimulatedEventKind::kReserveSlices;
    DomainGroupRequest& request = event.slices;
    TESSERA_ASSIGN_OR_RETURN(const Field name_field, r_.Required(body, "name"));
    TESSERA_ASSIGN_OR_RETURN(request.name, r_.String(name_field));
    if (request.name.empty()) return r_.Error(name_field, "must not be empty");
    TESSERA_ASSIGN_OR_RETURN(const Field list, r_.Required(body, "alternatives"));
    TESSERA_ASSIGN_OR_RETURN(const std::vector<Field> items, r_.List(list));
    if (items.empty()) return r_.Error(list, "needs at least one alternative");
    for (const Field& item : items) {
      TESSERA_RETURN_IF_ERROR(
          r_.CheckMap(item, {"accelerator", "topology", "count", "bundle", "per_host", "slice",
                             "domain", "label_selector", "sub_slice"}));
      DomainAlternative alt;
      auto accelerator = r_.Child(item, "accelerator");
      auto topology = r_.Child(item, "topology");
      if (accelerator.has_value() != topology.has_value()) {
        return r_.Error(item,
                        "a slice alternative needs both accelerator and topology (neither "
                        "for hosts of one NVLink domain)");
      }
      if (accelerator) {
        // The one parse of the shape: the scheduler takes it as a type.
        TESSERA_ASSIGN_OR_RETURN(const std::string accelerator_text, r_.String(*accelerator));
        TESSERA_ASSIGN_OR_RETURN(const std::string topology_text, r_.String(*topology));
        auto shape = ParseSliceShape(accelerator_text, topology_text, std::nullopt);
        if (!shape.ok()) return r_.Error(item, ToStd(shape.status().message()));
        alt.shape = *std::move(shape);
      }
      if (auto f = r_.Child(item, "count")) {
        TESSERA_ASSIGN_OR_RETURN(const int64_t count, r_.Integer(*f, 1, 10000));
        alt.count = static_cast<int>(count);
      }
      if (auto f = r_.Child(item, "bundle")) {
        TESSERA_ASSIGN_OR_RETURN(const std::string text, r_.String(*f));
        if (text != "host" && text != "chip") {
          return r_.Error(*f, absl::StrCat("bundle is host or chip, got ", Quote(text)));
        }
        if (text == "chip" && !accelerator) {
          return r_.Error(*f, "NVLink hosts are reserved one bundle per host");
        }
        alt.granularity =
            text == "chip" ? BundleGranularity::kPerChip : BundleGranularity::kPerHost;
      }
      if (auto f = r_.Child(item, "per_host")) {
        TESSERA_ASSIGN_OR_RETURN(alt.per_host, ParseResources(*f));
      }
      if (!accelerator && alt.per_host.empty()) {
        return r_.Error(item, "an NVLink alternative needs per_host resources");
      }
      if (auto f = r_.Child(item, "slice")) {
        if (!accelerator)
          return r_.Error(*f, "slice pins a TPU alternative; use domain for NVLink");
        TESSERA_ASSIGN_OR_RETURN(alt.domain, r_.String(*f));
        if (alt.domain.empty()) return r_.Error(*f, "must not be empty");
      }
      if (auto f = r_.Child(item, "domain")) {
        if (accelerator)
          return r_.Error(*f, "domain pins an NVLink alternative; use slice for TPU");
        TESSERA_ASSIGN_OR_RETURN(alt.domain, r_.String(*f));
        if (alt.domain.empty()) return r_.Error(*f, "must not be empty");
      }
      if (auto f = r_.Child(item, "label_selector")) {
        TESSERA_ASSIGN_OR_RETURN(alt.selector, ParseSelector(*f));
      }
      if (auto f = r_.Child(item, "sub_slice")) {
        if (!accelerator) return r_.Error(*f, "sub_slice needs accelerator and topology");
        TESSERA_ASSIGN_OR_RETURN(const std::string text, r_.String(*f));
        auto value = ParseBool(text);
        if (!value.ok()) return r_.Error(*f, ToStd(value.status().message()));
        alt.sub_slice = *value;
      }
      request.alternatives.push_back(std::move(alt));
    }
    if (groups_.contains(request.name)) {
      return r_.Error(name_field, absl::StrCat("a placement group named ", Quote(request.name),
                                               " exists; a slice reservation needs another name"));
    }
    if (!slice_groups_.insert(request.name).second) {
      return r_.Error(name_field, absl::StrCat("a slice reservation named ", Quote(request.name),
                                               " is already made"));
    }
    events.push_back(std::move(event));
    return absl::OkStatus();
  }

  // A map {CPU: 1, GPU: 2, memory: 4GiB} or the CLI form "CPU=1,GPU=2,memory=4GiB"; accelerator
  // quantities follow their family's rules.
  absl::StatusOr<ResourceSet> ParseResources(const Field& f) {
    ResourceSet resources;
    if (f.value.IsScalar()) {
      auto parsed = ParseResourceSet(f.value.Scalar());
      if (!parsed.ok()) return r_.Error(f, ToStd(parsed.status().message()));
      resources = *std::move(parsed);
    } else if (f.value.IsMap()) {
      for (auto it = f.value.begin(); it != f.value.end(); ++it) {
        const Field entry{f.path, it->second, it->first};
        if (!it->first.IsScalar() || !it->second.IsScalar()) {
          return r_.Error(entry, absl::StrCat("a resource is a name and a quantity, got ",
                                              KindName(it->first), ": ", KindName(it->second)));
        }
        const std::string& name = it->first.Scalar();
        auto parsed = ParseResourceSet(absl::StrCat(name, "=", it->second.Scalar()));
        if (!parsed.ok()) return r_.Error(entry, ToStd(parsed.status().message()));
        if (KeyRepeated(f, name)) {
          return r_.Error(entry, absl::StrCat("resource ", Quote(name), " is given twice"));
        }
        resources.Set(name, parsed->Get(name));
      }
    } else {
      return r_.Error(f, absl::StrCat("expected a map of resources or a string such as "
                                      "\"CPU=1,GPU=2\", got ",
                                      KindName(f.value)));
    }
    for (const auto& [name, quantity] : resources) {
      for (const AcceleratorPlugin* plugin : AcceleratorPlugins()) {
        if (plugin->resource_name() != name) continue;
        if (absl::Status ok = plugin->ValidateQuantity(quantity); !ok.ok()) {
          return r_.Error(f, ToStd(ok.message()));
        }
        break;  // the first family that owns the name sets the rule (claim priority)
      }
    }
    return resources;
  }

  // Whether `name` appears more than once as a key of map `f` (a zero quantity leaves no entry
  // in the ResourceSet, so counting keys is the reliable check).
  static bool KeyRepeated(const Field& f, const std::string& name) {
    int seen = 0;
    for (auto it = f.value.begin(); it != f.value.end(); ++it) {
      if (it->first.IsScalar() && it->first.Scalar() == name) ++seen;
    }
    return seen > 1;
  }

  // A selector in the CLI form ("tessera.io/accelerator-type=H100,zone=!b") or the map form.
  absl::StatusOr<LabelSelector> ParseSelector(const Field& f) {
    if (f.value.IsScalar()) {
      auto selector = ParseLabelSelector(f.value.Scalar());
      if (!selector.ok()) return r_.Error(f, ToStd(selector.status().message()));
      return *std::move(selector);
    }
    if (!f.value.IsMap()) {
      return r_.Error(f, absl::StrCat("expected a label selector (a string such as "
                                      "\"tessera.io/accelerator-type=H100\" or a map), got ",
                                      KindName(f.value)));
    }
    std::map<std::string, std::string> map;
    for (auto it = f.value.begin(); it != f.value.end(); ++it) {
      const Field entry{f.path, it->second, it->first};
      if (!it->first.IsScalar() || !it->second.IsScalar()) {
        return r_.Error(entry, absl::StrCat("a selector maps a label key to expressions, got ",
                                            KindName(it->first), ": ", KindName(it->second)));
      }
      if (!map.emplace(it->first.Scalar(), it->second.Scalar()).second) {
        return r_.Error(entry, absl::StrCat("key ", Quote(it->first.Scalar()), " is given twice"));
      }
    }
    auto selector = ParseLabelSelectorMap(map);
    if (!selector.ok()) return r_.Error(f, ToStd(selector.status().message()));
    return *std::move(selector);
  }

  DescriptionReader r_;
  std::set<std::string> known_nodes_;  // every node that has been in the cluster
  std::set<std::string> live_ids_;     // ids taken (add_nodes may not reuse one)
  std::set<std::string> submitted_;    // request names so far
  // Placement groups created and not yet removed -> their largest option's bundle count.
  std::map<std::string, size_t> groups_;
  std::set<std::string> slice_groups_;  // slice reservations made and not yet released
};

}  // namespace

absl::StatusOr<std::vector<SimulatedEvent>> ParseRequestsFile(
    std::string_view yaml, std::string_view source_name,
    const std::set<std::string>& cluster_node_ids) {
  const DescriptionReader r{std::string(source_name)};
  return r.ParseDocument(yaml, [&](const YAML::Node& root) {
    Parser parser(std::string(source_name), cluster_node_ids);
    return parser.Parse(root);
  });
}

}  // namespace tessera

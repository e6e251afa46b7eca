// tessera schedule --cluster CLUSTER.yaml --requests REQUESTS.yaml [--json]
//                  [--cpu-work-on-accelerator-nodes]
// The scheduling simulator: builds the cluster a cluster file describes, applies a requests
// file's events in order through the real TaskScheduler, and prints each placement or
// explanation, what node events did, waiting requests placed later, and the final utilization.
// Output depends only on the two files (ordered containers throughout), so runs are identical.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "cli/commands.h"
#include "resources/byte_size.h"
#include "resources/resource_set.h"
#include "scheduling/cluster_file.h"
#include "scheduling/bundle_ledger.h"
#include "scheduling/cluster_view.h"
#include "scheduling/domain_group_scheduler.h"
#include "scheduling/explanation.h"
#include "scheduling/placement_group_scheduler.h"
#include "scheduling/requests_file.h"
#include "scheduling/task_scheduler.h"

namespace tessera::cli {
namespace {

using Json = nlohmann::ordered_json;

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read the file"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// One quantity of one resource as people read it ("64GiB" for bytes, "2.5" otherwise).
// Exact for programs ("17436160064KiB"); byte resources for people read "16.2 GiB".
enum class AmountStyle { kExact, kForPeople };

std::string FormatAmount(const std::string& resource, Quantity q, AmountStyle style) {
  if (style == AmountStyle::kForPeople && IsByteResource(resource) && q.IsInteger()) {
    return FormatBytes(static_cast<uint64_t>(q.WholePart()));
  }
  return FormatResourceAmount(resource, q);
}

enum class Phase { kRunning, kWaiting, kParked, kFinished, kLost, kWithdrawn };

struct Tracked {
  SimulatedRequest spec;
  SchedulingRequest request;
  Phase phase = Phase::kWaiting;
  std::optional<Placement> placement;
  int retries = 0;  // resubmissions after its work was lost, against spec.max_retries
};

SchedulingRequest ToSchedulingRequest(const SimulatedRequest& spec, int64_t id) {
  SchedulingRequest r;
  r.id = RequestId(id);
  r.holder = Holder{spec.actor ? HolderKind::kActor : HolderKind::kTask, spec.name};
  r.resources = spec.resources;
  r.selectors = FallbackList::WithPrimary(spec.label_selector,
                                          FallbackList::FromSelectors(spec.fallbacks));
  if (spec.node_affinity.has_value()) {
    r.affinity = NodeAffinity{NodeId(spec.node_affinity->node),
                              spec.node_affinity->soft ? AffinityKind::kSoft : AffinityKind::kHard};
  }
  if (spec.local_node.has_value()) r.local_node = NodeId(*spec.local_node);
  r.strategy = spec.strategy == SimulatedStrategy::kSpread ? SchedulingStrategy::kSpread
                                                           : SchedulingStrategy::kDefault;
  r.bundle_target = spec.bundle_target;
  return r;
}

// "GPU 0,1,2,3" per device grant; fractions in parentheses ("GPU 2 (0.5)").
std::string DevicesText(const Allocation& a) {
  std::vector<std::string> parts;
  for (const DeviceGrant& g : a.devices) {
    std::vector<std::string> ids;
    for (size_t i = 0; i < g.instances.size(); ++i) {
      ids.push_back(g.amounts[i] == Quantity::FromInt(1)
                        ? std::to_string(g.instances[i])
                        : absl::StrCat(g.instances[i], " (", g.amounts[i].ToString(), ")"));
    }
    parts.push_back(absl::StrCat(g.resource, " ", absl::StrJoin(ids, ",")));
  }
  return absl::StrJoin(parts, "; ");
}

Json PlacementJson(const Placement& p) {
  Json devices = Json::object();
  for (const DeviceGrant& g : p.allocation.devices) {
    Json list = Json::array();
    for (size_t i = 0; i < g.instances.size(); ++i) {
      list.push_back({{"instance", g.instances[i]}, {"amount", g.amounts[i].ToString()}});
    }
    devices[g.resource] = list;
  }
  Json out = {{"node", p.node.value()},
              {"resources", p.allocation.resources.ToString()},
              {"devices", devices},
              {"option", p.option}};
  if (p.bundle >= 0) out["bundle"] = p.bundle;
  return out;
}

std::string PlacementText(const Placement& p) {
  std::string text = p.bundle >= 0 ? absl::StrCat("placed in bundle ", p.bundle, " on ",
                                                  p.node.value())
                                   : absl::StrCat("placed on ", p.node.value());
  const std::string devices = DevicesText(p.allocation);
  if (!devices.empty()) absl::StrAppend(&text, ", ", devices);
  if (p.option > 0) absl::StrAppend(&text, " (fallback option ", p.option, ")");
  return text;
}

std::string_view EventName(const SimulatedEvent& e) {
  switch (e.kind) {
    case SimulatedEventKind::kSubmit:
      return e.request.actor ? "submit_actor" : "submit_task";
    case SimulatedEventKind::kFinish:
      return "finish";
    case SimulatedEventKind::kAddNodes:
      return "add_nodes";
    case SimulatedEventKind::kFailNode:
      return "fail_node";
    case SimulatedEventKind::kDrainNode:
      return "drain_node";
    case SimulatedEventKind::kCreatePlacementGroup:
      return "create_placement_group";
    case SimulatedEventKind::kRemovePlacementGroup:
      return "remove_placement_group";
    case SimulatedEventKind::kReserveSlices:
      return "reserve_slices";
    case SimulatedEventKind::kReleaseSlices:
      return "release_slices";
  }
  return "event";
}

// Drives the scheduler through the events. Not thread-safe; one run per instance.
class Simulation {
 public:
  Simulation(bool json, SchedulerOptions task_options)
      : json_(json),
        scheduler_(&view_, task_options),
        groups_(&view_),
        slices_(&view_),
        ledger_(&view_) {}

  absl::Status AddNodes(const std::vector<ClusterNode>& nodes) {
    for (const ClusterNode& node : nodes) {
      auto added = view_.AddNode(NodeSpecFromHardware(NodeId(node.id), node.hardware));
      if (!added.ok()) return added.status();
    }
    return absl::OkStatus();
  }

  absl::Status Apply(const SimulatedEvent& e, size_t index) {
    Json record = {{"event", index + 1}, {"line", e.line}, {"kind", EventName(e)}};
    std::string text = absl::StrCat("[", index + 1, "] ", ToAbsl(EventName(e)), " ");
    switch (e.kind) {
      case SimulatedEventKind::kSubmit: {
        const int64_t id = static_cast<int64_t>(order_.size()) + 1;
        Tracked t{e.request, ToSchedulingRequest(e.request, id)};
        order_.push_back(e.request.name);
        auto [it, inserted] = tracked_.emplace(e.request.name, std::move(t));
        (void)inserted;
        record["name"] = e.request.name;
        absl::StrAppend(&text, e.request.name, ": ");
        TESSERA_RETURN_IF_ERROR(Schedule(it->second, record, text));
        break;
      }
      case SimulatedEventKind::kFinish:
        record["name"] = e.target;
        absl::StrAppend(&text, e.target, ": ", Finish(e.target));
        break;
      case SimulatedEventKind::kAddNodes: {
        TESSERA_RETURN_IF_ERROR(AddNodes(e.nodes));
        std::vector<std::string> ids;
        for (const ClusterNode& n : e.nodes) ids.push_back(n.id);
        record["nodes"] = ids;
        absl::StrAppend(&text, e.nodes.size(), e.nodes.size() == 1 ? " node: " : " nodes: ",
                        absl::StrJoin(ids, ", "));
        break;
      }
      case SimulatedEventKind::kFailNode: {
        record["node"] = e.target;
        absl::StrAppend(&text, e.target, ": ");
        // Every reservation (placement group, slice group) with a bundle on the node.
        std::vector<std::string> touched;
        if (const std::optional<NodeIndex> index = view_.Find(NodeId(e.target))) {
          const NodeIndex failing[] = {*index};
          for (const Holder& h : HoldersOn(view_, failing)) {
            if (h.kind == HolderKind::kPlacementGroup || h.kind == HolderKind::kSliceGroup) {
              touched.push_back(h.ToString());
            }
          }
        }
        auto lost = view_.FailNode(NodeId(e.target));
        if (!lost.ok()) {
          record["result"] = std::string(lost.status().message());
          absl::StrAppend(&text, lost.status().message());
          break;
        }
        std::vector<std::string> names;
        for (const Allocation& a : *lost) {
          auto owner = owners_.find(a.id.value());
          if (owner == owners_.end()) continue;
          tracked_.at(owner->second).phase = Phase::kLost;
          names.push_back(owner->second);
          owners_.erase(owner);
        }
        const std::vector<RescheduleReport> reports = groups_.OnNodeFailed(NodeId(e.target), *lost);
        // Work served from bundles that were on the node is lost with them.
        for (std::string& name : SyncBundles()) names.push_back(std::move(name));
        std::sort(names.begin(), names.end());
        record["lost"] = names;
        record["touched"] = touched;
        absl::StrAppend(&text, names.empty() ? "dead; nothing was running"
                                             : absl::StrCat("dead; released (work lost) ",
                                                            absl::StrJoin(names, ", ")));
        if (!touched.empty()) absl::StrAppend(&text, "; touched ", absl::StrJoin(touched, ", "));
        Resubmit(names, record, text);
        ReportGroups(reports, record, text);
        break;
      }
      case SimulatedEventKind::kDrainNode: {
        record["node"] = e.target;
        absl::StrAppend(&text, e.target, ": ");
        if (absl::Status s = view_.SetDraining(NodeId(e.target), true); !s.ok()) {
          record["result"] = std::string(s.message());
          absl::StrAppend(&text, s.message());
          break;
        }
        std::vector<std::string> names;
        for (const auto& [alloc, name] : owners_) {
          if (tracked_.at(name).placement->node.value() == e.target) names.push_back(name);
        }
        std::sort(names.begin(), names.end());
        record["keeps_running"] = names;
        absl::StrAppend(&text, "draining; takes no new work",
                        names.empty() ? "" : absl::StrCat("; still running ",
                                                          absl::StrJoin(names, ", ")));
        break;
      }
      case SimulatedEventKind::kCreatePlacementGroup: {
        record["name"] = e.group.name;
        absl::StrAppend(&text, e.group.name, ": ");
        TESSERA_RETURN_IF_ERROR(CreateGroup(e.group, record, text));
        break;
      }
      case SimulatedEventKind::kRemovePlacementGroup: {
        record["name"] = e.target;
        absl::StrAppend(&text, e.target, ": ");
        if (waiting_groups_.erase(e.target) != 0) {
          absl::StrAppend(&text, "withdrawn before it was placed");
          record["result"] = "withdrawn";
          break;
        }
        const std::optional<PlacementGroupId> id = groups_.FindByName(e.target);
        if (!id) {
          absl::StrAppend(&text, "already removed");
          break;
        }
        auto released = groups_.Remove(*id);
        if (!released.ok()) return released.status();
        std::vector<std::string> parts;
        for (const Allocation& a : *released) {
          parts.push_back(absl::StrCat(a.resources.ToString(), " on ", a.node.value()));
        }
        record["released"] = parts;
        absl::StrAppend(&text, "removed; released ", absl::StrJoin(parts, "; "));
        // Work running in its bundles stops with it.
        const std::vector<std::string> stopped = SyncBundles();
        if (!stopped.empty()) {
          record["stopped"] = stopped;
          absl::StrAppend(&text, "; stopped ", absl::StrJoin(stopped, ", "));
        }
        break;
      }
      case SimulatedEventKind::kReserveSlices: {
        record["name"] = e.slices.name;
        absl::StrAppend(&text, e.slices.name, ": ");
        TESSERA_RETURN_IF_ERROR(ReserveSlices(e.slices, record, text));
        break;
      }
      case SimulatedEventKind::kReleaseSlices: {
        record["name"] = e.target;
        absl::StrAppend(&text, e.target, ": ");
        if (waiting_slices_.erase(e.target) != 0) {
          absl::StrAppend(&text, "withdrawn before it was placed");
          record["result"] = "withdrawn";
          break;
        }
        const std::optional<DomainGroupId> id = slices_.FindByName(e.target);
        if (!id) {
          absl::StrAppend(&text, "already released");
          break;
        }
        auto released = slices_.Release(*id);
        if (!released.ok()) return released.status();
        std::vector<std::string> parts;
        for (const Allocation& a : *released) {
          parts.push_back(absl::StrCat(a.resources.ToString(), " on ", a.node.value()));
        }
        record["released"] = parts;
        absl::StrAppend(&text, "released ", absl::StrJoin(parts, "; "));
        break;
      }
    }
    if (e.kind != SimulatedEventKind::kSubmit &&
        e.kind != SimulatedEventKind::kCreatePlacementGroup &&
        e.kind != SimulatedEventKind::kReserveSlices) {
      TESSERA_RETURN_IF_ERROR(RetryWaiting(record, text));
    }
    events_.push_back(std::move(record));
    lines_.push_back(std::move(text));
    return absl::OkStatus();
  }

  void Print(std::ostream& out) const {
    if (json_) {
      out << Json{{"events", events_}, {"utilization", UtilizationJson()}}.dump(2) << "\n";
      return;
    }
    for (const std::string& line : lines_) out << line << "\n";
    out << "utilization:\n";
    const Json utilization = UtilizationJson(AmountStyle::kForPeople);
    for (const auto& [name, value] : utilization.items()) {
      out << "  " << name << " " << value["used"].get<std::string>() << "/"
          << value["total"].get<std::string>() << " (" << value["percent"].get<std::string>()
          << "%)\n";
    }
  }

 private:
  absl::Status Schedule(Tracked& t, Json& record, std::string& text) {
    auto result = t.request.bundle_target ? ScheduleInBundle(t.request) : scheduler_.Schedule(t.request);
    if (!result.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("request ", Quote(t.spec.name), ": ", result.status().message()));
    }
    record["status"] = std::string(ScheduleStatusName(result->status));
    if (result->status == ScheduleStatus::kPlaced) {
      t.phase = Phase::kRunning;
      t.placement = result->placement;
      (t.request.bundle_target ? bundle_owners_ : owners_)[t.placement->allocation.id.value()] =
          t.spec.name;
      record["placement"] = PlacementJson(*t.placement);
      absl::StrAppend(&text, PlacementText(*t.placement));
    } else {
      t.phase = result->status == ScheduleStatus::kPending ? Phase::kWaiting : Phase::kParked;
      record["explanation"] = result->explanation;
      absl::StrAppend(&text, ToAbsl(ScheduleStatusName(result->status)), ": ", result->explanation);
    }
    return absl::OkStatus();
  }

  // Work lost with a node goes back to waiting while its retry budget lasts (the retry after
  // the event places it); the rest stays lost.
  void Resubmit(const std::vector<std::string>& lost, Json& record, std::string& text) {
    Json json = Json::array();
    std::vector<std::string> parts;
    for (const std::string& name : lost) {
      Tracked& t = tracked_.at(name);
      const int budget = t.spec.max_retries;
      if (budget >= 0 && t.retries >= budget) continue;
      ++t.retries;
      t.phase = Phase::kWaiting;
      t.placement.reset();
      resubmitted_.insert(name);
      parts.push_back(budget < 0 ? absl::StrCat(name, " (retry ", t.retries, ")")
                                 : absl::StrCat(name, " (retry ", t.retries, " of ", budget, ")"));
      json.push_back({{"name", name}, {"retry", t.retries}, {"max_retries", budget}});
    }
    record["resubmitted"] = std::move(json);
    if (!parts.empty()) absl::StrAppend(&text, "; resubmitted ", absl::StrJoin(parts, ", "));
  }

  // "bundle 0 on n1 (GPU 0,1); bundle 1 on n2 (CPU only)" for the bundles given.
  static std::string BundlesText(const std::vector<std::pair<int, BundlePlacement>>& bundles,
                                 Json& json) {
    std::vector<std::string> parts;
    json = Json::array();
    for (const auto& [b, p] : bundles) {
      const std::string devices = DevicesText(p.allocation);
      parts.push_back(absl::StrCat("bundle ", b, " on ", p.node.value(),
                                   devices.empty() ? "" : absl::StrCat(" (", devices, ")")));
      Json one = PlacementJson(Placement{p.node, p.allocation, 0});
      one.erase("option");
      one["bundle"] = b;
      json.push_back(std::move(one));
    }
    return absl::StrJoin(parts, "; ");
  }

  absl::Status CreateGroup(const PlacementGroupSpec& spec, Json& record, std::string& text) {
    auto result = groups_.Create(spec);
    if (!result.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement group ", Quote(spec.name), ": ", result.status().message()));
    }
    record["status"] = std::string(ScheduleStatusName(result->status));
    if (result->status != ScheduleStatus::kPlaced) {
      waiting_groups_.insert_or_assign(spec.name, spec);
      record["explanation"] = result->explanation;
      absl::StrAppend(&text, ToAbsl(ScheduleStatusName(result->status)), ": ",
                      result->explanation);
      return absl::OkStatus();
    }
    waiting_groups_.erase(spec.name);
    SyncBundles();  // its bundles can serve requests from now on
    std::vector<std::pair<int, BundlePlacement>> bundles;
    for (size_t b = 0; b < result->bundles.size(); ++b) {
      bundles.emplace_back(static_cast<int>(b), result->bundles[b]);
    }
    Json json;
    absl::StrAppend(&text, "placed ", BundlesText(bundles, json));
    if (result->option > 0) absl::StrAppend(&text, " (fallback option ", result->option, ")");
    record["bundles"] = std::move(json);
    record["option"] = result->option;
    return absl::OkStatus();
  }

  // Placed: one line per host ("a-w0 (TPU 0,1,2,3)"), grouped by slice or NVLink domain.
  absl::Status ReserveSlices(const DomainGroupRequest& request, Json& record, std::string& text) {
    auto result = slices_.ReserveSlices(request);
    if (!result.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("slice reservation ", Quote(request.name), ": ", result.status().message()));
    }
    record["status"] = std::string(ScheduleStatusName(result->status));
    if (result->status != ScheduleStatus::kPlaced) {
      waiting_slices_.insert_or_assign(request.name, request);
      record["explanation"] = result->explanation;
      absl::StrAppend(&text, ToAbsl(ScheduleStatusName(result->status)), ": ",
                      result->explanation);
      return absl::OkStatus();
    }
    waiting_slices_.erase(request.name);
    record["alternative"] = result->alternative;
    record["domains"] = result->domains;
    Json bundles = Json::array();
    std::map<std::string, std::vector<std::string>> hosts;  // domain -> "node (devices)"
    std::map<std::string, std::string> last;                // domain -> last node listed
    for (const DomainBundle& b : result->bundles) {
      Json one = PlacementJson(Placement{b.node, b.allocation, 0});
      one.erase("option");
      one["domain"] = b.domain;
      if (b.worker >= 0) one["worker"] = b.worker;
      bundles.push_back(std::move(one));
      const std::string devices = DevicesText(b.allocation);
      std::vector<std::string>& list = hosts[b.domain];
      if (last[b.domain] == b.node.value() && !list.empty()) {
        // Per-chip bundles of one host: one entry, devices appended.
        list.back().pop_back();
        absl::StrAppend(&list.back(), ",", devices.substr(devices.find(' ') + 1), ")");
        continue;
      }
      last[b.domain] = b.node.value();
      list.push_back(absl::StrCat(b.node.value(), " (", devices.empty() ? "no devices" : devices,
                                  ")"));
    }
    record["bundles"] = std::move(bundles);
    std::vector<std::string> parts;
    for (const std::string& d : result->domains) {
      parts.push_back(absl::StrCat(d, ": ", absl::StrJoin(hosts[d], ", ")));
    }
    absl::StrAppend(&text, "placed ", absl::StrJoin(parts, "; "));
    if (result->alternative > 0) {
      absl::StrAppend(&text, " (alternative ", result->alternative + 1, ")");
    }
    return absl::OkStatus();
  }

  // What re-placement did to groups that lost bundles (or were waiting for room).
  void ReportGroups(const std::vector<RescheduleReport>& reports, Json& record,
                    std::string& text) {
    Json out = Json::array();
    for (const RescheduleReport& r : reports) {
      const PlacementGroup* g = groups_.Find(r.id);
      Json one = {{"name", r.name}, {"bundles", r.bundles},
                  {"state", std::string(PlacementGroupStateName(g->state))}};
      absl::StrAppend(&text, "\n    placement group ", r.name, ": ");
      if (r.placed) {
        std::vector<std::pair<int, BundlePlacement>> bundles;
        for (int b : r.bundles) bundles.emplace_back(b, *g->bundles[b]);
        Json json;
        absl::StrAppend(&text, "re-placed ", BundlesText(bundles, json));
        one["placements"] = std::move(json);
      } else {
        absl::StrAppend(&text, "RESCHEDULING bundles ", absl::StrJoin(r.bundles, ","), ": ",
                        r.explanation);
        one["explanation"] = r.explanation;
      }
      out.push_back(std::move(one));
    }
    if (!out.empty()) record["placement_groups"] = std::move(out);
  }

  std::string Finish(const std::string& name) {
    Tracked& t = tracked_.at(name);
    switch (t.phase) {
      case Phase::kRunning: {
        const bool in_bundle = t.request.bundle_target.has_value();
        auto released = in_bundle ? ledger_.Release(t.placement->allocation.id)
                                  : view_.Release(t.placement->allocation.id);
        (in_bundle ? bundle_owners_ : owners_).erase(t.placement->allocation.id.value());
        t.phase = Phase::kFinished;
        if (!released.ok()) return std::string(released.status().message());
        return absl::StrCat("finished; released ", released->resources.ToString(),
                            in_bundle ? absl::StrCat(" to bundle ", t.placement->bundle, " of ",
                                                     t.request.bundle_target->group)
                                      : "",
                            " on ", t.placement->node.value());
      }
      case Phase::kWaiting:
      case Phase::kParked:
        t.phase = Phase::kWithdrawn;
        return "withdrawn before it was placed";
      case Phase::kLost:
        return "already lost with its node or placement group";
      case Phase::kFinished:
      case Phase::kWithdrawn:
        return "already finished";
    }
    return "";
  }

  // After a cluster change: parked requests some changed node could now fit, and requests
  // that were pending, are tried again in submission order.
  absl::Status RetryWaiting(Json& record, std::string& text) {
    std::set<int64_t> unparked;
    for (RequestId id : scheduler_.OnClusterChanged()) unparked.insert(id.value());
    Json placed = Json::array();
    Json unplaced = Json::array();  // resubmitted by this event, not placed
    for (const std::string& name : order_) {
      Tracked& t = tracked_.at(name);
      const bool retry = t.phase == Phase::kWaiting ||
                         (t.phase == Phase::kParked && unparked.count(t.request.id.value()) != 0);
      if (!retry || t.request.bundle_target) continue;  // bundle requests go after the groups
      Json again;
      std::string line;
      TESSERA_RETURN_IF_ERROR(Schedule(t, again, line));
      const bool fresh = resubmitted_.contains(name);  // says where it went, placed or not
      if (t.phase != Phase::kRunning && !fresh) continue;  // still waiting: nothing new to say
      again["name"] = name;
      (t.phase == Phase::kRunning ? placed : unplaced).push_back(std::move(again));
      absl::StrAppend(&text, fresh ? "\n    resubmitted " : "\n    waiting ", name, ": ", line);
    }
    if (!placed.empty()) record["placed_waiting"] = std::move(placed);
    std::vector<RescheduleReport> rescheduled;
    for (RescheduleReport& r : groups_.OnClusterChanged()) {
      if (r.placed) rescheduled.push_back(std::move(r));  // still waiting: nothing new to say
    }
    ReportGroups(rescheduled, record, text);
    // Groups that could not be created are tried again after every change, in name order.
    Json created = Json::array();
    const std::map<std::string, PlacementGroupSpec> waiting = waiting_groups_;
    for (const auto& [name, spec] : waiting) {
      Json again;
      std::string line;
      TESSERA_RETURN_IF_ERROR(CreateGroup(spec, again, line));
      if (waiting_groups_.contains(name)) continue;
      again["name"] = name;
      created.push_back(std::move(again));
      absl::StrAppend(&text, "\n    waiting placement group ", name, ": ", line);
    }
    if (!created.empty()) record["created_waiting"] = std::move(created);
    // Slice reservations that could not be made are tried again too, in name order.
    Json reserved = Json::array();
    const std::map<std::string, DomainGroupRequest> waiting_slices = waiting_slices_;
    for (const auto& [name, request] : waiting_slices) {
      Json again;
      std::string line;
      TESSERA_RETURN_IF_ERROR(ReserveSlices(request, again, line));
      if (waiting_slices_.contains(name)) continue;
      again["name"] = name;
      reserved.push_back(std::move(again));
      absl::StrAppend(&text, "\n    waiting slice reservation ", name, ": ", line);
    }
    if (!reserved.empty()) record["reserved_waiting"] = std::move(reserved);
    // Requests waiting for a bundle: after the groups, whose bundles may just have been placed.
    SyncBundles();
    Json in_bundles = Json::array();
    for (const std::string& name : order_) {
      Tracked& t = tracked_.at(name);
      if (t.phase != Phase::kWaiting || !t.request.bundle_target) continue;
      Json again;
      std::string line;
      TESSERA_RETURN_IF_ERROR(Schedule(t, again, line));
      const bool fresh = resubmitted_.contains(name);
      if (t.phase != Phase::kRunning && !fresh) continue;
      again["name"] = name;
      (t.phase == Phase::kRunning ? in_bundles : unplaced).push_back(std::move(again));
      absl::StrAppend(&text, fresh ? "\n    resubmitted " : "\n    waiting ", name, ": ", line);
    }
    if (!in_bundles.empty()) record["placed_in_bundles"] = std::move(in_bundles);
    if (!unplaced.empty()) record["resubmitted_waiting"] = std::move(unplaced);
    resubmitted_.clear();
    return absl::OkStatus();
  }

  // A request in a placement group: served by the ledger from the group's reserved bundles. The
  // group's state refines the ledger's answer (not placed yet, removed, bundles being re-placed).
  absl::StatusOr<ScheduleResult> ScheduleInBundle(const SchedulingRequest& request) {
    TESSERA_RETURN_IF_ERROR(ValidateSchedulingRequest(request));
    const BundleTarget& target = *request.bundle_target;
    ScheduleResult result;
    if (waiting_groups_.contains(target.group)) {
      result.status = ScheduleStatus::kPending;
      result.explanation = absl::StrCat("placement group ", target.group, " is not placed yet");
      return result;
    }
    const std::optional<PlacementGroupId> id = groups_.FindByName(target.group);
    if (!id) {
      result.status = ScheduleStatus::kInfeasible;
      result.explanation = absl::StrCat("placement group ", target.group, " was removed");
      return result;
    }
    const PlacementGroup& group = *groups_.Find(*id);
    const std::vector<ResourceSet>& shapes = OptionsInOrder(group.spec)[group.option]->bundles;
    if (target.bundle >= static_cast<int>(shapes.size())) {
      result.status = ScheduleStatus::kInfeasible;
      result.explanation = absl::StrCat(
          "placement group ", target.group, " was placed with its fallback option ", group.option,
          ", which has ", shapes.size(), shapes.size() == 1 ? " bundle" : " bundles",
          "; bundle ", target.bundle, " does not exist");
      return result;
    }
    result = ledger_.Allocate(target, request.resources, request.holder);
    if (result.status == ScheduleStatus::kPlaced) return result;
    // A bundle waiting to be re-placed is pending, not missing, when its shape could hold it.
    for (size_t b = 0; b < shapes.size(); ++b) {
      const bool targeted = target.bundle < 0 || target.bundle == static_cast<int>(b);
      if (!targeted || group.bundles[b].has_value() || !shapes[b].Contains(request.resources)) {
        continue;
      }
      result.status = ScheduleStatus::kPending;
      result.explanation = absl::StrCat("bundle ", b, " of ", target.group,
                                        " is waiting to be re-placed (",
                                        group.explanation, ")");
      break;
    }
    return result;
  }

  // Brings the ledger in line with the groups' current bundles: bundles that moved or went away
  // take the work they served with them (returned by name, sorted); new placements are added.
  std::vector<std::string> SyncBundles() {
    std::vector<std::string> lost;
    auto drop = [&](const std::string& group, std::optional<int> bundle) {
      for (const Allocation& a : ledger_.RemoveBundles(group, bundle)) {
        auto owner = bundle_owners_.find(a.id.value());
        tracked_.at(owner->second).phase = Phase::kLost;
        lost.push_back(owner->second);
        bundle_owners_.erase(owner);
      }
    };
    for (auto it = ledger_groups_.begin(); it != ledger_groups_.end();) {
      if (groups_.FindByName(*it)) {
        ++it;
        continue;
      }
      drop(*it, std::nullopt);
      it = ledger_groups_.erase(it);
    }
    for (const auto& [id, group] : groups_.groups()) {
      ledger_groups_.insert(group.spec.name);
      for (size_t b = 0; b < group.bundles.size(); ++b) {
        const int index = static_cast<int>(b);
        const std::optional<AllocationId> held = ledger_.ReservationOf(group.spec.name, index);
        const std::optional<BundlePlacement>& now = group.bundles[b];
        if (held && now && *held == now->allocation.id) continue;
        if (held) drop(group.spec.name, index);
        if (now) {
          absl::Status added = ledger_.AddBundle(group.spec.name, index, now->allocation);
          (void)added;  // cannot fail: the bundle was just dropped or never registered
        }
      }
    }
    std::sort(lost.begin(), lost.end());
    return lost;
  }

  // used/total per resource over the nodes that are not dead, sorted by resource name.
  Json UtilizationJson(AmountStyle style = AmountStyle::kExact) const {
    std::map<std::string, std::pair<Quantity, Quantity>> sums;  // used, total
    for (NodeIndex i = 0; i < view_.slot_count(); ++i) {
      const NodeRecord& n = view_.node(i);
      if (n.removed || n.state == NodeState::kDead) continue;
      for (const auto& [name, total] : n.total) {
        auto& [used, sum] = sums[name];
        sum = Quantity::FromRaw(sum.raw() + total.raw());
        used = Quantity::FromRaw(used.raw() + total.raw() - n.available.Get(name).raw());
      }
    }
    Json out = Json::object();
    for (const auto& [name, value] : sums) {
      const auto& [used, total] = value;
      const double percent = total.IsZero() ? 0 : 100.0 * used.ToDouble() / total.ToDouble();
      out[name] = {{"used", FormatAmount(name, used, style)},
                   {"total", FormatAmount(name, total, style)},
                   {"percent", absl::StrFormat("%.1f", percent)}};
    }
    return out;
  }

  bool json_;
  ClusterView view_;
  TaskScheduler scheduler_;
  PlacementGroupScheduler groups_;
  DomainGroupScheduler slices_;
  BundleLedger ledger_;                  // requests served from placement group bundles
  std::set<std::string> ledger_groups_;  // groups whose bundles the ledger may hold
  std::map<int64_t, std::string> bundle_owners_;  // ledger allocation id -> request name
  std::map<std::string, PlacementGroupSpec> waiting_groups_;  // not placed yet, by name
  std::map<std::string, DomainGroupRequest> waiting_slices_;  // not reserved yet, by name
  std::map<std::string, Tracked> tracked_;  // by request name
  // Lost work submitted again by the current event: the retry after it reports where it went.
  std::set<std::string> resubmitted_;
  std::vector<std::string> order_;          // request names in submission order
  std::map<int64_t, std::string> owners_;   // running allocation id -> request name
  std::vector<Json> events_;
  std::vector<std::string> lines_;
};

absl::Status RunSchedule(const std::string& cluster_path, const std::string& requests_path,
                         bool json, SchedulerOptions task_options) {
  TESSERA_ASSIGN_OR_RETURN(const std::string cluster_text, ReadFile(cluster_path));
  TESSERA_ASSIGN_OR_RETURN(const std::vector<ClusterNode> nodes,
                           ParseClusterFile(cluster_text, cluster_path));
  std::set<std::string> ids;
  for (const ClusterNode& n : nodes) ids.insert(n.id);
  TESSERA_ASSIGN_OR_RETURN(const std::string requests_text, ReadFile(requests_path));
  TESSERA_ASSIGN_OR_RETURN(const std::vector<SimulatedEvent> events,
                           ParseRequestsFile(requests_text, requests_path, ids));
  Simulation simulation(json, task_options);
  TESSERA_RETURN_IF_ERROR(simulation.AddNodes(nodes));
  for (size_t i = 0; i < events.size(); ++i) {
    if (absl::Status s = simulation.Apply(events[i], i); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(requests_path, ":", events[i].line, ": ",
                                                     s.message()));
    }
  }
  simulation.Print(std::cout);
  return absl::OkStatus();
}

}  // namespace

void AddScheduleCommand(CLI::App& app, int& exit_code) {
  struct Args {
    std::string cluster;
    std::string requests;
    bool json = false;
    bool cpu_work_on_accelerator_nodes = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "schedule", "Simulate scheduling: apply a requests file's events to a cluster file's nodes");
  cmd->add_option("--cluster", args->cluster, "Cluster file (node groups, slices)")->required();
  cmd->add_option("--requests", args->requests, "Requests file (ordered events)")->required();
  cmd->add_flag("--json", args->json, "Print JSON for programs");
  cmd->add_flag("--cpu-work-on-accelerator-nodes", args->cpu_work_on_accelerator_nodes,
                "Place tasks and actors that ask for no accelerator on accelerator nodes as "
                "readily as on others, as `tessera start --head` does with the same flag");
  cmd->callback([args, &exit_code] {
    SchedulerOptions task_options;
    task_options.avoid_accelerator_nodes = !args->cpu_work_on_accelerator_nodes;
    absl::Status s = RunSchedule(args->cluster, args->requests, args->json, task_options);
    exit_code = s.ok() ? 0 : ReportError(ToStd(s.message()));
  });
}

}  // namespace tessera::cli

// tessera schedule --cluster CLUSTER.yaml --requests REQUESTS.yaml [--json]
//                  [--cpu-work-on-accelerator-nodes]
// The scheduling simulator's input and output: reads the cluster and requests files, hands each
// event to scheduling/simulation.h (which makes every decision with the code the cluster runs:
// the head's reservation engine, the task scheduler, the agents' bundle ledger), and prints each
// outcome — placements or explanations, what node events did, what waited and was placed
// later — and the final utilization, as text or JSON. Output depends only on the two files, so
// runs are identical.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/file_read.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "cli/commands.h"
#include "resources/byte_size.h"
#include "resources/resource_set.h"
#include "scheduling/cluster_file.h"
#include "scheduling/requests_file.h"
#include "scheduling/simulation.h"

namespace tessera::cli {
namespace {

using Json = nlohmann::ordered_json;

// Sized before it is read (base/file_read.h): a huge file is refused at once.
absl::StatusOr<std::string> ReadFile(const std::string& path, absl::string_view what) {
  return ReadFileUpTo(path, kMaxDescriptionFileBytes, what);
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
  std::string text = p.bundle >= 0
                         ? absl::StrCat("placed in bundle ", p.bundle, " on ", p.node.value())
                         : absl::StrCat("placed on ", p.node.value());
  const std::string devices = DevicesText(p.allocation);
  if (!devices.empty()) absl::StrAppend(&text, ", ", devices);
  if (p.option > 0) absl::StrAppend(&text, " (fallback option ", p.option, ")");
  return text;
}

std::string_view EventName(const SimulatedEvent& e) {
  switch (e.kind) {
    case SimulatedEventKind::kSubmit: return e.request.actor ? "submit_actor" : "submit_task";
    case SimulatedEventKind::kFinish: return "finish";
    case SimulatedEventKind::kAddNodes: return "add_nodes";
    case SimulatedEventKind::kFailNode: return "fail_node";
    case SimulatedEventKind::kDrainNode: return "drain_node";
    case SimulatedEventKind::kCreatePlacementGroup: return "create_placement_group";
    case SimulatedEventKind::kRemovePlacementGroup: return "remove_placement_group";
    case SimulatedEventKind::kReserveSlices: return "reserve_slices";
    case SimulatedEventKind::kReleaseSlices: return "release_slices";
  }
  return "event";
}

// "bundle 0 on n1 (GPU 0,1); bundle 1 on n2 (CPU only)" for the bundles given.
std::string BundlesText(const std::vector<std::pair<int, BundlePlacement>>& bundles, Json& json) {
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

// A task or actor tried: its status, then where it went or why not.
void WriteAttempt(const WorkAttempt& a, Json& record, std::string& text) {
  record["status"] = std::string(ScheduleStatusName(a.status));
  if (a.status == ScheduleStatus::kPlaced) {
    record["placement"] = PlacementJson(*a.placement);
    absl::StrAppend(&text, PlacementText(*a.placement));
  } else {
    record["explanation"] = a.explanation;
    absl::StrAppend(&text, ToAbsl(ScheduleStatusName(a.status)), ": ", a.explanation);
  }
}

// A placement group or slice group decision. Placed slice groups: one entry per host
// ("a-w0 (TPU 0,1,2,3)"), grouped by slice or NVLink domain.
void WriteReservation(const ReservationPlacement& r, Json& record, std::string& text) {
  record["status"] = std::string(ScheduleStatusName(r.status));
  if (r.status != ScheduleStatus::kPlaced) {
    record["explanation"] = r.explanation;
    absl::StrAppend(&text, ToAbsl(ScheduleStatusName(r.status)), ": ", r.explanation);
    return;
  }
  if (r.kind == ReservationKind::kPlacementGroup) {
    Json json;
    absl::StrAppend(&text, "placed ", BundlesText(r.bundles, json));
    if (r.choice > 0) absl::StrAppend(&text, " (fallback option ", r.choice, ")");
    record["bundles"] = std::move(json);
    record["option"] = r.choice;
    return;
  }
  record["alternative"] = r.choice;
  record["domains"] = r.domains;
  Json bundles = Json::array();
  std::map<std::string, std::vector<std::string>> hosts;  // domain -> "node (devices)"
  std::map<std::string, std::string> last;                // domain -> last node listed
  for (const DomainBundle& b : r.hosts) {
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
    list.push_back(
        absl::StrCat(b.node.value(), " (", devices.empty() ? "no devices" : devices, ")"));
  }
  record["bundles"] = std::move(bundles);
  std::vector<std::string> parts;
  for (const std::string& d : r.domains) {
    parts.push_back(absl::StrCat(d, ": ", absl::StrJoin(hosts[d], ", ")));
  }
  absl::StrAppend(&text, "placed ", absl::StrJoin(parts, "; "));
  if (r.choice > 0) absl::StrAppend(&text, " (alternative ", r.choice + 1, ")");
}

// What re-placing placement groups' lost bundles did, one line each.
void WriteReplacements(const std::vector<Replacement>& replacements, Json& out, std::string& text) {
  for (const Replacement& r : replacements) {
    Json one = {
        {"name", r.name}, {"bundles", r.bundles}, {"state", r.placed ? "CREATED" : "RESCHEDULING"}};
    absl::StrAppend(&text, "\n    placement group ", r.name, ": ");
    if (r.placed) {
      Json json;
      absl::StrAppend(&text, "re-placed ", BundlesText(r.placements, json));
      one["placements"] = std::move(json);
    } else {
      absl::StrAppend(&text, "RESCHEDULING bundles ", absl::StrJoin(r.bundles, ","), ": ",
                      r.explanation);
      one["explanation"] = r.explanation;
    }
    out.push_back(std::move(one));
  }
}

std::string FinishText(const EventOutcome& o) {
  switch (o.finish) {
    case FinishResult::kFinished: {
      if (!o.finished.has_value()) return o.finish_problem;
      const Placement& p = *o.finished;
      return absl::StrCat("finished; released ", p.allocation.resources.ToString(),
                          o.finished_group.empty()
                              ? ""
                              : absl::StrCat(" to bundle ", p.bundle, " of ", o.finished_group),
                          " on ", p.node.value());
    }
    case FinishResult::kWithdrawn: return "withdrawn before it was placed";
    case FinishResult::kAlreadyLost: return "already lost with its node or placement group";
    case FinishResult::kAlreadyFinished: return "already finished";
  }
  return "";
}

// A node event names its node; true when the view refused it (an unknown or dead node), which
// is then all there is to say.
bool NodeRefused(const SimulatedEvent& e, const EventOutcome& o, Json& record, std::string& text) {
  record["node"] = e.target;
  absl::StrAppend(&text, e.target, ": ");
  if (o.refused.empty()) return false;
  record["result"] = o.refused;
  absl::StrAppend(&text, o.refused);
  return true;
}

// A failed node's event: the work it lost or touched, what was resubmitted and re-placed, and
// the slice groups it broke.
void WriteNodeFailure(const EventOutcome& o, Json& record, Json& groups, std::string& text) {
  record["lost"] = o.lost;
  record["touched"] = o.touched;
  absl::StrAppend(&text, o.lost.empty() ? "dead; nothing was running"
                                        : absl::StrCat("dead; released (work lost) ",
                                                       absl::StrJoin(o.lost, ", ")));
  if (!o.touched.empty()) absl::StrAppend(&text, "; touched ", absl::StrJoin(o.touched, ", "));
  Json resubmitted = Json::array();
  std::vector<std::string> parts;
  for (const Resubmission& r : o.resubmitted) {
    parts.push_back(r.max_retries < 0
                        ? absl::StrCat(r.name, " (retry ", r.retry, ")")
                        : absl::StrCat(r.name, " (retry ", r.retry, " of ", r.max_retries, ")"));
    resubmitted.push_back({{"name", r.name}, {"retry", r.retry}, {"max_retries", r.max_retries}});
  }
  record["resubmitted"] = std::move(resubmitted);
  if (!parts.empty()) absl::StrAppend(&text, "; resubmitted ", absl::StrJoin(parts, ", "));
  WriteReplacements(o.replaced, groups, text);
  Json broken = Json::array();
  for (const auto& [name, why] : o.broken) {
    absl::StrAppend(&text, "\n    slice group ", name, ": BROKEN: ", why);
    broken.push_back({{"name", name}, {"explanation", why}});
  }
  if (!broken.empty()) record["broken"] = std::move(broken);
}

// A placement group's removal, or a slice reservation's release: what it released and stopped.
void WriteRemoval(const SimulatedEvent& e, const EventOutcome& o, Json& record, std::string& text) {
  const bool group = e.kind == SimulatedEventKind::kRemovePlacementGroup;
  record["name"] = e.target;
  absl::StrAppend(&text, e.target, ": ");
  if (o.removal == RemovalResult::kWithdrawn) {
    absl::StrAppend(&text, "withdrawn before it was placed");
    record["result"] = "withdrawn";
    return;
  }
  if (o.removal == RemovalResult::kAlreadyGone) {
    absl::StrAppend(&text, group ? "already removed" : "already released");
    return;
  }
  std::vector<std::string> parts;
  for (const Allocation& a : o.released) {
    parts.push_back(absl::StrCat(a.resources.ToString(), " on ", a.node.value()));
  }
  record["released"] = parts;
  absl::StrAppend(&text, group ? "removed; released " : "released ", absl::StrJoin(parts, "; "));
  if (!o.stopped.empty()) {  // work running in its bundles stops with it
    record["stopped"] = o.stopped;
    absl::StrAppend(&text, "; stopped ", absl::StrJoin(o.stopped, ", "));
  }
}

// What waited and was tried again after the event: work, reservations and work in bundles.
void WriteRetries(const EventOutcome& o, Json& record, Json& groups, std::string& text) {
  Json placed = Json::array();
  Json unplaced = Json::array();  // resubmitted by this event, not placed
  auto retried = [&](const WorkAttempt& a, Json& placed_list) {
    Json again;
    std::string line;
    WriteAttempt(a, again, line);
    again["name"] = a.name;
    (a.status == ScheduleStatus::kPlaced ? placed_list : unplaced).push_back(std::move(again));
    absl::StrAppend(&text, a.resubmitted ? "\n    resubmitted " : "\n    waiting ", a.name, ": ",
                    line);
  };
  for (const WorkAttempt& a : o.retried_work) retried(a, placed);
  if (!placed.empty()) record["placed_waiting"] = std::move(placed);
  WriteReplacements(o.replaced_later, groups, text);
  if (!groups.empty()) record["placement_groups"] = std::move(groups);
  Json created = Json::array();
  Json reserved = Json::array();
  for (const ReservationPlacement& r : o.placed_later) {
    Json again;
    std::string line;
    WriteReservation(r, again, line);
    again["name"] = r.name;
    const bool group = r.kind == ReservationKind::kPlacementGroup;
    (group ? created : reserved).push_back(std::move(again));
    absl::StrAppend(&text,
                    group ? "\n    waiting placement group " : "\n    waiting slice reservation ",
                    r.name, ": ", line);
  }
  if (!created.empty()) record["created_waiting"] = std::move(created);
  if (!reserved.empty()) record["reserved_waiting"] = std::move(reserved);
  Json in_bundles = Json::array();
  for (const WorkAttempt& a : o.retried_in_bundles) retried(a, in_bundles);
  if (!in_bundles.empty()) record["placed_in_bundles"] = std::move(in_bundles);
  if (!unplaced.empty()) record["resubmitted_waiting"] = std::move(unplaced);
}

// One event's record (JSON) and line (text) from its outcome.
void WriteEvent(const SimulatedEvent& e, size_t index, const EventOutcome& o, Json& record,
                std::string& text) {
  record = {{"event", index + 1}, {"line", e.line}, {"kind", EventName(e)}};
  text = absl::StrCat("[", index + 1, "] ", ToAbsl(EventName(e)), " ");
  Json groups = Json::array();  // re-placements, by the event and after it
  switch (e.kind) {
    case SimulatedEventKind::kSubmit:
      record["name"] = e.request.name;
      absl::StrAppend(&text, e.request.name, ": ");
      WriteAttempt(*o.submitted, record, text);
      break;
    case SimulatedEventKind::kFinish:
      record["name"] = e.target;
      absl::StrAppend(&text, e.target, ": ", FinishText(o));
      break;
    case SimulatedEventKind::kAddNodes: {
      std::vector<std::string> ids;
      for (const ClusterNode& n : e.nodes) ids.push_back(n.id);
      record["nodes"] = ids;
      absl::StrAppend(&text, e.nodes.size(),
                      e.nodes.size() == 1 ? " node: " : " nodes: ", absl::StrJoin(ids, ", "));
      break;
    }
    case SimulatedEventKind::kFailNode:
      if (NodeRefused(e, o, record, text)) break;
      WriteNodeFailure(o, record, groups, text);
      break;
    case SimulatedEventKind::kDrainNode:
      if (NodeRefused(e, o, record, text)) break;
      record["keeps_running"] = o.keeps_running;
      absl::StrAppend(&text, "draining; takes no new work",
                      o.keeps_running.empty()
                          ? ""
                          : absl::StrCat("; still running ", absl::StrJoin(o.keeps_running, ", ")));
      break;
    case SimulatedEventKind::kCreatePlacementGroup:
    case SimulatedEventKind::kReserveSlices: {
      const std::string& name =
          e.kind == SimulatedEventKind::kReserveSlices ? e.slices.name : e.group.name;
      record["name"] = name;
      absl::StrAppend(&text, name, ": ");
      WriteReservation(*o.reservation, record, text);
      break;
    }
    case SimulatedEventKind::kRemovePlacementGroup:
    case SimulatedEventKind::kReleaseSlices: WriteRemoval(e, o, record, text); break;
  }
  WriteRetries(o, record, groups, text);
}

Json UtilizationJson(const Simulation& simulation, AmountStyle style) {
  Json out = Json::object();
  for (const auto& [name, value] : simulation.Utilization()) {
    const auto& [used, total] = value;
    const double percent = total.IsZero() ? 0 : 100.0 * used.ToDouble() / total.ToDouble();
    out[name] = {{"used", FormatAmount(name, used, style)},
                 {"total", FormatAmount(name, total, style)},
                 {"percent", absl::StrFormat("%.1f", percent)}};
  }
  return out;
}

absl::Status RunSchedule(const std::string& cluster_path, const std::string& requests_path,
                         bool json, SchedulerOptions task_options) {
  TESSERA_ASSIGN_OR_RETURN(const std::string cluster_text, ReadFile(cluster_path, "cluster file"));
  TESSERA_ASSIGN_OR_RETURN(const std::vector<ClusterNode> nodes,
                           ParseClusterFile(cluster_text, cluster_path));
  std::set<std::string> ids;
  for (const ClusterNode& n : nodes) ids.insert(n.id);
  TESSERA_ASSIGN_OR_RETURN(const std::string requests_text,
                           ReadFile(requests_path, "requests file"));
  TESSERA_ASSIGN_OR_RETURN(const std::vector<SimulatedEvent> events,
                           ParseRequestsFile(requests_text, requests_path, ids));
  Simulation simulation(task_options);
  TESSERA_RETURN_IF_ERROR(simulation.AddNodes(nodes));
  std::vector<Json> records;
  std::vector<std::string> lines;
  for (size_t i = 0; i < events.size(); ++i) {
    absl::StatusOr<EventOutcome> outcome = simulation.Apply(events[i]);
    if (!outcome.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(requests_path, ":", events[i].line, ": ", outcome.status().message()));
    }
    WriteEvent(events[i], i, *outcome, records.emplace_back(), lines.emplace_back());
  }
  if (json) {
    std::cout << Json{{"events", records},
                      {"utilization", UtilizationJson(simulation, AmountStyle::kExact)}}
                     .dump(2)
              << "\n";
    return absl::OkStatus();
  }
  for (const std::string& line : lines) std::cout << line << "\n";
  std::cout << "utilization:\n";
  const Json utilization = UtilizationJson(simulation, AmountStyle::kForPeople);
  for (const auto& [name, value] : utilization.items()) {
    std::cout << "  " << name << " " << value["used"].get<std::string>() << "/"
              << value["total"].get<std::string>() << " (" << value["percent"].get<std::string>()
              << "%)\n";
  }
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

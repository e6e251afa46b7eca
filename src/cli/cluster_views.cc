#include "cli/cluster_views.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/cluster_format.h"
#include "cli/text_table.h"
#include "hardware/node_label_keys.h"
#include "node/object_store_sizing.h"
#include "rpc/state_names.h"

namespace tessera::cli {
namespace {

std::string Label(const tessera::v1::NodeDescription& node, const std::string& key) {
  const auto it = node.labels().find(key);
  return it == node.labels().end() ? "" : it->second;
}

std::string OrDash(std::string text) { return text.empty() ? "-" : text; }

// Resources that only mark a node for matching (accelerator_type:H100, a slice's name, the
// TPU-v6e-16-head marker): they clutter a table for people; JSON keeps them.
bool IsMarkerResource(const std::string& name, const std::set<std::string>& slice_names) {
  return name.find(':') != std::string::npos || slice_names.contains(name) ||
         (name.starts_with("TPU-") && name.ends_with("-head"));
}

tessera::v1::Resources WithoutMarkers(const tessera::v1::Resources& resources,
                                      const std::set<std::string>& slice_names) {
  tessera::v1::Resources out;
  for (const auto& [name, raw] : resources.raw()) {
    if (!IsMarkerResource(name, slice_names)) (*out.mutable_raw())[name] = raw;
  }
  return out;
}

std::string CommandText(const google::protobuf::RepeatedPtrField<std::string>& argv) {
  return absl::StrJoin(argv, " ");
}

}  // namespace

std::string AgeText(int64_t ms) {
  if (ms < 1000) return absl::StrCat(ms, "ms ago");
  if (ms < 120000) return absl::StrCat(ms / 1000, "s ago");
  return absl::StrCat(ms / 60000, "m ago");
}

std::string NodesTable(const tessera::v1::ListNodesResponse& nodes) {
  // OBJECT STORE: the store's size, or "none" on a node started with --object-store-memory 0.
  TextTable table({"NODE", "STATE", "ADDRESS", "ACCELERATOR", "USED/TOTAL", "WORKERS",
                   "OBJECT STORE", "HEARTBEAT"});
  for (const tessera::v1::NodeInfo& info : nodes.nodes()) {
    const tessera::v1::NodeDescription& node = info.node();
    const std::set<std::string> slice = {Label(node, std::string(labels::kTpuSliceName))};
    table.AddRow({node.node_id(), std::string(rpc::NodeStateName(info.state())), node.address(),
                  OrDash(Label(node, std::string(labels::kAcceleratorType))),
                  UsageText(WithoutMarkers(info.available(), slice),
                            WithoutMarkers(node.resources(), slice)),
                  absl::StrCat(info.workers()), OrDash(Label(node, std::string(kObjectStoreLabel))),
                  AgeText(info.last_heartbeat_age_ms())});
  }
  return table.Render(0);
}

std::string BundleNodesText(const tessera::v1::PlacementGroupInfo& group) {
  std::vector<std::string> parts;
  for (const tessera::v1::BundleLocation& b : group.bundles()) {
    parts.push_back(absl::StrCat(b.index(), ":", OrDash(b.node_id())));
  }
  return absl::StrJoin(parts, " ");
}

std::string PlacementGroupText(const tessera::v1::PlacementGroupInfo& group) {
  std::string out = absl::StrCat("Placement group ", group.name(), " (", group.id(),
                                 "): ", std::string(rpc::PlacementGroupStateName(group.state())),
                                 ", ", std::string(rpc::PlacementStrategyName(group.strategy())));
  if (group.option() > 0) absl::StrAppend(&out, ", fallback option ", group.option());
  absl::StrAppend(&out, "\n");
  for (const tessera::v1::BundleLocation& b : group.bundles()) {
    absl::StrAppend(&out, "  bundle ", b.index(), ": ");
    if (b.node_id().empty()) {
      absl::StrAppend(&out, "not placed\n");
      continue;
    }
    absl::StrAppend(&out, "node ", b.node_id(), ", ", ResourcesText(b.allocation().resources()));
    const std::string devices = DevicesText(b.allocation());
    if (!devices.empty()) absl::StrAppend(&out, " (", devices, ")");
    absl::StrAppend(&out, "\n");
  }
  if (!group.explanation().empty()) absl::StrAppend(&out, "  ", group.explanation(), "\n");
  return out;
}

std::string PlacementGroupsTable(const tessera::v1::ListPlacementGroupsResponse& groups) {
  TextTable table({"NAME", "ID", "STATE", "STRATEGY", "BUNDLES", "EXPLANATION"});
  for (const tessera::v1::PlacementGroupInfo& g : groups.groups()) {
    table.AddRow({g.name(), g.id(), std::string(rpc::PlacementGroupStateName(g.state())),
                  std::string(rpc::PlacementStrategyName(g.strategy())), BundleNodesText(g),
                  g.explanation()});
  }
  return table.Render(0);
}

std::string SliceGroupText(const tessera::v1::SliceGroupInfo& group) {
  std::string out = absl::StrCat("Slice reservation ", group.name(), " (", group.id(),
                                 "): ", std::string(rpc::SliceGroupStateName(group.state())));
  if (group.alternative() > 0) absl::StrAppend(&out, ", alternative ", group.alternative());
  if (!group.domains().empty()) {
    absl::StrAppend(&out, ", ", absl::StrJoin(group.domains(), ", "));
  }
  absl::StrAppend(&out, "\n");
  for (const tessera::v1::SliceHost& h : group.hosts()) {
    absl::StrAppend(&out, "  ", h.domain(), " ");
    if (h.worker() >= 0) absl::StrAppend(&out, "worker ", h.worker(), ": ");
    absl::StrAppend(&out, "node ", h.node_id());
    const std::string devices = DevicesText(h.allocation());
    if (!devices.empty()) absl::StrAppend(&out, " (", devices, ")");
    absl::StrAppend(&out, "\n");
  }
  if (!group.explanation().empty()) absl::StrAppend(&out, "  ", group.explanation(), "\n");
  return out;
}

std::string SlicesTables(const tessera::v1::ListSlicesResponse& slices) {
  TextTable table({"SLICE", "TYPE", "TOPOLOGY", "HOSTS", "INTACT", "HELD BY"});
  for (const auto& s : slices.slices()) {
    table.AddRow({s.name(), s.accelerator_type(), s.topology(),
                  absl::StrCat(s.hosts_alive(), "/", s.hosts()), s.intact() ? "yes" : "no",
                  OrDash(s.held_by())});
  }
  std::string out = table.Render(0);
  if (!slices.groups().empty()) {
    TextTable groups({"RESERVATION", "ID", "STATE", "DOMAINS", "HOSTS", "EXPLANATION"});
    for (const auto& g : slices.groups()) {
      groups.AddRow({g.name(), g.id(), std::string(rpc::SliceGroupStateName(g.state())),
                     OrDash(absl::StrJoin(g.domains(), ",")), absl::StrCat(g.hosts_size()),
                     g.explanation()});
    }
    absl::StrAppend(&out, "\n", groups.Render(0));
  }
  return out;
}

tessera::v1::ListJobsResponse JobsByStartTime(tessera::v1::ListJobsResponse jobs) {
  std::stable_sort(jobs.mutable_jobs()->begin(), jobs.mutable_jobs()->end(),
                   [](const tessera::v1::JobInfo& a, const tessera::v1::JobInfo& b) {
                     if (a.start_time_ms() != b.start_time_ms()) {
                       return a.start_time_ms() < b.start_time_ms();
                     }
                     return a.job_id() < b.job_id();
                   });
  return jobs;
}

std::string JobsTable(const tessera::v1::ListJobsResponse& jobs, absl::Time now,
                      absl::TimeZone zone) {
  TextTable table({"JOB", "STATE", "STARTED", "RAN", "NODE", "WORKER", "EXIT", "COMMAND"});
  const tessera::v1::ListJobsResponse sorted = JobsByStartTime(jobs);
  for (const tessera::v1::JobInfo& j : sorted.jobs()) {
    std::string started = "-";
    std::string ran = "-";
    if (j.start_time_ms() > 0) {
      const absl::Time start = absl::FromUnixMillis(j.start_time_ms());
      started = absl::FormatTime("%Y-%m-%d %H:%M:%S", start, zone);
      const absl::Time end = j.end_time_ms() > 0 ? absl::FromUnixMillis(j.end_time_ms()) : now;
      ran = absl::FormatDuration(
          absl::Trunc(std::max(end - start, absl::ZeroDuration()), absl::Seconds(1)));
    }
    table.AddRow({j.job_id(), std::string(rpc::JobStateName(j.state())), started, ran,
                  OrDash(j.node_id()), OrDash(j.worker_id()), OrDash(j.exit_reason()),
                  CommandText(j.argv())});
  }
  return table.Render(0);
}

std::string WorkersTable(const std::vector<tessera::v1::ListWorkersResponse>& per_node) {
  TextTable table({"WORKER", "NODE", "STATE", "PID", "DEVICES", "GROUP", "EXIT", "COMMAND"});
  for (const auto& node : per_node) {
    for (const tessera::v1::WorkerInfo& w : node.workers()) {
      const std::string group = w.placement_group().empty()
                                    ? "-"
                                    : absl::StrCat(w.placement_group(), "[", w.bundle_index(), "]");
      table.AddRow(
          {w.worker_id(), node.node_id(), std::string(rpc::WorkerStateName(w.state())),
           absl::StrCat(w.pid()), OrDash(DevicesText(w.allocation())), group,
           w.state() == tessera::v1::WORKER_STATE_RUNNING ? "-" : OrDash(w.exit().reason()),
           CommandText(w.argv())});
    }
  }
  return table.Render(0);
}

std::string StatusText(const tessera::v1::ClusterStatus& status, const std::string& head_address) {
  std::map<std::string, int> by_state;  // by word, so the counts read in the order they did
  for (const auto& n : status.nodes()) ++by_state[std::string(rpc::NodeStateName(n.state()))];
  std::vector<std::string> counts;
  for (const auto& [state, count] : by_state) {
    counts.push_back(absl::StrCat(count, " ", state));
  }
  std::string out = absl::StrCat("Cluster at ", head_address, "\n");
  if (!status.http_address().empty()) {
    absl::StrAppend(&out, "Dashboard: http://", status.http_address(), "/  (metrics: http://",
                    status.http_address(), "/metrics)\n");
  }
  if (status.state_store().degraded()) {
    // Refusing reservations, removals and submissions until the store is back.
    const tessera::v1::StateStoreHealth& store = status.state_store();
    absl::StrAppend(&out, "State store: DEGRADED (", store.cause(), "; ", store.pending_writes(),
                    " of the head's own writes pending); reservations, removals and submissions "
                    "are refused until it is back\n");
  }
  absl::StrAppend(&out, "\nNodes: ", counts.empty() ? "none" : absl::StrJoin(counts, ", "), "\n");
  tessera::v1::ListNodesResponse nodes;
  *nodes.mutable_nodes() = status.nodes();
  if (!status.nodes().empty()) absl::StrAppend(&out, NodesTable(nodes));

  // What leases and bundles hold, as the head accounts for it, and beside it what the agents
  // measured in use (the dashboard and the agents' /metrics have it per node and device).
  absl::StrAppend(&out, "\nResources (reserved/total, measured use):\n");
  if (status.usage().empty()) absl::StrAppend(&out, "  none\n");
  std::set<std::string> slice_names;
  for (const auto& s : status.slices().slices()) slice_names.insert(s.name());
  for (const tessera::v1::ResourceUsage& u : status.usage()) {
    if (IsMarkerResource(u.resource(), slice_names)) continue;
    absl::StrAppend(&out, "  ", u.resource(), " ", AmountText(u.resource(), u.used_raw()), "/",
                    AmountText(u.resource(), u.total_raw()), MeasuredUseText(u), "\n");
  }

  const auto& slices = status.slices();
  if (!slices.slices().empty()) {
    int intact_idle = 0, busy = 0, broken = 0;
    for (const auto& s : slices.slices()) {
      if (!s.intact()) {
        ++broken;
      } else if (!s.held_by().empty()) {
        ++busy;
      } else {
        ++intact_idle;
      }
    }
    absl::StrAppend(&out, "\nSlices: ", slices.slices_size(), " (", intact_idle,
                    " intact and idle, ", busy, " busy, ", broken, " not intact)\n",
                    SlicesTables(slices));
  }

  if (!status.placement_groups().empty()) {
    tessera::v1::ListPlacementGroupsResponse groups;
    *groups.mutable_groups() = status.placement_groups();
    absl::StrAppend(&out, "\nPlacement groups:\n", PlacementGroupsTable(groups));
  }

  absl::StrAppend(&out, "\nDemand:\n");
  if (status.demand().empty()) absl::StrAppend(&out, "  nothing pending or infeasible\n");
  for (const tessera::v1::Demand& d : status.demand()) {
    absl::StrAppend(&out, "  ", d.kind(), " ", d.name(), ": ",
                    std::string(rpc::DemandStatusName(d.status())),
                    d.explanation().empty() ? "" : ": ", d.explanation(), "\n");
  }
  if (!status.events().empty()) {
    absl::StrAppend(&out, "\nEvents:\n");
    for (const std::string& e : status.events()) absl::StrAppend(&out, "  ", e, "\n");
  }
  return out;
}

}  // namespace tessera::cli

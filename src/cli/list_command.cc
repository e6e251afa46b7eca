// tessera list nodes|placement-groups|slices|workers|jobs [--json]
// tessera status [--json]
// Read-only views of a running cluster. JSON is the protocol's own messages (docs:
// proto/tessera/v1/head.proto), so programs see exactly what the head said; `workers` fans out
// ListWorkers to every node that is not dead and lists them per node. The head answers listings
// in pages; ClusterClient's listings walk every page, so `list` shows them as one at any table
// size.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/cluster_args.h"
#include "cli/cluster_format.h"
#include "cli/cluster_views.h"
#include "cli/commands.h"
#include "client/cluster_client.h"

namespace tessera::cli {
namespace {

using Json = nlohmann::ordered_json;

int ListWorkers(client::ClusterClient& client, bool json) {
  std::vector<std::string> unreachable;
  auto workers = client.ListWorkersEverywhere(unreachable);
  if (!workers.ok()) return ReportError(workers.status());
  if (json) {
    Json out = Json::array();
    for (const auto& node : *workers) out.push_back(MessageJson(node));
    Json doc = {{"nodes", out}, {"unreachable", unreachable}};
    std::cout << doc.dump(2) << "\n";
  } else {
    std::cout << WorkersTable(*workers);
    for (const std::string& node : unreachable) {
      std::cerr << "tessera: warning: node " << node << " did not answer\n";
    }
  }
  return 0;
}

int RunList(const CommonClusterArgs& common, const std::string& what, bool json) {
  auto client = ConnectCluster(common);
  if (!client.ok()) return ReportError(client.status());
  client::ClusterClient& c = **client;
  auto print = [json](const auto& response, auto&& text) {
    if (!response.ok()) return ReportError(response.status());
    if (json) {
      Json doc = MessageJson(*response);
      doc.erase("next_page_token");  // every page is in it: there is no next one
      std::cout << doc.dump(2) << "\n";
    } else {
      std::cout << text(*response);
    }
    return 0;
  };
  if (what == "nodes") return print(c.ListNodes(), NodesTable);
  if (what == "placement-groups") return print(c.ListPlacementGroups(), PlacementGroupsTable);
  if (what == "slices") return print(c.ListSlices(), SlicesTables);
  if (what == "jobs") {
    auto jobs = c.ListJobs();
    if (jobs.ok()) *jobs = JobsByStartTime(*std::move(jobs));
    return print(jobs, [](const tessera::v1::ListJobsResponse& listed) {
      return JobsTable(listed, absl::Now(), absl::LocalTimeZone());
    });
  }
  return ListWorkers(c, json);
}

int RunStatus(const CommonClusterArgs& common, bool json) {
  auto client = ConnectCluster(common);
  if (!client.ok()) return ReportError(client.status());
  auto status = (*client)->GetClusterStatus();
  if (!status.ok()) return ReportError(status.status());
  if (json) {
    std::cout << MessageJson(*status).dump(2) << "\n";
  } else {
    std::cout << StatusText(*status, (*client)->head_address());
  }
  return 0;
}

}  // namespace

void AddListCommand(CLI::App& app, int& exit_code) {
  struct Args {
    CommonClusterArgs common;
    std::string what;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("list", "List the nodes, groups, slices, workers or jobs");
  cmd->add_option("WHAT", args->what, "nodes, placement-groups, slices, workers or jobs")
      ->required()
      ->check(CLI::IsMember({"nodes", "placement-groups", "slices", "workers", "jobs"}));
  cmd->add_flag("--json", args->json, "Print JSON for programs");
  AddCommonClusterFlags(*cmd, args->common);
  cmd->callback([args, &exit_code] { exit_code = RunList(args->common, args->what, args->json); });
}

void AddStatusCommand(CLI::App& app, int& exit_code) {
  struct Args {
    CommonClusterArgs common;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("status",
                                     "Nodes alive and dead, resources reserved/total, slices, "
                                     "placement groups, pending demand, the dashboard's address");
  cmd->add_flag("--json", args->json, "Print JSON for programs");
  AddCommonClusterFlags(*cmd, args->common);
  cmd->callback([args, &exit_code] { exit_code = RunStatus(args->common, args->json); });
}

}  // namespace tessera::cli

// tessera list nodes|placement-groups|slices|workers|jobs [--json]
// tessera status [--json]
// Read-only views of a running cluster. JSON is the protocol's own messages (docs:
// proto/tessera/v1/head.proto), so programs see exactly what the head said; `workers` fans out
// ListWorkers to every node that is not dead and lists them per node. The head answers listings
// in pages; `list` asks for every page and shows them as one, so it works at any table size.
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "cli/cluster_args.h"
#include "cli/cluster_client.h"
#include "cli/cluster_format.h"
#include "cli/cluster_views.h"
#include "cli/commands.h"

namespace tessera::cli {
namespace {

using Json = nlohmann::ordered_json;

// Every page of one of the head's List* calls, merged into one response (repeated fields
// appended in page order, no next_page_token). `call(context, request, page)` asks for one page;
// each page is its own retried call with its own deadline.
template <typename Response, typename Call>
absl::StatusOr<Response> ListEveryPage(ClusterClient& client, Call&& call) {
  Response all;
  tessera::v1::ListRequest request;
  std::set<std::string> tokens;  // a head that repeats a token would loop forever
  while (true) {
    Response page;
    TESSERA_RETURN_IF_ERROR(client.Call(client.HeadPeer(), Retry::kSafe,
                                        [&](grpc::ClientContext* c) {
                                          return call(c, request, &page);
                                        }));
    std::string next = page.next_page_token();
    all.MergeFrom(page);
    all.clear_next_page_token();
    if (next.empty()) return all;
    if (!tokens.insert(next).second) {
      return absl::InternalError(absl::StrCat(client.HeadPeer(), " returned the page token ",
                                              Quote(next), " twice"));
    }
    request.set_page_token(std::move(next));
  }
}

int ListWorkers(ClusterClient& client, bool json) {
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
  ClusterClient& c = **client;
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
  if (what == "nodes") {
    return print(ListEveryPage<tessera::v1::ListNodesResponse>(
                     c, [&](auto* context, const auto& request, auto* page) {
                       return c.head().ListNodes(context, request, page);
                     }),
                 NodesTable);
  }
  if (what == "placement-groups") {
    return print(ListEveryPage<tessera::v1::ListPlacementGroupsResponse>(
                     c, [&](auto* context, const auto& request, auto* page) {
                       return c.head().ListPlacementGroups(context, request, page);
                     }),
                 PlacementGroupsTable);
  }
  if (what == "slices") {
    return print(ListEveryPage<tessera::v1::ListSlicesResponse>(
                     c, [&](auto* context, const auto& request, auto* page) {
                       return c.head().ListSlices(context, request, page);
                     }),
                 SlicesTables);
  }
  if (what == "jobs") {
    return print(ListEveryPage<tessera::v1::ListJobsResponse>(
                     c, [&](auto* context, const auto& request, auto* page) {
                       return c.head().ListJobs(context, request, page);
                     }),
                 JobsTable);
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
  CLI::App* cmd = app.add_subcommand(
      "status",
      "Nodes alive and dead, resources used/total, slices, placement groups, pending demand");
  cmd->add_flag("--json", args->json, "Print JSON for programs");
  AddCommonClusterFlags(*cmd, args->common);
  cmd->callback([args, &exit_code] { exit_code = RunStatus(args->common, args->json); });
}

}  // namespace tessera::cli

// tessera pg create NAME --strategy S --bundles "CPU=1,GPU=2;CPU=1,GPU=2"
//                       [--bundle-selector SEL[;SEL...]]... [--fallback BUNDLES[|SELECTORS]]...
//                       [--same-label KEY] [--wait DUR] [--json]
// tessera pg list [--json]
// tessera pg remove NAME
// Placement groups on a running cluster. The head decides and reserves them (two-phase commit
// across node agents); these commands only build the request, check it locally so a typo costs
// no round trip, and print what the head answered.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "cli/cluster_args.h"
#include "cli/cluster_command_start.h"
#include "cli/cluster_format.h"
#include "cli/cluster_views.h"
#include "cli/commands.h"
#include "client/cluster_client.h"
#include "client/reservation_calls.h"
#include "labels/label.h"
#include "rpc/state_names.h"
#include "scheduling/placement_group_spec.h"
#include "wire/proto_convert.h"

namespace tessera::cli {
namespace {

using tessera::v1::PlacementGroupInfo;

struct CreateArgs {
  std::string name;
  std::string strategy = "PACK";
  std::string bundles;
  std::vector<std::string> bundle_selectors;
  std::vector<std::string> fallbacks;
  std::string same_label;
  std::string wait;
  bool json = false;
};

absl::StatusOr<tessera::v1::CreatePlacementGroupRequest> BuildCreateRequest(
    const CreateArgs& args) {
  PlacementGroupSpec spec;
  spec.name = args.name;
  if (Trim(args.name).empty()) return absl::InvalidArgumentError("NAME: must not be empty");
  TESSERA_ASSIGN_OR_RETURN(spec.strategy, ParsePlacementStrategy(args.strategy));
  std::vector<std::string> selectors;
  for (const std::string& flag : args.bundle_selectors) {
    for (std::string& s : SplitSemicolons(flag)) selectors.push_back(std::move(s));
  }
  TESSERA_ASSIGN_OR_RETURN(
      spec.primary, ParseBundleOption("--bundles", SplitSemicolons(args.bundles), selectors));
  for (size_t i = 0; i < args.fallbacks.size(); ++i) {
    // "CPU=1;CPU=1|zone=a;zone=b": the bundles, then optionally one selector per bundle.
    const std::string& text = args.fallbacks[i];
    const size_t bar = text.find('|');
    const std::string bundles = text.substr(0, bar);
    const std::vector<std::string> fallback_selectors =
        bar == std::string::npos ? std::vector<std::string>{}
                                 : SplitSemicolons(std::string_view(text).substr(bar + 1));
    TESSERA_ASSIGN_OR_RETURN(BundleOption option,
                             ParseBundleOption(absl::StrCat("--fallback ", i + 1),
                                               SplitSemicolons(bundles), fallback_selectors));
    spec.fallbacks.push_back(std::move(option));
  }
  if (!args.same_label.empty()) {
    if (absl::Status key = ValidateLabelKey(args.same_label); !key.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--same-label: ", key.message()));
    }
  }
  spec.same_label = args.same_label;
  TESSERA_RETURN_IF_ERROR(ValidatePlacementGroupSpec(spec));

  tessera::v1::CreatePlacementGroupRequest request;
  wire::PlacementGroupSpecToProto(spec, &request);
  request.set_request_id(client::NewRequestId("pg"));
  return request;
}

int RunCreate(const CommonClusterArgs& common, const CreateArgs& args) {
  auto request = BuildCreateRequest(args);
  if (!request.ok()) return ReportError(request.status());
  auto start = StartClusterCommand(common, args.wait, absl::ZeroDuration());
  if (!start.ok()) return ReportError(start.status());
  const absl::Duration wait = start->wait;
  client::ClusterClient& c = *start->client;

  auto created = client::CreatePlacementGroupAndWait(c, *request, wait);
  if (!created.ok()) return ReportError(created.status());
  const PlacementGroupInfo& info = *created;
  if (args.json) {
    std::cout << MessageJson(info).dump(2) << "\n";
  } else {
    std::cout << PlacementGroupText(info);
  }
  if (wait > absl::ZeroDuration() && info.state() != tessera::v1::PLACEMENT_GROUP_STATE_CREATED) {
    return ReportError(absl::StrCat(
        "placement group ", info.name(), " is ",
        std::string(rpc::PlacementGroupStateName(info.state())),
        info.state() == tessera::v1::PLACEMENT_GROUP_STATE_INFEASIBLE ? "" : " after waiting",
        info.explanation().empty() ? "" : ": ", info.explanation()));
  }
  return 0;
}

int RunList(const CommonClusterArgs& common, bool json) {
  auto client = ConnectCluster(common);
  if (!client.ok()) return ReportError(client.status());
  auto groups = (*client)->ListPlacementGroups();
  if (!groups.ok()) return ReportError(groups.status());
  if (json) {
    std::cout << MessageJson(*groups).dump(2) << "\n";
  } else {
    std::cout << PlacementGroupsTable(*groups);
  }
  return 0;
}

int RunRemove(const CommonClusterArgs& common, const std::string& name) {
  auto client = ConnectCluster(common);
  if (!client.ok()) return ReportError(client.status());
  auto response = client::RemovePlacementGroupNamed(**client, name);
  if (!response.ok()) return ReportError(response.status());
  std::cout << "Removed placement group " << name << " (" << response->released_size() << " bundle"
            << (response->released_size() == 1 ? "" : "s") << " released).\n";
  return 0;
}

}  // namespace

void AddPlacementGroupCommand(CLI::App& app, int& exit_code) {
  auto common = std::make_shared<CommonClusterArgs>();
  CLI::App* pg = app.add_subcommand("pg", "Create, list and remove placement groups");
  pg->require_subcommand(1);

  auto create = std::make_shared<CreateArgs>();
  CLI::App* cmd = pg->add_subcommand("create", "Reserve bundles together (all or nothing)");
  cmd->add_option("NAME", create->name, "Group name")->required();
  cmd->add_option("--strategy", create->strategy, "PACK, SPREAD, STRICT_PACK or STRICT_SPREAD")
      ->type_name("S");
  cmd->add_option("--bundles", create->bundles, "Bundles separated by ';': \"CPU=1,GPU=2;CPU=1\"")
      ->type_name("LIST")
      ->required();
  cmd->add_option("--bundle-selector", create->bundle_selectors,
                  "Label selector per bundle, in order, separated by ';' or repeated")
      ->type_name("SEL")
      ->allow_extra_args(false);
  cmd->add_option("--fallback", create->fallbacks,
                  "Alternative bundles tried in order: \"CPU=1;CPU=1\" or with selectors "
                  "\"CPU=1;CPU=1|zone=a;zone=a\"")
      ->type_name("BUNDLES")
      ->allow_extra_args(false);
  cmd->add_option("--same-label", create->same_label,
                  "Every bundle on nodes that share one value of this label key (one rack, one "
                  "NVLink domain)")
      ->type_name("KEY");
  cmd->add_option("--wait", create->wait, "Wait until the group is created (e.g. 30s)")
      ->type_name("DUR");
  cmd->add_flag("--json", create->json, "Print JSON for programs");
  AddCommonClusterFlags(*cmd, *common);
  cmd->callback([common, create, &exit_code] { exit_code = RunCreate(*common, *create); });

  auto list_json = std::make_shared<bool>(false);
  CLI::App* list = pg->add_subcommand("list", "List placement groups");
  list->add_flag("--json", *list_json, "Print JSON for programs");
  AddCommonClusterFlags(*list, *common);
  list->callback([common, list_json, &exit_code] { exit_code = RunList(*common, *list_json); });

  auto remove_name = std::make_shared<std::string>();
  CLI::App* remove =
      pg->add_subcommand("remove", "Remove a placement group, releasing its bundles");
  remove->add_option("NAME", *remove_name, "Group name")->required();
  AddCommonClusterFlags(*remove, *common);
  remove->callback(
      [common, remove_name, &exit_code] { exit_code = RunRemove(*common, *remove_name); });
}

}  // namespace tessera::cli

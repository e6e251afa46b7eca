// tessera slice reserve NAME --accelerator TPU-V6E --topology 4x4 [--num-slices K] [--per-chip]
//                            [--sub-slice] [--fallback TYPE:TOPO[:K]]... [--wait DUR] [--json]
// tessera slice reserve NAME --nvlink-hosts N [--wait DUR]
//   either form: [--domain NAME] [--selector SEL]
// tessera slice release NAME
// tessera slice list [--json]
// Whole TPU slices (or hosts of one NVLink domain) reserved on a running cluster: every host of
// the slice or none, decided by the head. Shapes are checked here first so a typo costs no call.
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "cli/cluster_args.h"
#include "cli/cluster_command_start.h"
#include "cli/cluster_format.h"
#include "cli/cluster_views.h"
#include "cli/commands.h"
#include "cli/slice_flags.h"
#include "client/cluster_client.h"
#include "client/reservation_calls.h"
#include "labels/label_selector.h"
#include "resources/resource_set.h"
#include "rpc/state_names.h"
#include "wire/proto_convert.h"

namespace tessera::cli {
namespace {

using tessera::v1::SliceGroupInfo;

struct ReserveArgs {
  std::string name;
  std::string accelerator;
  std::string topology;
  int num_slices = 1;
  bool per_chip = false;
  int nvlink_hosts = 0;
  std::string per_host;
  std::vector<std::string> fallbacks;
  bool sub_slice = false;
  std::string domain;
  std::string selector;
  std::string wait;
  bool json = false;
};

absl::StatusOr<tessera::v1::ReserveSlicesRequest> BuildReserveRequest(const ReserveArgs& args) {
  tessera::v1::ReserveSlicesRequest request;
  if (Trim(args.name).empty()) return absl::InvalidArgumentError("NAME: must not be empty");
  request.set_request_id(client::NewRequestId("slice"));
  request.set_name(args.name);
  if (args.nvlink_hosts > 0) {
    if (!args.accelerator.empty() || !args.topology.empty()) {
      return absl::InvalidArgumentError(
          "--nvlink-hosts reserves hosts of one NVLink domain; it takes no --accelerator or "
          "--topology");
    }
    if (args.per_host.empty()) {
      return absl::InvalidArgumentError(
          "--nvlink-hosts needs --per-host: what each host must hold, e.g. --per-host GPU=4");
    }
    request.add_alternatives()->set_nvlink_hosts(args.nvlink_hosts);
  } else if (args.nvlink_hosts < 0) {
    return absl::InvalidArgumentError("--nvlink-hosts: must be positive");
  } else {
    if (args.accelerator.empty() || args.topology.empty()) {
      return absl::InvalidArgumentError(
          "give --accelerator and --topology (e.g. --accelerator TPU-V6E --topology 4x4), or "
          "--nvlink-hosts N");
    }
    const char* what = "--accelerator/--topology";
    TESSERA_ASSIGN_OR_RETURN(const SliceShape shape,
                             ParseSliceFlags(what, args.accelerator, args.topology));
    TESSERA_ASSIGN_OR_RETURN(
        *request.add_alternatives(),
        client::TpuSliceAlternative(what, shape, args.num_slices, args.per_chip));
  }
  for (const std::string& text : args.fallbacks) {
    const std::string what = absl::StrCat("--fallback ", Quote(text));
    std::vector<std::string> parts = absl::StrSplit(text, ':');
    if (parts.size() < 2 || parts.size() > 3) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": expected TYPE:TOPOLOGY[:SLICES], e.g. TPU-V6E:4x8:2"));
    }
    int k = 1;
    if (parts.size() == 3 && (!absl::SimpleAtoi(parts[2], &k) || k < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ", Quote(parts[2]), " is not a number of slices"));
    }
    TESSERA_ASSIGN_OR_RETURN(const SliceShape shape, ParseSliceFlags(what, parts[0], parts[1]));
    TESSERA_ASSIGN_OR_RETURN(*request.add_alternatives(),
                             client::TpuSliceAlternative(what, shape, k, args.per_chip));
  }
  if (!args.per_host.empty()) {
    auto per_host = ParseResourceSet(args.per_host);
    if (!per_host.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--per-host: ", per_host.status().message()));
    }
    for (tessera::v1::SliceAlternative& alt : *request.mutable_alternatives()) {
      wire::ResourcesToProto(*per_host, alt.mutable_per_host());
    }
  }
  if (args.sub_slice && args.nvlink_hosts > 0) {
    return absl::InvalidArgumentError("--sub-slice takes blocks of TPU slices, not NVLink hosts");
  }
  std::optional<LabelSelector> selector;
  if (!args.selector.empty()) {
    auto parsed = ParseLabelSelector(args.selector);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--selector: ", parsed.status().message()));
    }
    selector = *std::move(parsed);
  }
  client::RestrictSliceAlternatives(request, args.domain, selector, args.sub_slice);
  return request;
}

int RunReserve(const CommonClusterArgs& common, const ReserveArgs& args) {
  auto request = BuildReserveRequest(args);
  if (!request.ok()) return ReportError(request.status());
  auto start = StartClusterCommand(common, args.wait, absl::ZeroDuration());
  if (!start.ok()) return ReportError(start.status());
  const absl::Duration wait = start->wait;
  client::ClusterClient& c = *start->client;
  auto reserved = client::ReserveSlicesAndWait(c, *request, wait);
  if (!reserved.ok()) return ReportError(reserved.status());
  const SliceGroupInfo& info = *reserved;
  if (args.json) {
    std::cout << MessageJson(info).dump(2) << "\n";
  } else {
    std::cout << SliceGroupText(info);
  }
  if (wait > absl::ZeroDuration() && info.state() != tessera::v1::SLICE_GROUP_STATE_RESERVED) {
    return ReportError(
        absl::StrCat("slice reservation ", info.name(), " is ",
                     std::string(rpc::SliceGroupStateName(info.state())),
                     info.state() == tessera::v1::SLICE_GROUP_STATE_PENDING ? " after waiting" : "",
                     info.explanation().empty() ? "" : ": ", info.explanation()));
  }
  return 0;
}

int RunRelease(const CommonClusterArgs& common, const std::string& name) {
  auto client = ConnectCluster(common);
  if (!client.ok()) return ReportError(client.status());
  auto response = client::ReleaseSlicesNamed(**client, name);
  if (!response.ok()) return ReportError(response.status());
  std::cout << "Released slice reservation " << name << " (" << response->released_size() << " host"
            << (response->released_size() == 1 ? "" : "s") << ").\n";
  return 0;
}

int RunList(const CommonClusterArgs& common, bool json) {
  auto client = ConnectCluster(common);
  if (!client.ok()) return ReportError(client.status());
  auto slices = (*client)->ListSlices();
  if (!slices.ok()) return ReportError(slices.status());
  if (json) {
    std::cout << MessageJson(*slices).dump(2) << "\n";
  } else {
    std::cout << SlicesTables(*slices);
  }
  return 0;
}

}  // namespace

void AddSliceCommand(CLI::App& app, int& exit_code) {
  auto common = std::make_shared<CommonClusterArgs>();
  CLI::App* slice = app.add_subcommand("slice", "Reserve and release whole TPU slices");
  slice->require_subcommand(1);

  auto reserve = std::make_shared<ReserveArgs>();
  CLI::App* cmd = slice->add_subcommand(
      "reserve", "Reserve whole slices (every host or none), or hosts of one NVLink domain");
  cmd->add_option("NAME", reserve->name, "Reservation name")->required();
  cmd->add_option("--accelerator", reserve->accelerator, "TPU generation: TPU-V6E, v5e, ...")
      ->type_name("TYPE");
  cmd->add_option("--topology", reserve->topology, "Slice shape: 4x4, 2x2x2, ...")
      ->type_name("TOPO");
  cmd->add_option("--num-slices", reserve->num_slices, "Distinct slices to reserve (multislice)")
      ->type_name("K");
  cmd->add_flag("--per-chip", reserve->per_chip, "One bundle per chip instead of one per host");
  cmd->add_option("--nvlink-hosts", reserve->nvlink_hosts,
                  "Reserve N hosts of one NVLink domain instead of a slice")
      ->type_name("N");
  cmd->add_option("--per-host", reserve->per_host,
                  "Resources each host's bundle holds besides its chips; with --nvlink-hosts, "
                  "what each host must hold (e.g. GPU=4,CPU=8)")
      ->type_name("LIST");
  cmd->add_option("--fallback", reserve->fallbacks,
                  "Alternative tried in order when the shape above cannot be reserved now: "
                  "TYPE:TOPO[:K]")
      ->type_name("ALT")
      ->allow_extra_args(false);
  cmd->add_flag("--sub-slice", reserve->sub_slice,
                "Take ICI-contiguous blocks of the topology inside larger slices (a 2x4 in a "
                "4x4), named <slice>/<block>");
  cmd->add_option("--domain", reserve->domain,
                  "Only this slice (tessera.io/tpu-slice-name) or, with --nvlink-hosts, this "
                  "NVLink domain")
      ->type_name("NAME");
  cmd->add_option("--selector", reserve->selector,
                  "Only slices whose every host matches this label selector (with "
                  "--nvlink-hosts: hosts that match it), e.g. tessera.io/availability-zone=b")
      ->type_name("SEL");
  cmd->add_option("--wait", reserve->wait, "Wait until reserved (e.g. 30s)")->type_name("DUR");
  cmd->add_flag("--json", reserve->json, "Print JSON for programs");
  AddCommonClusterFlags(*cmd, *common);
  cmd->callback([common, reserve, &exit_code] { exit_code = RunReserve(*common, *reserve); });

  auto release_name = std::make_shared<std::string>();
  CLI::App* release = slice->add_subcommand("release", "Release a slice reservation");
  release->add_option("NAME", *release_name, "Reservation name")->required();
  AddCommonClusterFlags(*release, *common);
  release->callback(
      [common, release_name, &exit_code] { exit_code = RunRelease(*common, *release_name); });

  auto list_json = std::make_shared<bool>(false);
  CLI::App* list = slice->add_subcommand("list", "List slices and slice reservations");
  list->add_flag("--json", *list_json, "Print JSON for programs");
  AddCommonClusterFlags(*list, *common);
  list->callback([common, list_json, &exit_code] { exit_code = RunList(*common, *list_json); });
}

}  // namespace tessera::cli

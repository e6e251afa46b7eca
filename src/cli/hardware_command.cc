// tessera hardware [--json] [--sysroot DIR] [--simulate FILE] [--nvml-library PATH]
//                  [--resources LIST] [--labels LIST] [--label-selector EXPR]...
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "cli/commands.h"
#include "cli/hardware_report.h"
#include "cli/selector_check.h"
#include "hardware/node_discovery.h"
#include "labels/fallback.h"
#include "labels/label_selector.h"
#include "resources/resource_set.h"

namespace tessera::cli {

void AddHardwareCommand(CLI::App& app, int& exit_code) {
  struct Args {
    bool json = false;
    std::string sysroot = "/";
    std::string simulate;
    std::string nvml_library;
    std::string resources;
    std::string labels;
    std::vector<std::string> selectors;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "hardware", "Show the accelerators, links, host topology, resources and labels of this node");
  cmd->add_flag("--json", args->json, "Print JSON for programs");
  cmd->add_option("--sysroot", args->sysroot, "Read Linux paths (/sys, /dev, /proc) under DIR")
      ->type_name("DIR");
  cmd->add_option("--simulate", args->simulate, "Use a simulated hardware description (YAML)")
      ->type_name("FILE");
  cmd->add_option("--nvml-library", args->nvml_library,
                  "NVML library to load (default: $TESSERA_NVML_LIBRARY, else libnvidia-ml.so.1)")
      ->type_name("PATH");
  cmd->add_option("--resources", args->resources,
                  "Resources this node has, beating detection: CPU=8,GPU=4,memory=64GiB")
      ->type_name("LIST");
  cmd->add_option("--labels", args->labels, "Labels to add: key=value,other=value")
      ->type_name("LIST");
  cmd->add_option("--label-selector", args->selectors,
                  "Check a selector against this node (repeat for fallbacks, in order): "
                  "'tessera.io/accelerator-type=in(H100,A100)'")
      ->type_name("EXPR");
  cmd->callback([args, &exit_code] {
    DiscoveryOptions options;
    auto resources = ParseResourceSet(args->resources);
    if (!resources.ok()) {
      exit_code = ReportError(absl::StrCat("--resources: ", resources.status().message()));
      return;
    }
    options.resource_overrides = *std::move(resources);
    auto labels = ParseLabels(args->labels, LabelOrigin::kUser);
    if (!labels.ok()) {
      exit_code = ReportError(absl::StrCat("--labels: ", labels.status().message()));
      return;
    }
    options.user_labels = *std::move(labels);
    std::vector<LabelSelector> selectors;
    for (const std::string& text : args->selectors) {
      auto selector = ParseLabelSelector(text);
      if (!selector.ok()) {
        exit_code = ReportError(absl::StrCat("--label-selector: ", selector.status().message()));
        return;
      }
      selectors.push_back(*std::move(selector));
    }
    options.sysroot = args->sysroot;
    if (!args->simulate.empty()) options.simulate_file = args->simulate;
    options.detection.nvml_library = args->nvml_library;
    // Tool configuration comes from this process even when --sysroot names a fake tree (whose
    // own environment is its proc/1/environ).
    if (const char* nvml = std::getenv("TESSERA_NVML_LIBRARY");
        options.detection.nvml_library.empty() && nvml != nullptr) {
      options.detection.nvml_library = nvml;
    }
    auto node = DiscoverNode(options);
    if (!node.ok()) {
      exit_code = ReportError(ToStd(node.status().message()));
      return;
    }
    std::optional<SelectorCheck> check;
    if (!selectors.empty()) {
      check = CheckSelector(FallbackList::FromSelectors(std::move(selectors)), node->labels);
    }
    if (args->json) {
      nlohmann::json report = HardwareReportJson(*node);
      if (check.has_value()) report["label_selector"] = SelectorCheckJson(*check);
      std::cout << report.dump(2) << "\n";
    } else {
      std::cout << HardwareReportText(*node);
      if (check.has_value()) std::cout << SelectorCheckText(*check);
    }
    exit_code = 0;
  });
}

}  // namespace tessera::cli

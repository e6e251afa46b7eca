// tessera hardware [--json] [--sysroot DIR] [--simulate FILE] [--nvml-library PATH]
#include <cstdlib>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "base/string_util.h"
#include "cli/hardware_report.h"
#include "hardware/node_discovery.h"

namespace tessera::cli {

void AddHardwareCommand(CLI::App& app, int& exit_code) {
  struct Args {
    bool json = false;
    std::string sysroot = "/";
    std::string simulate;
    std::string nvml_library;
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
  cmd->callback([args, &exit_code] {
    DiscoveryOptions options;
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
    if (args->json) {
      std::cout << HardwareReportJson(*node).dump(2) << "\n";
    } else {
      std::cout << HardwareReportText(*node);
    }
    exit_code = 0;
  });
}

}  // namespace tessera::cli

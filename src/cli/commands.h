// Every `tessera` subcommand registers itself on the root app through one of these functions;
// main.cc lists them once. A command's callback stores its exit code in `exit_code`.
#pragma once

#include <CLI/CLI.hpp>
#include <string_view>

#include "absl/status/status.h"

namespace tessera::cli {

void AddHardwareCommand(CLI::App& app, int& exit_code);
void AddDescribeSliceCommand(CLI::App& app, int& exit_code);
void AddScheduleCommand(CLI::App& app, int& exit_code);
// Commands on a running cluster (cluster_client.h).
void AddPlacementGroupCommand(CLI::App& app, int& exit_code);
void AddSliceCommand(CLI::App& app, int& exit_code);
void AddListCommand(CLI::App& app, int& exit_code);
void AddStatusCommand(CLI::App& app, int& exit_code);
void AddEventsCommand(CLI::App& app, int& exit_code);
void AddTimelineCommand(CLI::App& app, int& exit_code);
void AddDashboardCommand(CLI::App& app, int& exit_code);
void AddLogsCommand(CLI::App& app, int& exit_code);
void AddRunCommand(CLI::App& app, int& exit_code);
void AddTrainCommand(CLI::App& app, int& exit_code);
void AddJobCommand(CLI::App& app, int& exit_code);
void AddStartCommand(CLI::App& app, int& exit_code);
void AddStopCommand(CLI::App& app, int& exit_code);
void AddUpCommand(CLI::App& app, int& exit_code);
void AddDownCommand(CLI::App& app, int& exit_code);
// `tessera serve ...`: Ray Serve's CLI, the package's Python script (python/tessera/serve).
void AddServeCommand(CLI::App& app, int& exit_code);

// Prints "tessera: error: <message>" on one line to stderr and returns the exit code for
// bad input (1).
int ReportError(std::string_view message);
// The same for a failed status: its message, whatever its code.
inline int ReportError(const absl::Status& status) {
  return ReportError(std::string_view(status.message().data(), status.message().size()));
}

}  // namespace tessera::cli

// The `tessera` command.
#include <iostream>

#include "absl/synchronization/mutex.h"
#include "cli/commands.h"

int main(int argc, char** argv) {
#ifdef NDEBUG
  // Debian's Abseil checks every mutex acquisition against a global lock-order graph (its debug
  // default), which took a large share of the head's CPU per placement group. Tests keep the check.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
  CLI::App app("Tessera: an accelerator-native distributed runtime.", "tessera");
  app.require_subcommand(1);
  app.set_version_flag("--version", "tessera 0.1.0");
  int exit_code = 0;
  tessera::cli::AddHardwareCommand(app, exit_code);
  tessera::cli::AddDescribeSliceCommand(app, exit_code);
  tessera::cli::AddScheduleCommand(app, exit_code);
  tessera::cli::AddStartCommand(app, exit_code);
  tessera::cli::AddStopCommand(app, exit_code);
  tessera::cli::AddUpCommand(app, exit_code);
  tessera::cli::AddDownCommand(app, exit_code);
  tessera::cli::AddRunCommand(app, exit_code);
  tessera::cli::AddTrainCommand(app, exit_code);
  tessera::cli::AddJobCommand(app, exit_code);
  tessera::cli::AddServeCommand(app, exit_code);
  tessera::cli::AddPlacementGroupCommand(app, exit_code);
  tessera::cli::AddSliceCommand(app, exit_code);
  tessera::cli::AddStatusCommand(app, exit_code);
  tessera::cli::AddEventsCommand(app, exit_code);
  tessera::cli::AddTimelineCommand(app, exit_code);
  tessera::cli::AddDashboardCommand(app, exit_code);
  tessera::cli::AddListCommand(app, exit_code);
  tessera::cli::AddLogsCommand(app, exit_code);
  // CLI11 reports through exceptions; they stop here, as one line each.
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion&) {
    std::cout << app.version() << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    if (what.empty()) what = "invalid command line";
    std::cerr << "tessera: error: " << what << " (see tessera --help)\n";
    return 2;
  }
  return exit_code;
}

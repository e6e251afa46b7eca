// tessera stop [--state-dir DIR] [--grace DUR]
// tessera down [--state-dir DIR] [--grace DUR]
// `stop` ends every head and node agent of one state folder on this machine, and their workers
// (cluster_stop.h). `down` does the same and then removes the state folder but its logs
// (state_folder_removal.h), so a local cluster from `tessera up` leaves no process behind, and
// of its files only the jobs', daemons' and workers' logs.
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/cluster_stop.h"
#include "cli/commands.h"
#include "cli/state_folder_removal.h"
#include "client/cluster_client.h"
#include "client/state_folder.h"

namespace tessera::cli {
namespace {

enum class AfterStop { kKeepFolder, kRemoveFolder };

struct StopArgs {
  std::string state_dir;
  std::string grace = "5s";
};

int RunStop(const StopArgs& args, AfterStop after) {
  auto trusted = client::TrustedStateFolder(args.state_dir);
  if (!trusted.ok()) return ReportError(trusted.status());
  const client::StateFolder state = *std::move(trusted);
  auto grace = client::ParseDurationFlag("--grace", args.grace);
  if (!grace.ok()) return ReportError(grace.status());
  std::error_code ec;
  if (!std::filesystem::exists(state.root, ec)) {
    std::cout << "Nothing to stop: " << state.root << " does not exist.\n";
    return 0;
  }
  auto report = StopCluster(state, StopOptions{.grace = *grace});
  if (!report.ok()) return ReportError(report.status());
  if (report->stopped.empty()) {
    std::cout << "Nothing was running with state folder " << state.root << ".\n";
  }
  for (const StoppedProcess& p : report->stopped) {
    std::cout << "Stopped " << p.what << " (pid " << p.pid << ", " << p.how << ").\n";
  }
  if (after == AfterStop::kRemoveFolder) {
    // Everything but the logs, which outlive the cluster: the jobs' (docs/train.md), and the
    // head's, agents' and workers', moved under <state>/logs/<time>/ (kept_logs.h).
    auto removed = RemoveStateFolder(state, RemovalOptions{});
    if (!removed.ok()) return ReportError(removed.status());
    for (const std::string& warning : removed->logs.warnings) {
      std::cerr << "warning: " << warning << "\n";
    }
    if (removed->nothing_to_remove) {
      std::cout << "Nothing to remove: " << state.root << " holds only the logs kept earlier.\n";
    } else if (removed->removed_folder) {
      std::cout << "Removed " << state.root << ".\n";
    } else {
      std::vector<std::string> kept;
      if (removed->kept_jobs) kept.push_back(absl::StrCat("job logs in ", state.JobsDir()));
      if (!removed->logs.folder.empty()) {
        kept.push_back(absl::StrCat("cluster logs in ", removed->logs.folder));
      }
      std::cout << "Removed " << state.root << " except its "
                << (kept.empty() ? std::string("kept logs in ") + state.LogsDir()
                                 : absl::StrJoin(kept, " and its "))
                << ".\n";
    }
  }
  return 0;
}

void AddStopLike(CLI::App& app, int& exit_code, const char* name, const char* help,
                 AfterStop after) {
  auto args = std::make_shared<StopArgs>();
  CLI::App* cmd = app.add_subcommand(name, help);
  cmd->add_option(
         "--state-dir", args->state_dir,
         "The cluster's state folder (default: $TESSERA_STATE_DIR, else ~/.local/state/tessera)")
      ->type_name("DIR");
  cmd->add_option("--grace", args->grace,
                  "How long each process gets to stop before SIGTERM, then SIGKILL")
      ->type_name("DUR");
  cmd->callback([args, after, &exit_code] { exit_code = RunStop(*args, after); });
}

}  // namespace

void AddStopCommand(CLI::App& app, int& exit_code) {
  AddStopLike(app, exit_code, "stop",
              "Stop the head, node agents and workers of a state folder on this machine",
              AfterStop::kKeepFolder);
}

void AddDownCommand(CLI::App& app, int& exit_code) {
  AddStopLike(app, exit_code, "down",
              "Stop a local cluster (tessera up) and remove its state folder but its logs",
              AfterStop::kRemoveFolder);
}

}  // namespace tessera::cli

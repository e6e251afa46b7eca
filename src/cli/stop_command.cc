// tessera stop [--state-dir DIR] [--grace DUR]
// tessera down [--state-dir DIR] [--grace DUR]
// `stop` ends every head and node agent of one state folder on this machine, and their workers
// (cluster_stop.h). `down` does the same and then removes the state folder, so a local cluster
// from `tessera up` leaves neither a process nor a file behind.
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "cli/cluster_client.h"
#include "cli/cluster_stop.h"
#include "cli/commands.h"
#include "cli/state_folder.h"

namespace tessera::cli {
namespace {

enum class AfterStop { kKeepFolder, kRemoveFolder };

struct StopArgs {
  std::string state_dir;
  std::string grace = "5s";
};

// Only a folder that holds what a cluster writes is removed, and never `/` or the home folder:
// `down --state-dir ~` by mistake must not delete anything of the user's.
bool LooksLikeStateFolder(const StateFolder& state) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path root = fs::weakly_canonical(state.root, ec);
  if (ec || !fs::is_directory(root, ec) || root == root.root_path()) return false;
  if (const char* home = std::getenv("HOME");
      home != nullptr && fs::equivalent(root, fs::path(home), ec)) {
    return false;
  }
  for (const char* marker : {"token", "head.address", "head.pid", "nodes", "jobs"}) {
    if (fs::exists(root / marker, ec)) return true;
  }
  return false;
}

int RunStop(const StopArgs& args, AfterStop after) {
  auto trusted = TrustedStateFolder(args.state_dir);
  if (!trusted.ok()) return ReportError(trusted.status());
  const StateFolder state = *std::move(trusted);
  auto grace = ParseDurationFlag("--grace", args.grace);
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
    if (!LooksLikeStateFolder(state)) {
      return ReportError(absl::StrCat(
          state.root, " holds files a cluster does not write; not removing it (remove it yourself "
                      "if it is yours)"));
    }
    // Everything but the jobs' logs, which outlive the cluster (docs/train.md).
    bool kept_jobs = false;
    for (const auto& entry : std::filesystem::directory_iterator(state.root, ec)) {
      if (entry.path() == std::filesystem::path(state.JobsDir())) {
        kept_jobs = true;
        continue;
      }
      std::filesystem::remove_all(entry.path(), ec);
      if (ec) {
        return ReportError(absl::StrCat("cannot remove ", entry.path().string(), ": ", ec.message()));
      }
    }
    if (!kept_jobs) std::filesystem::remove(state.root, ec);
    if (ec) return ReportError(absl::StrCat("cannot remove ", state.root, ": ", ec.message()));
    if (kept_jobs) {
      std::cout << "Removed " << state.root << " except its job logs, kept in " << state.JobsDir()
                << ".\n";
    } else {
      std::cout << "Removed " << state.root << ".\n";
    }
  }
  return 0;
}

void AddStopLike(CLI::App& app, int& exit_code, const char* name, const char* help,
                 AfterStop after) {
  auto args = std::make_shared<StopArgs>();
  CLI::App* cmd = app.add_subcommand(name, help);
  cmd->add_option("--state-dir", args->state_dir,
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
              "Stop a local cluster (tessera up) and remove its state folder",
              AfterStop::kRemoveFolder);
}

}  // namespace tessera::cli

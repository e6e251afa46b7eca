#include "cli/state_folder_removal.h"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;

constexpr char kJobs[] = "jobs";
constexpr char kLogs[] = "logs";

// Only a folder that holds what a cluster writes is removed, and never `/` or the home folder.
bool LooksLikeStateFolder(const client::StateFolder& state) {
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

}  // namespace

absl::StatusOr<RemovalReport> RemoveStateFolder(const client::StateFolder& state,
                                                const RemovalOptions& options) {
  RemovalReport report;
  std::error_code ec;
  std::vector<fs::path> entries;
  bool has_jobs = false;
  bool has_logs = false;
  for (const auto& entry : fs::directory_iterator(state.root, ec)) {
    const std::string name = entry.path().filename().string();
    has_jobs |= name == kJobs;
    has_logs |= name == kLogs;
    entries.push_back(entry.path());
  }
  if (ec) return absl::InternalError(absl::StrCat("cannot list ", state.root, ": ", ec.message()));
  const size_t kept_entries = (has_jobs ? 1 : 0) + (has_logs ? 1 : 0);
  if (!entries.empty() && entries.size() == kept_entries) {
    report.nothing_to_remove = true;
    report.kept_jobs = has_jobs;
    return report;
  }
  if (!LooksLikeStateFolder(state)) {
    return absl::FailedPreconditionError(
        absl::StrCat(state.root,
                     " holds files a cluster does not write; not removing it (remove it yourself "
                     "if it is yours)"));
  }
  auto logs = KeepClusterLogs(state, {.now = options.now, .keep = options.keep_logs});
  if (!logs.ok()) {
    return absl::Status(logs.status().code(),
                        absl::StrCat(logs.status().message(), "; nothing removed"));
  }
  report.logs = *std::move(logs);
  // An empty logs/ (a cluster that wrote no log) goes with the rest.
  const bool keeps_logs = fs::is_directory(fs::symlink_status(state.LogsDir(), ec)) &&
                          !fs::is_empty(state.LogsDir(), ec);
  for (const fs::path& path : entries) {
    const std::string name = path.filename().string();
    if (name == kJobs || (name == kLogs && keeps_logs)) continue;
    fs::remove_all(path, ec);  // removes links, never their targets
    if (ec) {
      return absl::InternalError(absl::StrCat("cannot remove ", path.string(), ": ", ec.message()));
    }
  }
  report.kept_jobs = has_jobs;
  if (!has_jobs && !keeps_logs) {
    fs::remove(state.root, ec);
    if (ec) {
      return absl::InternalError(absl::StrCat("cannot remove ", state.root, ": ", ec.message()));
    }
    report.removed_folder = true;
  }
  return report;
}

}  // namespace tessera::cli

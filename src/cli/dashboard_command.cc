// tessera dashboard [--open] [--state-dir DIR] [--address HOST:PORT] [--token-file FILE]
// The head's dashboard for this user's browser, with no token in any URL: asks the head, over
// its mutually authenticated gRPC port (never the HTTP one, so the token goes to no process
// that has not proved it holds it), for a one-time login ticket, good for 60 s, and prints
//   http://127.0.0.1:8265/#login=<ticket>
// The page spends the ticket for a session kept in its tab (docs/observability.md), and takes
// the ticket out of the address. --open opens it in the browser ($BROWSER, else xdg-open)
// through a 0600 redirect page in the state folder, <state>/dashboard-open.html, so the ticket
// is never in a process's arguments, where every local user can read it (ps).
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cli/cluster_args.h"
#include "cli/commands.h"
#include "client/cluster_client.h"
#include "process/private_paths.h"

extern char** environ;

namespace tessera::cli {
namespace {

struct DashboardArgs {
  CommonClusterArgs common;
  bool open = false;
};

// The login URL: the head's HTTP address and a fresh ticket, both from the head over its
// mutually authenticated gRPC port (so the token is never sent to an HTTP port, whoever
// listens there).
absl::StatusOr<std::string> LoginUrl(client::ClusterClient& cluster) {
  absl::StatusOr<tessera::v1::CreateDashboardLoginResponse> login = cluster.CreateDashboardLogin();
  if (!login.ok()) return login.status();
  return absl::StrCat("http://", login->http_address(), "/#login=", login->ticket());
}

// Opens `page` (a file path) with $BROWSER or xdg-open, and waits for the opener to return.
absl::Status OpenInBrowser(const std::string& page) {
  const char* browser = std::getenv("BROWSER");
  const std::string opener = browser != nullptr && *browser != '\0' ? browser : "xdg-open";
  const std::string url = absl::StrCat("file://", page);
  std::vector<char*> argv = {const_cast<char*>(opener.c_str()), const_cast<char*>(url.c_str()),
                             nullptr};
  pid_t pid = 0;
  if (const int rc = posix_spawnp(&pid, opener.c_str(), nullptr, nullptr, argv.data(), environ);
      rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot run ", opener, " to open the browser"));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::UnavailableError(
        absl::StrCat(opener, " could not open a browser; open ", page, " yourself"));
  }
  return absl::OkStatus();
}

int RunDashboard(const DashboardArgs& args) {
  auto cluster = ConnectCluster(args.common);
  if (!cluster.ok()) return ReportError(cluster.status());
  absl::StatusOr<std::string> url = LoginUrl(**cluster);
  if (!url.ok()) return ReportError(url.status());
  if (!args.open) {
    std::cout << *url << "\n(one-time login, good for 60 s)\n";
    return 0;
  }
  // A page of this user only that sends the browser on: the ticket stays out of argv.
  const std::string page = (*cluster)->state().root + "/dashboard-open.html";
  const std::string html = absl::StrCat(
      "<!doctype html><meta charset=\"utf-8\"><meta name=\"referrer\" content=\"no-referrer\">"
      "<meta http-equiv=\"refresh\" content=\"0;url=",
      *url,
      "\">"
      "<title>Tessera dashboard</title><p><a href=\"",
      *url, "\">Open the dashboard</a></p>\n");
  if (absl::Status written = WritePrivateFileAtomically(page, html); !written.ok()) {
    return ReportError(written);
  }
  if (absl::Status opened = OpenInBrowser(page); !opened.ok()) return ReportError(opened);
  std::cout << "Opened the dashboard (one-time login, good for 60 s): " << page << "\n";
  return 0;
}

}  // namespace

void AddDashboardCommand(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<DashboardArgs>();
  CLI::App* cmd = app.add_subcommand(
      "dashboard", "The head's dashboard: a URL with a one-time login (no token in it)");
  cmd->add_flag("--open", args->open,
                "Open it in the browser ($BROWSER, else xdg-open) through a private page");
  AddCommonClusterFlags(*cmd, args->common);
  cmd->callback([args, &exit_code] { exit_code = RunDashboard(*args); });
}

}  // namespace tessera::cli

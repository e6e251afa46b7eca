#include "cli/cluster_stop.h"

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "client/cluster_client.h"

namespace tessera::cli {
namespace {

struct Target {
  std::string what;
  int pid = 0;
  std::string address;             // "" when unknown
  std::vector<std::string> files;  // pid and address files to remove once it is gone
  bool is_worker = false;
  std::string worker_argv0;  // workers: what /proc/<pid>/cmdline must start with
  std::string how;
};

std::string Argv0(int pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/cmdline"), std::ios::binary);
  std::string argv0;
  std::getline(in, argv0, '\0');
  return argv0;
}

// A pid may be signalled only while it is still the process we mean.
bool StillOurs(const Target& t, const client::StateFolder& state) {
  if (!client::ProcessAlive(t.pid)) return false;
  if (!t.is_worker) return client::IsTesseraStartProcess(t.pid, state);
  return Argv0(t.pid) == t.worker_argv0;
}

// Waits until none of `targets` is alive or `grace` has passed. True when all are gone.
bool WaitGone(const std::vector<Target>& targets, const client::StateFolder& state,
              absl::Duration grace) {
  const absl::Time until = absl::Now() + grace;
  while (true) {
    bool any = false;
    for (const Target& t : targets) any = any || StillOurs(t, state);
    if (!any) return true;
    if (absl::Now() >= until) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

void SignalAll(std::vector<Target>& targets, const client::StateFolder& state, int sig,
               const char* how) {
  for (Target& t : targets) {
    if (StillOurs(t, state) && kill(t.pid, sig) == 0) t.how = how;
  }
}

}  // namespace

absl::StatusOr<StopReport> StopCluster(const client::StateFolder& state,
                                       const StopOptions& options) {
  std::vector<Target> daemons;
  for (const std::string& node : client::NodeIdsInStateFolder(state)) {
    const auto pid = client::ReadPidFile(state.AgentPidFile(node));
    Target t{.what = absl::StrCat("node agent ", node), .pid = pid.value_or(0)};
    t.address = client::ReadFirstLine(state.AgentAddressFile(node)).value_or("");
    t.files = {state.AgentPidFile(node), state.AgentAddressFile(node)};
    daemons.push_back(std::move(t));
  }
  {
    const auto pid = client::ReadPidFile(state.HeadPidFile());
    Target head{.what = "head", .pid = pid.value_or(0)};
    head.address = client::ReadFirstLine(state.HeadAddressFile()).value_or("");
    head.files = {state.HeadPidFile(), state.HeadAddressFile()};
    daemons.push_back(std::move(head));
  }

  client::ClusterClientOptions client_options;
  client_options.state_dir = state.root;
  client_options.head = client::HeadRequirement::kOptional;
  client_options.call_deadline = absl::Seconds(2);
  auto client = client::ClusterClient::Connect(client_options);
  if (!client.ok()) return client.status();
  client::ClusterClient& c = **client;

  // Workers are remembered before their agents go, in case an agent has to be killed and
  // cannot stop them itself.
  std::vector<Target> workers;
  for (Target& t : daemons) {
    if (t.what == "head" || t.address.empty() || !StillOurs(t, state)) continue;
    tessera::v1::ListWorkersResponse response;
    const absl::Status listed =
        c.Call(t.what, client::Retry::kNever, [&](grpc::ClientContext* ctx) {
          return c.agent(t.address).ListWorkers(ctx, tessera::v1::ListWorkersRequest(), &response);
        });
    if (!listed.ok()) continue;
    for (const auto& w : response.workers()) {
      if (w.state() != tessera::v1::WORKER_STATE_RUNNING || w.pid() <= 1 || w.argv().empty()) {
        continue;
      }
      Target worker{.what = absl::StrCat("worker ", w.worker_id(), " of ", t.what), .pid = w.pid()};
      worker.is_worker = true;
      worker.worker_argv0 = w.argv(0);
      workers.push_back(std::move(worker));
    }
  }

  // Agents first, so none of them reports to a head that is going away.
  for (Target& t : daemons) {
    if (t.address.empty() || !StillOurs(t, state)) continue;
    tessera::v1::ShutdownResponse response;
    const absl::Status asked = c.Call(t.what, client::Retry::kNever, [&](grpc::ClientContext* ctx) {
      if (t.what == "head")
        return c.head_admin().Shutdown(ctx, tessera::v1::ShutdownRequest(), &response);
      return c.agent(t.address).Shutdown(ctx, tessera::v1::ShutdownRequest(), &response);
    });
    if (asked.ok()) t.how = "shut down";
  }
  if (!WaitGone(daemons, state, options.grace)) {
    SignalAll(daemons, state, SIGTERM, "SIGTERM");
    if (!WaitGone(daemons, state, options.grace)) {
      SignalAll(daemons, state, SIGKILL, "SIGKILL");
      WaitGone(daemons, state, options.grace);
    }
  }
  // An agent that stopped cleanly has ended its workers; kill what is left of the others.
  SignalAll(workers, state, SIGKILL, "SIGKILL");
  WaitGone(workers, state, options.grace);

  StopReport report;
  for (std::vector<Target>* list : {&daemons, &workers}) {
    for (Target& t : *list) {
      if (StillOurs(t, state)) {
        return absl::InternalError(
            absl::StrCat(t.what, " (pid ", t.pid, ") is still running after SIGKILL"));
      }
      std::error_code ec;
      for (const std::string& f : t.files) std::filesystem::remove(f, ec);
      if (!t.how.empty()) report.stopped.push_back({t.what, t.pid, t.how});
    }
  }
  return report;
}

}  // namespace tessera::cli

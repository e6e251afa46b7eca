#include "cli/server_start.h"

#include <sys/wait.h>

#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "cli/daemon.h"
#include "client/cluster_client.h"

namespace tessera::cli {
namespace {

std::vector<std::string> WithSelf(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {SelfExecutable()};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// Calls to a server that is starting: short deadlines, no retries (the caller polls).
client::ClusterClientOptions ProbeOptions(const client::StateFolder& state,
                                          const std::string& head_address,
                                          const std::string& token_file) {
  client::ClusterClientOptions options;
  options.state_dir = state.root;
  options.head_address = head_address;
  options.token_file = token_file;
  options.head = client::HeadRequirement::kOptional;
  options.call_deadline = absl::Seconds(2);
  options.retry_budget = absl::ZeroDuration();
  return options;
}

}  // namespace

absl::Status CheckNoHeadRunning(const client::StateFolder& state) {
  const auto pid = client::ReadPidFile(state.HeadPidFile());
  if (pid.has_value() && client::ProcessAlive(*pid) && client::IsTesseraStartProcess(*pid, state)) {
    return absl::FailedPreconditionError(
        absl::StrCat("a head is already running with state folder ", state.root, " (pid ", *pid,
                     "); stop it with `tessera stop`, or give another --state-dir"));
  }
  return absl::OkStatus();
}

absl::Status CheckNoAgentRunning(const client::StateFolder& state, const std::string& node_id) {
  const auto pid = client::ReadPidFile(state.AgentPidFile(node_id));
  if (pid.has_value() && client::ProcessAlive(*pid) && client::IsTesseraStartProcess(*pid, state)) {
    return absl::FailedPreconditionError(
        absl::StrCat("node agent ", node_id, " is already running with state folder ", state.root,
                     " (pid ", *pid, "); stop it with `tessera stop`, or give another --node-id"));
  }
  return absl::OkStatus();
}

absl::StatusOr<StartedServer> StartHeadDaemon(const client::StateFolder& state,
                                              const std::vector<std::string>& args,
                                              absl::Duration timeout) {
  TESSERA_RETURN_IF_ERROR(CheckNoHeadRunning(state));
  std::error_code ec;
  // A stale address file would make a head that has not started yet look ready.
  std::filesystem::remove(state.HeadAddressFile(), ec);
  StartedServer head;
  head.log_file = state.HeadLogFile();
  TESSERA_ASSIGN_OR_RETURN(head.pid, SpawnDaemon(WithSelf(args), head.log_file));
  std::unique_ptr<client::ClusterClient> client;
  TESSERA_RETURN_IF_ERROR(
      WaitReady(head.pid, "the head", head.log_file, timeout, [&]() -> absl::Status {
        auto address = client::ReadFirstLine(state.HeadAddressFile());
        if (!address.ok() || address->empty()) {
          return absl::UnavailableError("its address file is not written yet");
        }
        if (client == nullptr || client->head_address() != *address) {
          auto connected = client::ClusterClient::Connect(ProbeOptions(state, *address, ""));
          if (!connected.ok()) return connected.status();
          client = *std::move(connected);
        }
        head.address = *address;
        return client->ListNodes().status();
      }));
  return head;
}

absl::StatusOr<StartedServer> SpawnAgentDaemon(const client::StateFolder& state,
                                               const std::string& node_id,
                                               const std::vector<std::string>& args) {
  TESSERA_RETURN_IF_ERROR(CheckNoAgentRunning(state, node_id));
  std::error_code ec;
  std::filesystem::remove(state.AgentAddressFile(node_id), ec);
  StartedServer agent;
  agent.node_id = node_id;
  agent.log_file = state.AgentLogFile(node_id);
  TESSERA_ASSIGN_OR_RETURN(agent.pid, SpawnDaemon(WithSelf(args), agent.log_file));
  return agent;
}

absl::Status WaitAgentsReady(const client::StateFolder& state, const std::string& head_address,
                             const std::string& token_file, std::vector<StartedServer>& agents,
                             absl::Duration timeout) {
  TESSERA_ASSIGN_OR_RETURN(
      std::unique_ptr<client::ClusterClient> client,
      client::ClusterClient::Connect(ProbeOptions(state, head_address, token_file)));
  const absl::Time until = absl::Now() + timeout;
  absl::Duration poll = absl::Milliseconds(10);
  std::set<size_t> waiting;
  for (size_t i = 0; i < agents.size(); ++i) waiting.insert(i);
  std::string last_problem;
  while (true) {
    for (auto it = waiting.begin(); it != waiting.end();) {
      StartedServer& agent = agents[*it];
      int wstatus = 0;
      if (waitpid(agent.pid, &wstatus, WNOHANG) == agent.pid) {
        const std::string tail = LogTail(agent.log_file, 3);
        return absl::FailedPreconditionError(
            absl::StrCat("node agent ", agent.node_id, " exited before it was ready: ",
                         tail.empty() ? "no log output" : tail, " (log: ", agent.log_file, ")"));
      }
      auto address = client::ReadFirstLine(state.AgentAddressFile(agent.node_id));
      if (!address.ok() || address->empty()) {
        last_problem = absl::StrCat("node agent ", agent.node_id, " has not written its address");
        ++it;
        continue;
      }
      tessera::v1::ListWorkersResponse workers;
      const absl::Status answered =
          client->Call("the node agent", client::Retry::kNever, [&](grpc::ClientContext* c) {
            return client->agent(*address).ListWorkers(c, tessera::v1::ListWorkersRequest(),
                                                       &workers);
          });
      if (!answered.ok()) {
        last_problem = absl::StrCat("node agent ", agent.node_id, ": ", answered.message());
        ++it;
        continue;
      }
      agent.address = *address;
      it = waiting.erase(it);
    }
    if (waiting.empty() && !head_address.empty()) {
      auto nodes = client->ListNodes();
      if (nodes.ok()) {
        std::set<std::string> alive;
        for (const auto& n : nodes->nodes()) {
          if (n.state() == tessera::v1::NODE_STATE_ALIVE) alive.insert(n.node().node_id());
        }
        std::vector<std::string> missing;
        for (const StartedServer& a : agents) {
          if (!alive.contains(a.node_id)) missing.push_back(a.node_id);
        }
        if (missing.empty()) return absl::OkStatus();
        last_problem =
            absl::StrCat("not registered with the head yet: ", absl::StrJoin(missing, ", "));
      } else {
        last_problem = std::string(nodes.status().message());
      }
    } else if (waiting.empty()) {
      return absl::OkStatus();
    }
    if (absl::Now() >= until) {
      return absl::DeadlineExceededError(absl::StrCat(
          "node agents not ready after ", absl::FormatDuration(timeout), ": ", last_problem));
    }
    absl::SleepFor(poll);
    poll = std::min(poll * 2, absl::Milliseconds(200));
  }
}

}  // namespace tessera::cli

// tessera up CLUSTER.yaml [--state-dir DIR] [--port P] [--node-timeout DUR] [--driver-timeout DUR]
//            [--timeout DUR]
//            [--object-store-memory SIZE]
//            [--redis-address ADDR [--redis-password-file F] [--redis-key-prefix P]]
// A whole cluster on this machine: a head, and one node agent per node of the cluster file (the
// format `tessera schedule` reads, docs/scheduling-formats.md), each agent started with
// `--cluster-file CLUSTER.yaml --node-id <id>` so it has that node's simulated hardware and
// labels. Returns once every node is registered, with a summary; `tessera down` undoes it. When
// anything fails to start, what did start is stopped again. Every agent's object store is sized
// here, for all of them together, before anything starts (node/object_store_sizing.h): by
// default they share one default store's worth of this host's memory.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/file_read.h"
#include "base/ignore_status.h"
#include "base/status_macros.h"
#include "cli/cluster_stop.h"
#include "cli/cluster_views.h"
#include "cli/commands.h"
#include "cli/server_start.h"
#include "client/cluster_client.h"
#include "hardware/sysroot.h"
#include "node/object_store_sizing.h"
#include "process/private_paths.h"
#include "resources/byte_size.h"
#include "resources/quantity.h"
#include "scheduling/cluster_file.h"

namespace tessera::cli {
namespace {

struct UpArgs {
  std::string cluster_file;
  std::string state_dir;
  int port = 0;
  std::string node_timeout;
  std::string driver_timeout;
  std::string timeout = "120s";
  std::string object_store_memory;  // each agent's; "": a share of the default
  // Passed to the head (tessera start --head), which checks them.
  std::string redis_address;
  std::string redis_password_file;
  std::string redis_key_prefix;
};

absl::StatusOr<std::vector<ClusterNode>> LoadClusterFile(const std::string& path) {
  // Sized before it is read (base/file_read.h): a huge file is refused at once.
  TESSERA_ASSIGN_OR_RETURN(const std::string text,
                           ReadFileUpTo(path, kMaxDescriptionFileBytes, "cluster file"));
  return ParseClusterFile(text, path);
}

// The size of each agent's object store: --object-store-memory, or the default divided among the
// agents. They start at once, so they are checked against this host's memory together (each
// agent checks its own store again as it starts, see ResolveAgentOptions).
absl::StatusOr<uint64_t> AgentStoreBytes(const std::string& object_store_memory, int agents) {
  std::optional<uint64_t> requested;
  if (!object_store_memory.empty()) {
    TESSERA_ASSIGN_OR_RETURN(const uint64_t bytes, ParseObjectStoreMemoryFlag(object_store_memory));
    if (bytes == 0) return 0;  // no stores: nothing to size
    requested = bytes;
  }
  auto memory = ReadHostMemory(Sysroot("/"));
  if (!memory.ok()) return memory.status();
  return DecideObjectStoreSize({.requested_bytes = requested, .agents = agents}, *memory);
}

int Fail(const client::StateFolder& state, const absl::Status& status) {
  // Leave nothing behind from a half-started cluster.
  IgnoreStatus(StopCluster(state, StopOptions{.grace = absl::Seconds(2)}),
               "best effort on the way out: the start's own error is what is reported");
  return ReportError(status);
}

int RunUp(const UpArgs& args) {
  if (!args.driver_timeout.empty()) {
    // The head checks it too; here a bad value starts nothing and reads nothing.
    auto parsed = client::ParsePositiveDurationFlag("--driver-timeout", args.driver_timeout);
    if (!parsed.ok()) return ReportError(parsed.status());
  }
  auto nodes = LoadClusterFile(args.cluster_file);
  if (!nodes.ok()) return ReportError(nodes.status());
  auto store_bytes = AgentStoreBytes(args.object_store_memory, static_cast<int>(nodes->size()));
  if (!store_bytes.ok()) return ReportError(store_bytes.status());
  // Exact and readable in the agents' command lines ("682MiB").
  auto store_size = Quantity::FromIntChecked(static_cast<int64_t>(*store_bytes));
  if (!store_size.ok()) return ReportError(store_size.status());
  const std::string store_flag = FormatByteQuantity(*store_size);
  auto timeout = client::ParseDurationFlag("--timeout", args.timeout);
  if (!timeout.ok()) return ReportError(timeout.status());
  if (!args.node_timeout.empty()) {
    auto parsed = client::ParseDurationFlag("--node-timeout", args.node_timeout);
    if (!parsed.ok()) return ReportError(parsed.status());
  }
  auto trusted = client::TrustedStateFolder(args.state_dir);
  if (!trusted.ok()) return ReportError(trusted.status());
  const client::StateFolder state = *std::move(trusted);
  std::error_code ec;
  const std::string cluster_file = std::filesystem::absolute(args.cluster_file, ec).string();
  if (absl::Status s = CheckNoHeadRunning(state); !s.ok()) return ReportError(s);
  if (absl::Status s = EnsurePrivateDirectory(state.LogsDir()); !s.ok()) return ReportError(s);

  const absl::Time deadline = absl::Now() + *timeout;
  std::vector<std::string> head_args = {"start",       "--head",  "--port", absl::StrCat(args.port),
                                        "--state-dir", state.root};
  auto add = [&head_args](const char* flag, const std::string& value) {
    if (!value.empty()) head_args.insert(head_args.end(), {flag, value});
  };
  add("--node-timeout", args.node_timeout);
  add("--driver-timeout", args.driver_timeout);
  add("--redis-address", args.redis_address);
  const std::string password_file =
      args.redis_password_file.empty()
          ? ""
          : std::filesystem::absolute(args.redis_password_file, ec).string();
  add("--redis-password-file", password_file);
  add("--redis-key-prefix", args.redis_key_prefix);
  head_args.push_back("--block");
  auto head = StartHeadDaemon(state, head_args, *timeout);
  if (!head.ok()) return Fail(state, head.status());

  std::vector<StartedServer> agents;
  for (const ClusterNode& node : *nodes) {
    auto agent = SpawnAgentDaemon(
        state, node.id,
        {"start", "--address", head->address, "--cluster-file", cluster_file, "--node-id", node.id,
         "--state-dir", state.root, "--object-store-memory", store_flag, "--block"});
    if (!agent.ok()) return Fail(state, agent.status());
    agents.push_back(*std::move(agent));
  }
  if (absl::Status ready =
          WaitAgentsReady(state, head->address, "", agents, deadline - absl::Now());
      !ready.ok()) {
    return Fail(state, ready);
  }

  client::ClusterClientOptions options;
  options.state_dir = state.root;
  auto client = client::ClusterClient::Connect(options);
  if (!client.ok()) return Fail(state, client.status());
  auto listed = (*client)->ListNodes();
  if (!listed.ok()) return Fail(state, listed.status());
  std::cout << "Cluster up: head at " << head->address << " (pid " << head->pid << "), "
            << agents.size() << " node agent" << (agents.size() == 1 ? "" : "s")
            << (*store_bytes == 0
                    ? " without object stores"
                    : absl::StrCat(" with a ", FormatBytes(*store_bytes), " object store",
                                   agents.size() == 1 ? "" : " each"))
            << ", state folder " << state.root << ".\n\n"
            << NodesTable(*listed) << "\n"
            << "Next: tessera status; tessera run -- hostname; tessera down"
            << (args.state_dir.empty() ? "" : absl::StrCat(" --state-dir ", state.root)) << "\n";
  return 0;
}

}  // namespace

void AddUpCommand(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<UpArgs>();
  CLI::App* cmd = app.add_subcommand(
      "up", "Start a head and one node agent per node of a cluster file on this machine");
  cmd->add_option("CLUSTER", args->cluster_file, "Cluster file (docs/scheduling-formats.md)")
      ->required();
  cmd->add_option(
         "--state-dir", args->state_dir,
         "The cluster's state folder (default: $TESSERA_STATE_DIR, else ~/.local/state/tessera)")
      ->type_name("DIR");
  cmd->add_option("--port", args->port, "The head's port (default 0: any free port)")
      ->type_name("P");
  cmd->add_option("--node-timeout", args->node_timeout,
                  "A node that misses heartbeats this long is declared dead")
      ->type_name("DUR");
  cmd->add_option("--driver-timeout", args->driver_timeout,
                  "A driver (API program) silent this long loses what it owns that is not "
                  "detached (default 10s)")
      ->type_name("DUR");
  cmd->add_option("--timeout", args->timeout, "How long starting may take in all (default 120s)")
      ->type_name("DUR");
  cmd->add_option(
         "--object-store-memory", args->object_store_memory,
         absl::StrCat("Size of each node agent's shared-memory object store, allocated "
                      "at start, checked against this host's memory for all agents "
                      "together (default: ",
                      kDefaultStorePercentOfAvailable, "% of the available memory, at most ",
                      FormatBytes(kDefaultStoreCapBytes),
                      ", split among the agents; 0: no stores)"))
      ->type_name("SIZE");
  cmd->add_option("--redis-address", args->redis_address,
                  "Keep the head's tables in the Redis server at HOST:PORT or unix:/path, so a "
                  "head restart loses nothing (default: in memory)")
      ->type_name("ADDR");
  cmd->add_option("--redis-password-file", args->redis_password_file,
                  "The Redis password, on one line of a file only you can read (mode 0600)")
      ->type_name("F");
  cmd->add_option("--redis-key-prefix", args->redis_key_prefix,
                  "Put before every Redis key, so clusters can share one Redis (default tessera:)")
      ->type_name("P");
  cmd->callback([args, &exit_code] { exit_code = RunUp(*args); });
}

}  // namespace tessera::cli

// tessera start --head [--port P] [--bind ADDR] [--state-dir DIR] [--node-timeout DUR]
//               [--heartbeat-interval DUR] [--redis-address ADDR [--redis-password-file F]
//               [--redis-key-prefix P]] [--http-port P] [--cpu-work-on-accelerator-nodes]
//               [--block]
// tessera start --address HOST:PORT [--hardware FILE | --cluster-file F --node-id ID]
//               [--labels k=v,...] [--resources ...] [--node-id ID] [--bind ADDR] [--port P]
//               [--state-dir DIR] [--token-file F] [--http-port P] [--block]
// Starts the head or a node agent of this machine. By default the server runs as a daemon (this
// command starts itself again with --block in a new session, output to the log file in the state
// folder) and the command returns once the server is ready, printing its address, and for the
// head the token other machines need. With --block the server runs in the foreground until it is
// stopped (SIGTERM, SIGINT, or `tessera stop`).
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "cli/commands.h"
#include "cli/server_start.h"
#include "client/cluster_client.h"
#include "client/state_folder.h"
#include "head/head_server.h"
#include "head/redis_state_store.h"
#include "labels/label.h"
#include "node/agent_options.h"
#include "node/agent_server.h"
#include "node/object_store_sizing.h"
#include "resources/byte_size.h"
#include "resources/resource_set.h"
#include "rpc/token.h"
#include "serve_runtime/head_serve_extension.h"

namespace tessera::cli {
namespace {

// The object store of an agent started without --object-store-memory: room for a few large
// values (docs/objects.md), cheap enough that a 16-host simulated cluster allocates 1 GiB.

struct StartArgs {
  bool head = false;
  std::string address;
  int port = -1;          // -1: the server's default
  std::string http_port;  // "": the server's default (any free port); -1: none
  std::string bind;
  std::string state_dir;
  std::string node_timeout;
  std::string heartbeat_interval;
  std::string driver_timeout;
  // --head: turns SchedulerOptions::avoid_accelerator_nodes off.
  bool cpu_work_on_accelerator_nodes = false;
  std::string hardware;
  std::string cluster_file;
  std::string node_id;
  std::string labels;
  std::string resources;
  std::string token_file;
  std::string token_out;            // --head: a copy of the token, mode 0600, for other machines
  std::string redis_address;        // --head: keep the tables in this Redis
  std::string redis_password_file;  // --head: that Redis's password, in a 0600 file
  std::string redis_key_prefix;     // --head: "": the default, "tessera:"
  std::string sysroot;
  std::string launcher;
  int prestarted_workers = -1;  // -1: the agent's default
  std::string object_store_memory;
  std::string timeout = "60s";
  bool block = false;
};

// The same command line for the daemon, with every path absolute (the daemon keeps this
// folder, but a path must not depend on that) and --block.
std::vector<std::string> DaemonArgs(const StartArgs& args, const client::StateFolder& state) {
  auto abs = [](const std::string& path) {
    std::error_code ec;
    return path.empty() ? path : std::filesystem::absolute(path, ec).string();
  };
  std::vector<std::string> out = {"start"};
  auto add = [&out](const char* flag, const std::string& value) {
    if (!value.empty()) out.insert(out.end(), {flag, value});
  };
  if (args.head) out.push_back("--head");
  add("--address", args.address);
  if (args.port >= 0) add("--port", absl::StrCat(args.port));
  add("--bind", args.bind);
  add("--state-dir", state.root);
  add("--node-timeout", args.node_timeout);
  add("--heartbeat-interval", args.heartbeat_interval);
  add("--driver-timeout", args.driver_timeout);
  if (args.cpu_work_on_accelerator_nodes) out.push_back("--cpu-work-on-accelerator-nodes");
  add("--redis-address", args.redis_address);
  add("--redis-password-file", abs(args.redis_password_file));
  add("--redis-key-prefix", args.redis_key_prefix);
  add("--hardware", abs(args.hardware));
  add("--cluster-file", abs(args.cluster_file));
  add("--node-id", args.node_id);
  add("--labels", args.labels);
  add("--resources", args.resources);
  add("--token-file", abs(args.token_file));
  add("--sysroot", abs(args.sysroot));
  add("--launcher", abs(args.launcher));
  if (args.prestarted_workers >= 0) {
    add("--prestarted-workers", absl::StrCat(args.prestarted_workers));
  }
  add("--object-store-memory", args.object_store_memory);
  add("--http-port", args.http_port);
  out.push_back("--block");
  return out;
}

// --http-port as a number (range-checked by the server's options), else `default_port`.
absl::StatusOr<int> HttpPortFlag(const StartArgs& args, int default_port) {
  if (args.http_port.empty()) return default_port;
  int port = 0;
  if (!absl::SimpleAtoi(args.http_port, &port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http-port: \"", args.http_port, "\" is not a port number"));
  }
  return port;
}

absl::StatusOr<HeadOptions> BuildHeadOptions(const StartArgs& args,
                                             const client::StateFolder& state) {
  HeadOptions options;
  options.state_dir = state.root;
  // The serve controller runs in the head's process (docs/serve.md).
  options.extensions.push_back(serve::ServeHeadExtension());
  if (!args.bind.empty()) options.bind = args.bind;
  if (args.port >= 0) options.port = args.port;
  TESSERA_ASSIGN_OR_RETURN(options.http_port, HttpPortFlag(args, options.http_port));
  if (!args.node_timeout.empty()) {
    auto timeout = client::ParsePositiveDurationFlag("--node-timeout", args.node_timeout);
    if (!timeout.ok()) return timeout.status();
    options.node_timeout = *timeout;
    // Several heartbeats fit in the timeout, so one late heartbeat never kills a node.
    options.heartbeat_interval = std::min(options.heartbeat_interval, *timeout / 4);
  }
  if (!args.heartbeat_interval.empty()) {
    auto interval = client::ParseDurationFlag("--heartbeat-interval", args.heartbeat_interval);
    if (!interval.ok()) return interval.status();
    if (*interval <= absl::ZeroDuration() || *interval >= options.node_timeout) {
      return absl::InvalidArgumentError(
          "--heartbeat-interval: must be positive and shorter than the node timeout");
    }
    options.heartbeat_interval = *interval;
  }
  if (!args.driver_timeout.empty()) {
    auto timeout = client::ParsePositiveDurationFlag("--driver-timeout", args.driver_timeout);
    if (!timeout.ok()) return timeout.status();
    options.driver_timeout = *timeout;
  }
  options.scheduling.avoid_accelerator_nodes = !args.cpu_work_on_accelerator_nodes;
  if (args.redis_address.empty() &&
      (!args.redis_password_file.empty() || !args.redis_key_prefix.empty())) {
    return absl::InvalidArgumentError(
        "--redis-password-file and --redis-key-prefix need --redis-address");
  }
  if (!args.redis_address.empty()) {
    // Checked here, so a bad address or password file is reported before a daemon starts; the
    // head connects to Redis (and fails when it cannot) as it starts.
    if (auto address = ParseRedisAddress(args.redis_address); !address.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--redis-address: ", address.status().message()));
    }
    if (!args.redis_password_file.empty()) {
      if (auto password = ReadRedisPasswordFile(args.redis_password_file); !password.ok()) {
        return absl::Status(password.status().code(),
                            absl::StrCat("--redis-password-file: ", password.status().message()));
      }
    }
    options.redis_address = args.redis_address;
    options.redis_password_file = args.redis_password_file;
    if (!args.redis_key_prefix.empty()) options.redis_key_prefix = args.redis_key_prefix;
  }
  return options;
}

absl::StatusOr<AgentOptions> BuildAgentOptions(const StartArgs& args,
                                               const client::StateFolder& state) {
  AgentOptions options;
  options.state_dir = state.root;
  options.head_address = args.address;
  options.token_file = args.token_file;
  if (!args.bind.empty()) options.bind = args.bind;
  if (args.port >= 0) options.port = args.port;
  options.node_id = args.node_id;
  if (!args.hardware.empty()) options.hardware_file = args.hardware;
  if (!args.cluster_file.empty()) options.cluster_file = args.cluster_file;
  if (!args.sysroot.empty()) options.sysroot = args.sysroot;
  if (!args.launcher.empty()) options.launcher = args.launcher;
  if (args.prestarted_workers >= 0) options.prestarted_workers = args.prestarted_workers;
  TESSERA_ASSIGN_OR_RETURN(options.http_port, HttpPortFlag(args, options.http_port));
  // Every agent hosts a store unless told otherwise (0: none); without a size it takes the
  // default share of this host's memory (node/object_store_sizing.h).
  options.object_store_bytes = std::nullopt;
  if (!args.object_store_memory.empty()) {
    TESSERA_ASSIGN_OR_RETURN(options.object_store_bytes,
                             ParseObjectStoreMemoryFlag(args.object_store_memory));
  }
  auto labels = ParseLabels(args.labels, LabelOrigin::kUser);
  if (!labels.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--labels: ", labels.status().message()));
  }
  options.labels = *std::move(labels);
  auto resources = ParseResourceSet(args.resources);
  if (!resources.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--resources: ", resources.status().message()));
  }
  options.resources = *std::move(resources);
  return ResolveAgentOptions(std::move(options));
}

int StartHead(const StartArgs& args, const client::StateFolder& state, absl::Duration timeout) {
  auto options = BuildHeadOptions(args, state);
  if (!options.ok()) return ReportError(options.status());
  if (args.block) {
    const absl::Status status = RunHead(*options);
    return status.ok() ? 0 : ReportError(status);
  }
  auto head = StartHeadDaemon(state, DaemonArgs(args, state), timeout);
  if (!head.ok()) return ReportError(head.status());
  const std::string port = head->address.substr(head->address.rfind(':') + 1);
  const bool loopback = head->address.starts_with("127.") || head->address.starts_with("[::1]") ||
                        head->address.starts_with("localhost");
  // The token itself is never printed (terminals and CI logs keep it): it travels as a file.
  std::string token_copy = state.TokenFile();
  if (!args.token_out.empty()) {
    auto token = rpc::ReadTokenFile(state.TokenFile());
    if (!token.ok()) return ReportError(token.status());
    if (absl::Status s = rpc::WriteTokenFile(args.token_out, *token); !s.ok())
      return ReportError(s);
    token_copy = args.token_out;
  }
  std::cout << "Head started at " << head->address << " (pid " << head->pid << "), state folder "
            << state.root << ".\n"
            << "Log: " << head->log_file << "\n\n"
            << "Add a node agent on this machine:\n"
            << "  tessera start --address " << head->address
            << (state.root == client::ResolveStateDir("")
                    ? ""
                    : absl::StrCat(" --state-dir ", state.root))
            << " --hardware FILE\n"
            << "On another machine, copy the token file " << token_copy
            << " there (keep it mode 0600), then:\n"
            << "  tessera start --address <this host>:" << port << " --token-file FILE\n";
  if (loopback) {
    std::cout << "  (the head listens on loopback only; start it with --bind 0.0.0.0 to accept "
                 "other machines)\n";
  }
  std::cout << "Stop it with: tessera stop"
            << (state.root == client::ResolveStateDir("")
                    ? ""
                    : absl::StrCat(" --state-dir ", state.root))
            << "\n";
  return 0;
}

int StartAgent(const StartArgs& args, const client::StateFolder& state, absl::Duration timeout) {
  if (!args.cluster_file.empty() && args.node_id.empty()) {
    return ReportError("--cluster-file needs --node-id (which node of the file this agent is)");
  }
  if (!args.cluster_file.empty() && !args.hardware.empty()) {
    return ReportError("give --hardware or --cluster-file, not both");
  }
  auto options = BuildAgentOptions(args, state);
  if (!options.ok()) return ReportError(options.status());
  if (args.block) {
    const absl::Status status = RunNodeAgent(*options);
    return status.ok() ? 0 : ReportError(status);
  }
  std::vector<std::string> daemon_args = DaemonArgs(args, state);
  if (args.node_id.empty()) {
    // Pin the id the options resolved (the host name), so the daemon resolves the same one.
    daemon_args.insert(daemon_args.end() - 1, {"--node-id", options->node_id});
  }
  auto agent = SpawnAgentDaemon(state, options->node_id, daemon_args);
  if (!agent.ok()) return ReportError(agent.status());
  std::vector<StartedServer> agents = {*agent};
  if (absl::Status ready =
          WaitAgentsReady(state, options->head_address, args.token_file, agents, timeout);
      !ready.ok()) {
    return ReportError(ready);
  }
  std::cout << "Node agent " << agents[0].node_id << " started at " << agents[0].address << " (pid "
            << agents[0].pid << ")";
  if (!options->head_address.empty()) {
    std::cout << ", registered with the head at " << options->head_address;
  } else {
    std::cout << ", without a head (every lease is decided here)";
  }
  std::cout << ".\nLog: " << agents[0].log_file << "\n";
  return 0;
}

int RunStart(const StartArgs& args) {
  auto trusted = client::TrustedStateFolder(args.state_dir);
  if (!trusted.ok()) return ReportError(trusted.status());
  const client::StateFolder state = *std::move(trusted);
  std::error_code ec;
  auto timeout = client::ParseDurationFlag("--timeout", args.timeout);
  if (!timeout.ok()) return ReportError(timeout.status());
  if (args.head && !args.address.empty()) {
    return ReportError("give --head to start a head, or --address HOST:PORT to join one, not both");
  }
  if (args.head) {
    for (const auto& [flag, value] : {std::pair{"--hardware", args.hardware},
                                      {"--cluster-file", args.cluster_file},
                                      {"--node-id", args.node_id},
                                      {"--labels", args.labels},
                                      {"--resources", args.resources},
                                      {"--token-file", args.token_file}}) {
      if (!value.empty()) return ReportError(absl::StrCat(flag, " is for node agents, not --head"));
    }
    return StartHead(args, state, *timeout);
  }
  if (!args.redis_address.empty() || !args.redis_password_file.empty() ||
      !args.redis_key_prefix.empty()) {
    return ReportError(
        "--redis-address, --redis-password-file and --redis-key-prefix are for "
        "the head (--head)");
  }
  if (!args.node_timeout.empty() || !args.heartbeat_interval.empty() ||
      !args.driver_timeout.empty() || !args.token_out.empty() ||
      args.cpu_work_on_accelerator_nodes) {
    return ReportError(
        "--node-timeout, --heartbeat-interval, --driver-timeout, --token-out and "
        "--cpu-work-on-accelerator-nodes are for the head (--head)");
  }
  if (args.address.empty() && !std::filesystem::exists(state.HeadAddressFile(), ec)) {
    return ReportError(
        absl::StrCat("give --head to start a head, or --address HOST:PORT of the "
                     "head to join (no head is running with state folder ",
                     state.root, ")"));
  }
  return StartAgent(args, state, *timeout);
}

}  // namespace

void AddStartCommand(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<StartArgs>();
  CLI::App* cmd =
      app.add_subcommand("start", "Start the head (--head) or a node agent (--address)");
  cmd->add_flag("--head", args->head, "Start the cluster's head");
  cmd->add_option("--address", args->address,
                  "The head to join (node agents); several, comma separated, are tried in turn")
      ->type_name("HOST:PORT");
  cmd->add_option("--port", args->port, "Port to listen on (0: any free port)")->type_name("P");
  cmd->add_option("--bind", args->bind, "Address to listen on (default 127.0.0.1)")
      ->type_name("ADDR");
  cmd->add_option(
         "--state-dir", args->state_dir,
         "The cluster's state folder (default: $TESSERA_STATE_DIR, else ~/.local/state/tessera)")
      ->type_name("DIR");
  cmd->add_option("--node-timeout", args->node_timeout,
                  "Head: a node that misses heartbeats this long is declared dead")
      ->type_name("DUR");
  cmd->add_option("--heartbeat-interval", args->heartbeat_interval,
                  "Head: how often node agents heartbeat (default 500ms, at most a quarter of "
                  "the node timeout)")
      ->type_name("DUR");
  cmd->add_option("--driver-timeout", args->driver_timeout,
                  "Head: a driver (API program) silent this long loses the placement groups, "
                  "slice reservations and named actors it owns that are not detached "
                  "(default 10s)")
      ->type_name("DUR");
  cmd->add_flag("--cpu-work-on-accelerator-nodes", args->cpu_work_on_accelerator_nodes,
                "Head: place tasks and actors that ask for no accelerator on accelerator nodes "
                "as readily as on others (default: on nodes without accelerators while one can "
                "take them)");
  cmd->add_option("--redis-address", args->redis_address,
                  "Head: keep the cluster's tables in the Redis server at HOST:PORT or "
                  "unix:/path/to/socket, so a head restart loses nothing (default: in memory)")
      ->type_name("ADDR");
  cmd->add_option("--redis-password-file", args->redis_password_file,
                  "Head: the Redis password, on one line of a file only you can read (mode 0600)")
      ->type_name("F");
  cmd->add_option("--redis-key-prefix", args->redis_key_prefix,
                  "Head: put before every Redis key, so clusters can share one Redis "
                  "(default tessera:)")
      ->type_name("P");
  cmd->add_option("--hardware", args->hardware,
                  "A simulated hardware description instead of "
                  "this machine's")
      ->type_name("FILE");
  cmd->add_option("--cluster-file", args->cluster_file,
                  "Take this node's hardware from a cluster file (with --node-id)")
      ->type_name("F");
  cmd->add_option("--node-id", args->node_id, "The node's id (default: the host name)")
      ->type_name("ID");
  cmd->add_option("--labels", args->labels, "Labels to add: key=value,other=value")
      ->type_name("LIST");
  cmd->add_option("--resources", args->resources, "Resources, beating detection: CPU=8,GPU=4")
      ->type_name("LIST");
  cmd->add_option("--token-file", args->token_file,
                  "The cluster token (default: "
                  "$TESSERA_TOKEN, else <state>/token)")
      ->type_name("F");
  cmd->add_option("--token-out", args->token_out,
                  "With --head: also write the cluster token to FILE (mode 0600), to copy to "
                  "other machines; the token is never printed")
      ->type_name("FILE");
  cmd->add_option("--sysroot", args->sysroot, "Read Linux paths under DIR (discovery)")
      ->type_name("DIR");
  cmd->add_option("--launcher", args->launcher,
                  "The tessera-launcher workers start from (default: beside this executable)")
      ->type_name("PATH");
  cmd->add_option("--prestarted-workers", args->prestarted_workers,
                  "Worker launchers kept ready (0: fork every worker; default 2)")
      ->type_name("N");
  cmd->add_option("--object-store-memory", args->object_store_memory,
                  "Size of this node's shared-memory object store, allocated at start and "
                  "refused when it does not fit this host's memory with a margin to spare "
                  "(e.g. 2GiB; default: 30% of the available memory, at most 2 GiB; 0: no store)")
      ->type_name("SIZE");
  cmd->add_option("--http-port", args->http_port,
                  "Port of the HTTP endpoint on the --bind host (the head: dashboard, /api/v1 "
                  "and /metrics; a node agent: /metrics); bound beyond loopback it requires the "
                  "cluster token as a bearer token (default 0: any free port, written to "
                  "<state>/head.http or <state>/nodes/<id>/agent.http; -1: none)")
      ->type_name("P");
  cmd->add_option("--timeout", args->timeout, "How long to wait for the server to be ready")
      ->type_name("DUR");
  cmd->add_flag("--block", args->block, "Run in the foreground instead of as a daemon");
  cmd->callback([args, &exit_code] { exit_code = RunStart(*args); });
}

}  // namespace tessera::cli

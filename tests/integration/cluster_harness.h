// A real cluster for multi-process tests: a head and node agents started as separate `tessera`
// processes (`tessera start ... --block`) on loopback, ephemeral ports, one temporary state
// folder, short heartbeats. Everything it starts, and every worker those start, is stopped when
// the TestCluster is destroyed, also when a test fails half-way (every process of the cluster
// carries TESSERA_STATE_DIR=<its folder> in its environment; teardown kills whatever still does).
// Not thread-safe: one test drives one cluster.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/cluster_client.h"
#include "integration/head_tap.h"

namespace tessera::testing {

// The `tessera` binary under test.
std::string TesseraBinary();

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// The exit code and both outputs, for a failed expectation's message.
std::string Describe(const CliResult& r);

// In a test: fails it (fatally) with the status when `expr` is not OK.
#define ASSERT_OK(expr)                                       \
  do {                                                        \
    const absl::Status assert_ok_status_ = (expr);            \
    ASSERT_TRUE(assert_ok_status_.ok()) << assert_ok_status_; \
  } while (0)

struct NodeSpec {
  std::string id;
  // A simulated hardware description (YAML text), written to a file in the state folder.
  std::string hardware_yaml;
  // Instead of hardware_yaml: this node of a cluster file (--cluster-file F --node-id id).
  std::string cluster_file;
  // The head address the agent dials; "" the head's own address.
  std::string head_address;
  std::string labels;     // --labels
  std::string resources;  // --resources
  // Extra arguments for `tessera start` (e.g. --bind).
  std::vector<std::string> extra_args;
  // A command prefix the agent runs under (e.g. {"ip", "netns", "exec", "ns1"}).
  std::vector<std::string> wrapper;
};

struct ClusterOptions {
  // Head: a node that misses heartbeats this long is dead.
  std::string node_timeout = "1500ms";
  std::vector<NodeSpec> nodes;
  std::vector<std::string> head_extra_args;
  // The agents (of nodes that name no head_address) report to the head through a HeadTap
  // (TestCluster::head_tap()), which keeps each agent's latest report of its leases and bundles.
  bool tap_agent_reports = false;
  // How long starting, and waiting for the cluster to settle, may take on a loaded machine.
  absl::Duration ready_timeout = absl::Seconds(60);
  // Start each agent only once the one before is registered, so the head indexes the nodes in
  // the order given (as `tessera schedule` does those of a cluster file).
  bool register_in_order = false;
};

// Hardware descriptions used across tests.
std::string CpuHost(int cores);
std::string GpuHost(int cores, int gpus);
std::string TpuV6eHost(const std::string& slice, int worker, const std::string& topology);

class TestCluster {
 public:
  // Starts the head, then every node of `options`, and waits until all are registered.
  static absl::StatusOr<std::unique_ptr<TestCluster>> Start(ClusterOptions options);
  // A cluster folder with nothing started (for `tessera up` tests).
  static absl::StatusOr<std::unique_ptr<TestCluster>> Empty();
  ~TestCluster();

  const std::string& state_dir() const { return state_dir_; }
  const std::string& head_address() const { return head_address_; }
  std::string token() const;

  // Runs `tessera ARGS...` with TESSERA_STATE_DIR set to this cluster's folder; waits for it.
  CliResult Cli(const std::vector<std::string>& args) const;
  // Same, in the background: returns the pid; Wait() collects its result.
  int CliAsync(const std::vector<std::string>& args);
  CliResult Wait(int pid);

  // A client for direct calls (token and head from the state folder).
  client::ClusterClient& client();

  absl::Status StartHead();
  // SIGKILLs the head (no clean shutdown), as a crash would.
  absl::Status KillHead();
  absl::Status StartNode(const NodeSpec& node);
  absl::Status KillNode(const std::string& node_id, int signal);
  // Loses a whole machine: SIGKILLs the node's agent and every process under it (its workers
  // and launchers), all at once, with nothing closed cleanly first. Returns the pids killed
  // besides the agent's.
  absl::StatusOr<std::vector<int>> KillMachine(const std::string& node_id);
  // A machine that vanishes without a word (power, network): SIGSTOPs the node's agent and every
  // process under it, so nothing is closed and nobody answers. KillMachine ends it.
  absl::Status FreezeMachine(const std::string& node_id);
  // Ends a FreezeMachine: SIGCONTs the node's agent and every process under it, which carry on
  // where they stopped (a machine back from a network partition or a long pause).
  absl::Status ThawMachine(const std::string& node_id);
  // Sends `signal` to the node's agent alone, without waiting: SIGSTOP pauses it (its workers
  // run on, nobody answers for it, its heartbeats stop), SIGCONT resumes it.
  absl::Status SignalAgent(const std::string& node_id, int signal);
  int NodePid(const std::string& node_id) const;
  int head_pid() const { return head_pid_; }
  // The tap the agents report through (ClusterOptions::tap_agent_reports); nullptr without one.
  HeadTap* head_tap() const { return tap_.get(); }
  std::string NodeAddress(const std::string& node_id) const;

  // Polls `check` (backing off to 100 ms) until it returns OK or `timeout` passes; returns the
  // last status.
  absl::Status WaitUntil(const std::function<absl::Status()>& check,
                         absl::Duration timeout = absl::Seconds(30));
  // Waits until every node id in `ids` is listed with `state` (NODE_STATE_ALIVE, _DEAD); alive
  // also means that an agent this cluster started has written its address file.
  absl::Status WaitNodes(const std::vector<std::string>& ids, v1::NodeState state);

  // Processes whose environment names this cluster's state folder (servers and workers alike).
  std::vector<int> ProcessesOfThisCluster() const;
  // Every live process below `pid` (children, their children, ...).
  static std::vector<int> DescendantsOf(int pid);

 private:
  explicit TestCluster(ClusterOptions options, std::string state_dir);
  int Spawn(const std::vector<std::string>& argv, const std::string& log_name,
            const std::string& out_file = "", const std::string& err_file = "");
  void TearDown();

  ClusterOptions options_;
  std::string state_dir_;
  std::string head_address_;
  int head_port_ = 0;
  int head_pid_ = 0;
  std::map<std::string, int> node_pids_;
  std::map<int, std::pair<std::string, std::string>> async_outputs_;  // pid -> out, err files
  std::unique_ptr<client::ClusterClient> client_;
  std::unique_ptr<HeadTap> tap_;
  int spawned_ = 0;
};

}  // namespace tessera::testing

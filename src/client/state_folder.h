// The state folder of one cluster on this machine (docs/cluster-runtime.md): where the head and
// the node agents write their address, pid and log files, and the cluster token. The CLI finds
// running processes through it. Thread-safe: values and pure path arithmetic; the readers do
// file I/O only.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::client {

// `flag` when given, else $TESSERA_STATE_DIR, else the per-user default
// (process/private_paths.h DefaultStateDirectory: ~/.local/state/tessera).
std::string ResolveStateDir(const std::string& flag);

struct StateFolder {
  std::string root;

  std::string TokenFile() const { return root + "/token"; }
  std::string HeadAddressFile() const { return root + "/head.address"; }
  std::string HeadPidFile() const { return root + "/head.pid"; }
  std::string LogsDir() const { return root + "/logs"; }
  std::string HeadLogFile() const { return LogsDir() + "/head.log"; }
  std::string NodesDir() const { return root + "/nodes"; }
  // Jobs' logs (<jobs>/<job-id>/job.log, rank-<R>.log, status.json); `tessera down` keeps them.
  std::string JobsDir() const { return root + "/jobs"; }
  std::string NodeDir(const std::string& node_id) const { return NodesDir() + "/" + node_id; }
  std::string AgentAddressFile(const std::string& node_id) const {
    return NodeDir(node_id) + "/agent.address";
  }
  std::string AgentPidFile(const std::string& node_id) const {
    return NodeDir(node_id) + "/agent.pid";
  }
  // The node's object store (its agent serves it when it hosts one).
  std::string ObjectStoreSocket(const std::string& node_id) const {
    return NodeDir(node_id) + "/objects.sock";
  }
  std::string AgentLogFile(const std::string& node_id) const {
    return NodeDir(node_id) + "/agent.log";
  }
};

// The state folder `flag` names (ResolveStateDir, made absolute), once it may be trusted: a folder
// that exists must pass CheckPrivateDirectory (owned by this user, not writable by others, safe
// folders above it), since whoever controls it controls the token, the head's address and the
// pid files the CLI signals. A folder that does not exist yet passes (nothing in it to trust).
absl::StatusOr<StateFolder> TrustedStateFolder(const std::string& flag);

// The first line of a small file, trimmed. NotFound when the file is missing.
absl::StatusOr<std::string> ReadFirstLine(const std::string& path);

// The node ids that have a folder under <state>/nodes, sorted.
std::vector<std::string> NodeIdsInStateFolder(const StateFolder& state);

// The pid in a pid file, when the file exists and holds one.
std::optional<int> ReadPidFile(const std::string& path);

// True while `pid` names a live process (a zombie counts as gone).
bool ProcessAlive(int pid);

// The address of a node agent on this machine: that of the first node of the state folder whose
// agent is alive and has written its address; "" when there is none.
std::string LocalAgentAddress(const StateFolder& state);

// True when `pid` is a `tessera start ... --state-dir <state.root>` process of this user: a pid
// file is trusted only for a process of that very state folder, so neither a stale pid reused by
// another program nor a pid file copied from another cluster's folder is ever signalled.
bool IsTesseraStartProcess(int pid, const StateFolder& state);

}  // namespace tessera::client

// Starting a head or a node agent in the background and waiting until it serves: shared by
// `tessera start` (one process) and `tessera up` (a head and one agent per node of a cluster
// file). A server counts as ready when its address file is written and a call to it succeeds
// with the cluster token; an agent also when the head lists it ALIVE.
// Thread-compatible: one start at a time.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/state_folder.h"

namespace tessera::cli {

struct StartedServer {
  int pid = 0;
  std::string address;
  std::string node_id;  // agents
  std::string log_file;
};

// Fails (FailedPrecondition, naming the pid) when a head of this state folder is running.
absl::Status CheckNoHeadRunning(const client::StateFolder& state);
// Same for the agent of `node_id`.
absl::Status CheckNoAgentRunning(const client::StateFolder& state, const std::string& node_id);

// Runs `tessera <args>` (args end with --block) as the head's daemon, logging to
// <state>/logs/head.log, and waits until it is ready.
absl::StatusOr<StartedServer> StartHeadDaemon(const client::StateFolder& state,
                                              const std::vector<std::string>& args,
                                              absl::Duration timeout);

// Runs `tessera <args>` as the daemon of node agent `node_id` (log <state>/nodes/<id>/agent.log)
// without waiting; WaitAgentsReady waits for a batch.
absl::StatusOr<StartedServer> SpawnAgentDaemon(const client::StateFolder& state,
                                               const std::string& node_id,
                                               const std::vector<std::string>& args);

// Waits until every agent of `agents` serves and, when `head_address` is not empty, the head
// lists it ALIVE. Fills in each agent's address.
absl::Status WaitAgentsReady(const client::StateFolder& state, const std::string& head_address,
                             const std::string& token_file, std::vector<StartedServer>& agents,
                             absl::Duration timeout);

}  // namespace tessera::cli

// The flags every command on a running cluster shares (which state folder, which head, which
// token) and the one way those commands connect. Thread-compatible: values filled by CLI11.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/cluster_client.h"

namespace tessera::cli {

struct CommonClusterArgs {
  std::string state_dir;
  std::string address;  // the head's host:port, when not from the state folder
  std::string token_file;
};

// --state-dir DIR, --address HOST:PORT (the head), --token-file FILE.
void AddCommonClusterFlags(CLI::App& command, CommonClusterArgs& args);

absl::StatusOr<std::unique_ptr<client::ClusterClient>> ConnectCluster(
    const CommonClusterArgs& args);

}  // namespace tessera::cli

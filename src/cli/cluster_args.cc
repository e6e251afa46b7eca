#include "cli/cluster_args.h"

namespace tessera::cli {

void AddCommonClusterFlags(CLI::App& command, CommonClusterArgs& args) {
  command
      .add_option(
          "--state-dir", args.state_dir,
          "The cluster's state folder (default: $TESSERA_STATE_DIR, else ~/.local/state/tessera)")
      ->type_name("DIR");
  command
      .add_option("--address", args.address,
                  "The head's HOST:PORT (default: read from the state folder)")
      ->type_name("HOST:PORT");
  command
      .add_option("--token-file", args.token_file,
                  "File holding the cluster token (default: $TESSERA_TOKEN, else <state>/token)")
      ->type_name("FILE");
}

absl::StatusOr<std::unique_ptr<client::ClusterClient>> ConnectCluster(
    const CommonClusterArgs& args) {
  client::ClusterClientOptions options;
  options.state_dir = args.state_dir;
  options.head_address = args.address;
  options.token_file = args.token_file;
  return client::ClusterClient::Connect(std::move(options));
}

}  // namespace tessera::cli

#include "cli/cluster_command_start.h"

#include <utility>

#include "base/status_macros.h"

namespace tessera::cli {

absl::StatusOr<absl::Duration> ParseWaitFlag(const std::string& text, absl::Duration if_empty) {
  if (text.empty()) return if_empty;
  return client::ParseDurationFlag("--wait", text);
}

absl::StatusOr<ClusterCommandStart> StartClusterCommand(const CommonClusterArgs& common,
                                                        const std::string& wait_text,
                                                        absl::Duration wait_if_empty) {
  ClusterCommandStart start;
  TESSERA_ASSIGN_OR_RETURN(start.wait, ParseWaitFlag(wait_text, wait_if_empty));
  TESSERA_ASSIGN_OR_RETURN(start.client, ConnectCluster(common));
  return start;
}

}  // namespace tessera::cli

// What the commands that ask the head for something and may wait for it (pg create, slice
// reserve, run) do first: read --wait, then connect. One place, so the flag means the same
// everywhere. Thread-compatible: plain functions over the caller's values.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/cluster_args.h"
#include "client/cluster_client.h"

namespace tessera::cli {

// The --wait flag's value; `if_empty` when the flag was not given. A one-line error naming the
// flag when the text is not a duration.
absl::StatusOr<absl::Duration> ParseWaitFlag(const std::string& text, absl::Duration if_empty);

struct ClusterCommandStart {
  absl::Duration wait;
  std::unique_ptr<client::ClusterClient> client;
};

// ParseWaitFlag, then ConnectCluster: a bad flag is reported before any connection is tried.
absl::StatusOr<ClusterCommandStart> StartClusterCommand(const CommonClusterArgs& common,
                                                        const std::string& wait_text,
                                                        absl::Duration wait_if_empty);

}  // namespace tessera::cli

// The cluster the reservation calls of include/tessera/placement_group.h talk to: the one Init
// connected to (Init records its options here; Shutdown forgets them).
//
// Thread-safe.
#pragma once

#include <optional>

#include "cli/cluster_client.h"
#include "tessera/tessera.h"

namespace tessera::api {

void RememberReservationCluster(const InitOptions& options);
void ForgetReservationCluster();

// The options recorded by Init, or nothing before Init / after Shutdown.
std::optional<cli::ClusterClientOptions> ReservationCluster();

}  // namespace tessera::api

// The cluster the reservation calls of include/tessera/placement_group.h talk to: the one Init
// connected to (Init records its options here; Shutdown forgets them), and the driver that owns
// what they reserve (released with it unless detached).
//
// Thread-safe.
#pragma once

#include <optional>
#include <string>

#include "client/cluster_client.h"
#include "tessera/tessera.h"

namespace tessera::api {

void RememberReservationCluster(const InitOptions& options, std::string driver_id);
void ForgetReservationCluster();

// The options recorded by Init, or nothing before Init / after Shutdown; in a worker, its node's
// cluster (from the worker's environment).
std::optional<client::ClusterClientOptions> ReservationCluster();
// The driver id recorded by Init ("" before Init / after Shutdown).
std::string ReservationOwner();

}  // namespace tessera::api

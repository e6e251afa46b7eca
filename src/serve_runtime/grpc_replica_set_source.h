// GrpcReplicaSetSource: the ReplicaSetSource of a process outside the head (a driver's handles,
// a replica's handles to other deployments, a node's proxy): the serve controller's replica sets
// and route table read over gRPC (HeadServe.GetReplicas and GetRoutes, long polls), and the
// callers' autoscaling samples sent to it (HeadServe.ReportMetrics), on the head connection of
// the client library's ClusterClient.
//
// Threading: thread-safe (gRPC stubs are; the client's other state is only read). GetReplicas
// and GetRoutes block up to `wait` plus one call deadline; Report up to one short call deadline.
// Cost: one unary call each; nothing is retried (the routers and the proxy ask again: their watch
// loops, and the next report).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/cluster_client.h"
#include "serve_runtime/replica_set_source.h"
#include "tessera/v1/serve.pb.h"

namespace tessera::serve {

class GrpcReplicaSetSource : public ReplicaSetSource {
 public:
  // `head`: connected to the cluster's head (shared with the process's other serve calls).
  explicit GrpcReplicaSetSource(std::shared_ptr<client::ClusterClient> head);

  // Errors as the controller answers them (NotFound: no such application or deployment), and
  // Unavailable / DeadlineExceeded naming the head when it cannot be reached.
  absl::StatusOr<v1::GetServeReplicasResponse> GetReplicas(const std::string& application,
                                                           const std::string& deployment,
                                                           uint64_t known_version,
                                                           absl::Duration wait) override;
  // Errors as GetReplicas's.
  absl::StatusOr<RouteTable> GetRoutes(uint64_t known_version, absl::Duration wait) override;
  // Best effort: a sample that does not arrive is replaced by the caller's next one.
  void Report(const v1::ServeAutoscalingSample& sample) override;

 private:
  std::shared_ptr<client::ClusterClient> head_;
};

}  // namespace tessera::serve

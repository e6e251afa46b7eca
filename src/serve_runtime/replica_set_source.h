// ReplicaSetSource: where a router learns a deployment's replicas, a proxy the route table, and
// where callers report the requests they have in flight (the autoscaling signal). The serve
// controller is one, in the head's process (the head's proxy reads it in process); the proxies
// of the nodes and the handles of drivers and replicas read the controller over gRPC
// (GrpcReplicaSetSource: HeadServe.GetReplicas, GetRoutes, ReportMetrics).
//
// Threading: implementations are thread-safe; the Get calls block up to `wait` (long poll), so
// each watcher calls them from a thread of its own. Cost: a lookup; over gRPC, one call.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tessera/v1/serve.pb.h"

namespace tessera::serve {

// One application's place in the HTTP route table.
struct RouteEntry {
  std::string route_prefix;  // "/" or "/a/b"
  std::string application;
  std::string ingress_deployment;
  bool takes_http = false;  // the ingress serves HTTP (an ASGI app or a __call__ taking a Request)
  double request_timeout_s = 0;
};

struct RouteTable {
  uint64_t version = 0;
  std::vector<RouteEntry> routes;
};

// The table as HeadServe.GetRoutes carries it, and back.
inline v1::GetServeRoutesResponse RouteTableToProto(const RouteTable& table) {
  v1::GetServeRoutesResponse out;
  out.set_version(table.version);
  for (const RouteEntry& entry : table.routes) {
    v1::ServeRoute* route = out.add_routes();
    route->set_route_prefix(entry.route_prefix);
    route->set_application(entry.application);
    route->set_ingress_deployment(entry.ingress_deployment);
    route->set_takes_http(entry.takes_http);
    route->set_request_timeout_s(entry.request_timeout_s);
  }
  return out;
}
inline RouteTable RouteTableFromProto(const v1::GetServeRoutesResponse& proto) {
  RouteTable table;
  table.version = proto.version();
  table.routes.reserve(proto.routes_size());
  for (const v1::ServeRoute& route : proto.routes()) {
    table.routes.push_back(RouteEntry{.route_prefix = route.route_prefix(),
                                      .application = route.application(),
                                      .ingress_deployment = route.ingress_deployment(),
                                      .takes_http = route.takes_http(),
                                      .request_timeout_s = route.request_timeout_s()});
  }
  return table;
}

class ReplicaSetSource {
 public:
  virtual ~ReplicaSetSource() = default;
  // The replica set of `deployment` ("" the application's ingress) of `application` once its
  // version differs from `known_version` (at once when it does), else after `wait` with the same
  // version. NotFound when there is no such application or deployment.
  virtual absl::StatusOr<v1::GetServeReplicasResponse> GetReplicas(const std::string& application,
                                                                   const std::string& deployment,
                                                                   uint64_t known_version,
                                                                   absl::Duration wait) = 0;
  // The route table, as GetReplicas waits.
  virtual absl::StatusOr<RouteTable> GetRoutes(uint64_t known_version, absl::Duration wait) = 0;
  // A caller's ongoing and queued requests for one deployment (reported every few seconds, and
  // at once when requests queue with no replica: the cold start).
  virtual void Report(const v1::ServeAutoscalingSample& sample) = 0;
};

}  // namespace tessera::serve

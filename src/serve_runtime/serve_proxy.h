// ServeProxy: Serve's HTTP ingress (reference: serving §1.5, §2): an HttpProxyServer whose
// requests go to the ingress replicas of the applications, by route prefix.
//
// - The route table comes from ReplicaSetSource::GetRoutes (a watcher thread, long polls). A
//   request goes to the application of the longest route prefix matching its path (as Ray's:
//   "/a" matches "/a" and "/a/..." but not "/ab"; "/" matches everything); none: 404 "Path
//   '<path>' not found. Ping http://.../-/routes for available routes.". `GET /-/healthz` is 200
//   "success" (503 "Route table is not populated yet." before the first table, 503 "This node is
//   being drained." while draining: SetDraining, so that a load balancer sends its requests to
//   other proxies, while this one still serves what comes); `GET /-/routes` is the table as
//   JSON, {"<prefix>": "<application>"}.
// - Each application has a DeploymentRouter of its ingress (made when its first request comes,
//   stopped when the application leaves the table). Past the deployment's max_queued_requests
//   the client gets 503 with Ray's BackPressureError text.
// - The request travels as the replica's frame (python_call_codec.h: HEAD JSON of method, path
//   (percent-decoded), raw_path, query_string, headers, http_version, route_prefix, request_id,
//   client, multiplexed_model_id (the serve_multiplexed_model_id header), then the body) to
//   ReplicaRuntime::CallStreaming(replica, "handle_http", frame) (which ActorReplicaRuntime
//   carries as one plain call when the response is whole in its first item). The first item is the
//   response's head (status, headers, more: kStreaming when more, else kComplete), each later
//   item more body, the stream's end the response's end. A first item carrying
//   x-tessera-serve-rejected (the replica was full) sends the request to the router again, at
//   the front of its queue; the client never sees it. A stream that ends Unavailable before the
//   head (the replica's actor died) has its replica routed around (DeploymentRouter::Died) and
//   the request routed again, first in line, as Ray's router does on ActorDiedError (at most 30
//   times). Any other stream that fails or ends before the head is a 500 "Internal Server
//   Error" (the reason goes to the log); after the head, the connection is reset (the client
//   never takes a cut response for a whole one).
// - A client gone (which the request timeout's 408 includes) cancels its request: dropped from
//   the router's queue when not yet assigned, else its stream is cancelled (the replica's
//   coroutine gets CancelledError).
// - A slow client: once its connection buffers max_buffered_bytes, the item's delivery waits
//   (the thread of the runtime that delivers it) until the client takes half of it, so the
//   proxy holds about max_buffered_bytes per connection; the items still coming wait in the
//   runtime (the object store), as the replica's generator has no flow control of its own.
// - Metrics (reference §6, Ray's names), when a registry is given:
//   ray_serve_num_http_requests_total{route, method, application, status_code},
//   ray_serve_num_http_error_requests_total{route, error_code, method, application} (status
//   400 and up, and "disconnection"), ray_serve_num_deployment_http_error_requests_total{
//   deployment, error_code, method, route, application} (the same errors of requests a route
//   took, under its application's ingress deployment), ray_serve_http_request_latency_ms{method,
//   route, application, status_code} (DEFAULT_LATENCY_BUCKET_MS; arrival to the response's end)
//   and ray_serve_num_ongoing_http_requests{node_id, node_ip_address}. A client that left is
//   recorded with status "disconnection", a request timed out with 408. The method label is one
//   of the standard methods or OTHER, so that clients cannot grow the series without bound.
//
// Threading: thread-safe. Threads: the server's loop (requests are handed on there, never
// waited for), the route watcher, each router's three, and whatever the runtime's callbacks run
// on. Stop returns once every request has ended and no callback of the runtime refers to the
// proxy's state any more, except a rejected attempt's stream, which touches only its request.
// Cost per request: a route lookup (linear in the routes), a frame (one copy of the body, one
// JSON encoding of the head), a route (the router's), a stream (one parse of the first item's
// head), the metrics (four series looked up).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "metrics/metric_registry.h"
#include "serve/http_proxy_server.h"
#include "serve_runtime/deployment_router.h"
#include "serve_runtime/replica_runtime.h"
#include "serve_runtime/replica_set_source.h"

namespace tessera::serve {

struct ServeProxyOptions {
  // The HTTP server's (its clock is the proxy's: routers, timeouts, latencies).
  HttpProxyServerOptions http;
  // This proxy's node: locality of its routers, the source of its reports ("proxy:<node id>")
  // and the ongoing gauge's labels.
  std::string node_id;
  std::string node_ip_address;
  ReplicaRuntime* runtime = nullptr;           // not owned; required; outlives the proxy
  ReplicaSetSource* replica_sets = nullptr;    // not owned; required; outlives the proxy
  metrics::MetricRegistry* metrics = nullptr;  // not owned; optional; outlives the proxy
  // The route watcher's long poll, and its wait after a failed one.
  absl::Duration routes_wait = absl::Seconds(5);
  absl::Duration routes_retry = absl::Seconds(1);
  // Each router's (DeploymentRouterOptions).
  absl::Duration router_watch_wait = absl::Seconds(5);
  absl::Duration report_interval = absl::Seconds(10);
  uint64_t seed = 0;
};

class ServeProxy {
 public:
  // Starts the server and the route watcher. InvalidArgument (one line) for a missing runtime or
  // source, an empty node id or durations that are not positive; the server's own errors
  // (Unavailable: the address cannot be bound); AlreadyExists when the registry has one of the
  // metrics with another definition.
  static absl::StatusOr<std::unique_ptr<ServeProxy>> Start(ServeProxyOptions options);
  ~ServeProxy();  // Stop()
  ServeProxy(const ServeProxy&) = delete;
  ServeProxy& operator=(const ServeProxy&) = delete;

  int port() const;
  // The version of the route table in use (0: none yet).
  uint64_t route_table_version() const ABSL_LOCKS_EXCLUDED(mu_);
  HttpProxyServerStats http_stats() const;
  // Requests (own routes included) not yet ended: a draining proxy is done when there are none.
  int64_t ongoing_requests() const;

  // Draining (Ray's DRAINING proxy: its node has no replica left): /-/healthz answers 503, every
  // other request is served as before. Idempotent both ways.
  void SetDraining(bool draining) ABSL_LOCKS_EXCLUDED(mu_);

  // Stops accepting and closes every connection (requests in flight are cancelled), stops the
  // watcher and the routers, and waits for every request to end. Idempotent; not from a
  // callback of the runtime.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  struct Core;  // what requests share with the proxy (serve_proxy.cc)

 private:
  ServeProxy(ServeProxyOptions options, std::shared_ptr<Core> core);

  // The server's handler (its loop thread): answers or hands the request on, never waits.
  void Handle(ProxyRequest request, std::shared_ptr<ResponseWriter> writer)
      ABSL_LOCKS_EXCLUDED(mu_);
  void AnswerOwnRoute(const ProxyRequest& request, std::shared_ptr<ResponseWriter> writer)
      ABSL_LOCKS_EXCLUDED(mu_);
  std::optional<RouteEntry> Match(const std::string& path) const ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::shared_ptr<DeploymentRouter>> RouterFor(const RouteEntry& route)
      ABSL_LOCKS_EXCLUDED(mu_);
  void WatchRoutes() ABSL_LOCKS_EXCLUDED(mu_);
  void ApplyRoutes(const RouteTable& table) ABSL_LOCKS_EXCLUDED(mu_);

  const ServeProxyOptions options_;
  const std::shared_ptr<Core> core_;
  std::unique_ptr<HttpProxyServer> server_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool populated_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t routes_version_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<RouteEntry> routes_ ABSL_GUARDED_BY(mu_);  // longest prefix first
  // By application: its ingress's router.
  std::map<std::string, std::shared_ptr<DeploymentRouter>> routers_ ABSL_GUARDED_BY(mu_);
  std::thread watcher_;
};

}  // namespace tessera::serve

// HeadHttp: the head's HTTP endpoint (metrics::HttpServer) beside its gRPC port:
//   /            the dashboard (web/dashboard, static files; when a dashboard folder is known)
//   /api/v1/...  its JSON (rpc/message_json.h: amounts in their units, states as words):
//                cluster, nodes, nodes/<id>/telemetry, placement_groups, slices, actors, jobs,
//                jobs/<id>/logs?rank=&offset=, events?after=
//   POST /api/v1/sessions  (header "X-Tessera-Login-Ticket: <ticket>") spends a one-time login
//                ticket (issued over gRPC by HeadAdminService::CreateDashboardLogin, good for 60 s,
//                which `tessera dashboard` puts in the URL it opens) for a
//                session, a bearer credential for everything but minting tickets, good for
//                12 h: {"session", "expires_in_s"}; 403 for a ticket unknown, used or expired
//   /metrics     Prometheus text format: the cluster as the head sees it (nodes by state, each
//                node's resources total and reserved, reservations by state, jobs and gangs,
//                actors, demand, events) — docs/observability.md lists every series
// The answers come from the own handlers of the head's services (HeadService::nodes(), ...) and
// of its JobManager, called in process, so they say exactly what the gRPC API says. Every
// request but the dashboard's static files and the ticket exchange needs the cluster token as a
// bearer token (HeadHttpOptions::bearer_token), on loopback too, or a session: so job logs and
// agents' addresses are for those who can read the 0600 token file, as the files themselves
// are. The server's Host check, deadlines and connection limits are metrics::HttpServer's.
//
// Threading: thread-safe (the server's threads call the services' thread-safe handlers).
// Cost: a listing per request; nothing cached.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "head/head_service.h"
#include "metrics/http_server.h"
#include "metrics/metric_registry.h"
#include "train/job_manager.h"

namespace tessera {

struct HeadHttpOptions {
  std::string host = "127.0.0.1";
  int port = 0;              // 0: an ephemeral port
  std::string bearer_token;  // the cluster token; "" asks for none (tests only)
  std::string scrape_token;  // also opens /metrics (rpc::DeriveScrapeToken); "": none
  // The dashboard's static files; "" serves none (/ is then 404).
  std::string dashboard_dir;
  // Where the jobs' logs are (JobManagerOptions::jobs_dir).
  std::string jobs_dir;
  HeadService* service = nullptr;     // required
  train::JobManager* jobs = nullptr;  // required
  // Where its families go, beside those the head's other parts registered (RPC and scheduling
  // latencies); null: a registry of its own. Must outlive the HeadHttp.
  metrics::MetricRegistry* registry = nullptr;
};

class HeadHttp {
 public:
  static absl::StatusOr<std::unique_ptr<HeadHttp>> Start(HeadHttpOptions options);
  ~HeadHttp();
  int port() const { return server_->port(); }
  // The sessions the dashboard logs in to; the head issues their tickets over gRPC
  // (HeadAdminService::CreateDashboardLogin).
  const std::shared_ptr<metrics::HttpSessions>& sessions() const { return sessions_; }
  void Stop();
  // Adds a route that asks for the cluster token as /api/v1 does (HeadExtension's JSON).
  absl::Status Handle(std::string path, metrics::HttpHandler handler);

 private:
  HeadHttp() = default;
  absl::Status RegisterMetrics();
  // A gauge whose samples `callback` emits at each scrape, kept registered as long as this.
  absl::Status AddGauge(metrics::MetricDefinition definition, metrics::CollectCallback callback);
  // The families of RegisterMetrics, by what they count: nodes and their resources;
  // reservations (placement and slice groups) and demand; training gangs; the head's counters.
  absl::Status RegisterNodeGauges(const std::function<v1::ClusterStatus()>& status_of);
  absl::Status RegisterReservationGauges(const std::function<v1::ClusterStatus()>& status_of);
  absl::Status RegisterGangGauges();
  absl::Status RegisterCounters();
  absl::Status AddRoutes();
  // The JSON lists: cluster, nodes, placement_groups, slices, actors, jobs and events.
  absl::Status AddListRoutes();

  HeadHttpOptions options_;
  metrics::MetricRegistry own_registry_;
  metrics::MetricRegistry* registry_ = &own_registry_;  // options_.registry when given
  std::shared_ptr<metrics::HttpSessions> sessions_;
  std::vector<metrics::CallbackRegistration> callbacks_;
  std::unique_ptr<metrics::HttpServer> server_;
};

// Where the dashboard's files are for this process: beside an installed binary
// (<prefix>/share/tessera/dashboard, from /proc/self/exe), else the source tree's web/dashboard
// this binary was built from; "" when neither exists.
std::string FindDashboardDir();

}  // namespace tessera

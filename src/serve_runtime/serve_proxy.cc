#include "serve_runtime/serve_proxy.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "base/ignore_status.h"
#include "base/log_line.h"
#include "base/status_macros.h"
#include "serve_runtime/python_call_codec.h"

namespace tessera::serve {
namespace {

constexpr char kHttpMethod[] = "handle_http";
constexpr char kRejectedHeader[] = "x-tessera-serve-rejected";
constexpr char kModelIdHeader[] = "serve_multiplexed_model_id";
constexpr char kInternalError[] = "Internal Server Error";
constexpr char kNoRoutes[] = "Route table is not populated yet.";
constexpr char kDraining[] = "This node is being drained.";
// The status a client that left is recorded with (Ray's).
constexpr char kDisconnection[] = "disconnection";
// A request whose replica's actor died before it answered is routed again at most this many
// times (as a handle's request, python/tessera/serve/handle.py).
constexpr int kMaxDeadReplicaRetries = 30;

}  // namespace

// What every request of the proxy shares, alive as long as any request is.
struct ServeProxy::Core {
  // The metric families of the proxy; all null without a registry.
  struct Metrics {
    metrics::CounterFamily* requests = nullptr;
    metrics::CounterFamily* errors = nullptr;
    metrics::CounterFamily* deployment_errors = nullptr;
    metrics::HistogramFamily* latency = nullptr;
    metrics::Gauge* ongoing = nullptr;  // this proxy's series
  };
  // A request's metric labels.
  struct Labels {
    std::string route;
    std::string method;
    std::string application;
    std::string deployment;  // the ingress; "" when no route matched
  };

  ReplicaRuntime* runtime = nullptr;
  Clock* clock = nullptr;
  std::optional<absl::Duration> request_timeout;
  Metrics families;

  absl::Mutex mu;
  int64_t live ABSL_GUARDED_BY(mu) = 0;  // requests not yet ended

  void Began() {
    if (families.ongoing != nullptr) families.ongoing->Add(1);
    absl::MutexLock lock(&mu);
    ++live;
  }
  void Ended() {
    if (families.ongoing != nullptr) families.ongoing->Add(-1);
    absl::MutexLock lock(&mu);
    --live;
  }
  int64_t Live() {
    absl::MutexLock lock(&mu);
    return live;
  }
  void AwaitNoneLive() {
    absl::MutexLock lock(&mu);
    auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return live == 0; };
    mu.Await(absl::Condition(&none));
  }
  // One request's outcome: `code` is its status ("200") or kDisconnection.
  void Record(const Labels& labels, const std::string& code, absl::Time arrived) const {
    if (families.requests == nullptr) return;
    const double ms = absl::ToDoubleMilliseconds(clock->Now() - arrived);
    absl::StatusOr<metrics::Counter*> requests =
        families.requests->WithLabels({labels.route, labels.method, labels.application, code});
    if (requests.ok()) (*requests)->Increment();
    absl::StatusOr<metrics::Histogram*> latency =
        families.latency->WithLabels({labels.method, labels.route, labels.application, code});
    if (latency.ok()) (*latency)->Observe(ms);
    int status = 0;
    const bool error = code == kDisconnection || (absl::SimpleAtoi(code, &status) && status >= 400);
    if (!error) return;
    absl::StatusOr<metrics::Counter*> errors =
        families.errors->WithLabels({labels.route, code, labels.method, labels.application});
    if (errors.ok()) (*errors)->Increment();
    if (labels.deployment.empty()) return;
    absl::StatusOr<metrics::Counter*> deployment_errors = families.deployment_errors->WithLabels(
        {labels.deployment, code, labels.method, labels.route, labels.application});
    if (deployment_errors.ok()) (*deployment_errors)->Increment();
  }
};

namespace {

using Core = ServeProxy::Core;
using Labels = ServeProxy::Core::Labels;

// DEFAULT_LATENCY_BUCKET_MS (reference §6).
std::vector<double> LatencyBucketsMs() {
  return {1,   2,    5,    10,   20,    50,    100,    200,    300,   400,
          500, 1000, 2000, 5000, 10000, 60000, 120000, 300000, 600000};
}

HttpHeaders TextPlain() { return {{"content-type", "text/plain; charset=utf-8"}}; }

// The method as a label: a standard one, else OTHER (clients choose methods freely).
std::string MethodLabel(const std::string& method) {
  static constexpr std::string_view kKnown[] = {"GET",   "HEAD",    "POST",  "PUT",    "DELETE",
                                                "PATCH", "OPTIONS", "TRACE", "CONNECT"};
  for (std::string_view known : kKnown) {
    if (method == known) return method;
  }
  return "OTHER";
}

absl::StatusOr<Core::Metrics> MakeMetrics(metrics::MetricRegistry* registry,
                                          const std::string& node_id, const std::string& node_ip) {
  Core::Metrics out;
  if (registry == nullptr) return out;
  TESSERA_ASSIGN_OR_RETURN(
      out.requests,
      registry->AddCounter({.name = "ray_serve_num_http_requests_total",
                            .help = "HTTP requests the Serve proxy answered.",
                            .label_names = {"route", "method", "application", "status_code"}}));
  TESSERA_ASSIGN_OR_RETURN(
      out.errors,
      registry->AddCounter({.name = "ray_serve_num_http_error_requests_total",
                            .help = "HTTP requests the Serve proxy answered with an error.",
                            .label_names = {"route", "error_code", "method", "application"}}));
  TESSERA_ASSIGN_OR_RETURN(
      out.deployment_errors,
      registry->AddCounter(
          {.name = "ray_serve_num_deployment_http_error_requests_total",
           .help = "HTTP requests to a deployment that the Serve proxy answered with an error.",
           .label_names = {"deployment", "error_code", "method", "route", "application"}}));
  TESSERA_ASSIGN_OR_RETURN(
      out.latency,
      registry->AddHistogram(
          {.name = "ray_serve_http_request_latency_ms",
           .help = "End-to-end latency of HTTP requests at the Serve proxy, in milliseconds.",
           .label_names = {"method", "route", "application", "status_code"}},
          LatencyBucketsMs()));
  TESSERA_ASSIGN_OR_RETURN(
      metrics::GaugeFamily * ongoing,
      registry->AddGauge({.name = "ray_serve_num_ongoing_http_requests",
                          .help = "HTTP requests in flight at the Serve proxy.",
                          .label_names = {"node_id", "node_ip_address"}}));
  TESSERA_ASSIGN_OR_RETURN(out.ongoing, ongoing->WithLabels({node_id, node_ip}));
  return out;
}

// The longest prefix of `routes` (longest first) that matches `path`, as Ray's proxy matches.
const RouteEntry* MatchRoute(const std::vector<RouteEntry>& routes, std::string_view path) {
  for (const RouteEntry& route : routes) {
    const std::string& prefix = route.route_prefix;
    if (prefix.empty() || path.substr(0, prefix.size()) != prefix) continue;
    if (prefix.back() == '/' || path.size() == prefix.size() || path[prefix.size()] == '/') {
      return &route;
    }
  }
  return nullptr;
}

std::string HeaderValue(const metrics::HttpRequest& head, std::string_view name) {
  std::optional<std::string_view> value = head.Header(name);
  return value.has_value() ? std::string(*value) : std::string();
}

// The replica's request frame (serve-common's HEAD fields, then the body).
std::string RequestFrame(const ProxyRequest& request, const std::string& route_prefix) {
  const metrics::HttpRequest& head = request.head;
  nlohmann::json headers = nlohmann::json::array();
  for (const auto& [name, value] : head.headers) headers.push_back({name, value});
  const std::string_view target = head.target;
  const nlohmann::json json = {
      {"method", head.method},
      {"path", head.path},
      {"raw_path", std::string(target.substr(0, target.find('?')))},
      {"query_string", head.raw_query},
      {"headers", std::move(headers)},
      {"http_version", absl::StrCat("1.", head.minor_version)},
      {"route_prefix", route_prefix},
      {"request_id", request.request_id},
      {"client", {request.client_address, request.client_port}},
      {"multiplexed_model_id", HeaderValue(head, kModelIdHeader)},
  };
  // Header values are bytes; one that is not UTF-8 travels with its bad bytes replaced.
  return EncodeFrame(json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                     request.body);
}

// The first item of a response: its head, and the first body bytes.
struct ResponseHead {
  int status = 200;
  HttpHeaders headers;
  bool more = false;
  bool rejected = false;  // the replica was full
  std::string body;
};

absl::StatusOr<ResponseHead> ParseResponseHead(std::string_view item) {
  TESSERA_ASSIGN_OR_RETURN(FrameParts parts, SplitFrame(item));
  const nlohmann::json json =
      nlohmann::json::parse(parts.head.begin(), parts.head.end(), nullptr, false);
  const auto malformed = [](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("a replica's response head is malformed: ", std::string(why)));
  };
  if (!json.is_object()) return malformed("not a JSON object");
  ResponseHead head;
  auto status = json.find("status");
  if (status == json.end() || !status->is_number_integer()) return malformed("no integer status");
  head.status = status->get<int>();
  auto more = json.find("more");
  head.more = more != json.end() && more->is_boolean() && more->get<bool>();
  auto headers = json.find("headers");
  if (headers != json.end() && !headers->is_array()) return malformed("headers is no list");
  if (headers != json.end()) {
    for (const nlohmann::json& pair : *headers) {
      if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string()) {
        return malformed("a header is no [name, value] pair of strings");
      }
      std::string name = pair[0].get<std::string>();
      if (absl::AsciiStrToLower(name) == kRejectedHeader) head.rejected = true;
      head.headers.emplace_back(std::move(name), pair[1].get<std::string>());
    }
  }
  head.body = std::string(parts.body);
  return head;
}

// One request from its arrival to its end: queued at the router, streamed from a replica (again
// after a rejection), answered. Owned by the callbacks that may still come (shared).
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(std::shared_ptr<Core> core, std::shared_ptr<ResponseWriter> writer, Labels labels,
           absl::Time arrived)
      : core_(std::move(core)),
        writer_(std::move(writer)),
        labels_(std::move(labels)),
        arrived_(arrived) {
    core_->Began();
  }

  // Answers at once with a whole response.
  void Respond(int status, HttpHeaders headers, std::string body) {
    Record(absl::StrCat(status));  // before the client can have the response
    IgnoreStatus(
        writer_->Start(status, std::move(headers), ResponseMode::kComplete, std::move(body)),
        "a client gone meanwhile takes nothing");
    End();
  }

  // Routes the request and streams the response of the replica chosen.
  void Begin(std::shared_ptr<DeploymentRouter> router, RouteRequest request, std::string frame) {
    router_ = std::move(router);
    request_ = std::move(request);
    frame_ = std::move(frame);
    absl::StatusOr<DeploymentRouter::Ticket> ticket = router_->Route(request_, Assigner());
    if (!ticket.ok()) {
      // Backpressure (Ray's 503 with the BackPressureError text), or a router stopped.
      Respond(503, TextPlain(), std::string(ticket.status().message()));
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      // Tickets only grow: a later one (after a rejection) is never overwritten.
      if (replica_.empty()) ticket_ = std::max(ticket_, *ticket);
    }
    std::weak_ptr<Exchange> weak = weak_from_this();
    writer_->OnClientGone([weak] {
      if (std::shared_ptr<Exchange> self = weak.lock()) self->ClientGone();
    });
  }

 private:
  RouteCallback Assigner() {
    return [self = shared_from_this()](absl::StatusOr<std::string> replica) {
      self->Assigned(std::move(replica));
    };
  }

  void Assigned(absl::StatusOr<std::string> replica) {
    if (!replica.ok()) {
      // Cancelled: the client left (recorded then), or the router stopped with the proxy.
      Respond(503, TextPlain(), std::string(replica.status().message()));
      return;
    }
    uint64_t attempt = 0;
    bool gone = false;
    {
      absl::MutexLock lock(&mu_);
      gone = client_gone_;
      replica_ = *replica;
      attempt = ++attempt_;
    }
    if (gone) {
      router_->Finished(*replica);
      End();
      return;
    }
    std::shared_ptr<Exchange> self = shared_from_this();
    std::unique_ptr<ReplicaStream> stream = core_->runtime->CallStreaming(
        *replica, kHttpMethod, frame_,
        [self, attempt](std::string item) { self->OnItem(attempt, std::move(item)); },
        [self, attempt](absl::Status end) { self->OnEnd(attempt, std::move(end)); });
    ReplicaStream* cancel = nullptr;
    {
      absl::MutexLock lock(&mu_);
      streams_.push_back(std::move(stream));
      if (attempt == attempt_) {
        current_stream_ = streams_.back().get();
        if (client_gone_) cancel = current_stream_;  // it left while the stream started
      }
    }
    if (cancel != nullptr) cancel->Cancel();
  }

  void OnItem(uint64_t attempt, std::string item) {
    bool first = false;
    {
      absl::MutexLock lock(&mu_);
      if (attempt != attempt_ || complete_) return;
      first = !head_sent_;
    }
    if (first) {
      OnFirstItem(attempt, std::move(item));
      return;
    }
    if (absl::Status written = writer_->Write(item); !written.ok()) return;  // the client left
    WaitWritable();
  }

  void OnFirstItem(uint64_t attempt, std::string item) {
    absl::StatusOr<ResponseHead> head = ParseResponseHead(item);
    if (head.ok() && head->rejected) {
      Reroute();
      return;
    }
    // The application's head may be one HTTP does not allow (a header with a line break, ...).
    const absl::Status valid =
        head.ok() ? ValidateResponseHead(head->status, head->headers) : head.status();
    if (!valid.ok()) {
      FailBeforeHead(valid);
      CancelStream();
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      if (attempt != attempt_) return;
      head_sent_ = true;
      status_ = head->status;
      complete_ = !head->more;
    }
    // Recorded before the client can have the response (a whole one ends here).
    if (!head->more) Record(absl::StrCat(head->status));
    const ResponseMode mode = head->more ? ResponseMode::kStreaming : ResponseMode::kComplete;
    const bool more = head->more;
    if (absl::Status started =
            writer_->Start(head->status, std::move(head->headers), mode, std::move(head->body));
        !started.ok()) {
      absl::MutexLock lock(&mu_);
      complete_ = true;  // the client left: nothing more goes to it
      return;
    }
    if (more) WaitWritable();
  }

  // The replica was full: the request waits again, first in line.
  void Reroute() {
    std::string replica;
    {
      absl::MutexLock lock(&mu_);
      replica = replica_;
      replica_.clear();
      ++attempt_;  // this stream's end is not the request's
      current_stream_ = nullptr;
    }
    const DeploymentRouter::Ticket ticket = router_->Rejected(replica, request_, Assigner());
    absl::MutexLock lock(&mu_);
    if (replica_.empty()) ticket_ = std::max(ticket_, ticket);
  }

  void OnEnd(uint64_t attempt, absl::Status end) {
    if (absl::IsUnavailable(end) && RouteAroundDeadReplica(attempt, end)) return;
    std::string replica;
    bool head_sent = false;
    bool complete = false;
    bool gone = false;
    int status = 0;
    {
      absl::MutexLock lock(&mu_);
      if (attempt != attempt_) return;  // a rejected attempt's stream
      replica = replica_;
      head_sent = head_sent_;
      complete = complete_;
      gone = client_gone_;
      status = status_;
      complete_ = true;
    }
    router_->Finished(replica);
    if (!gone && !head_sent) {
      FailBeforeHead(end.ok() ? absl::InternalError("its stream ended without a response head")
                              : end);
    } else if (!gone && !complete) {
      Record(absl::StrCat(status));
      if (end.ok()) {
        IgnoreStatus(writer_->Finish(), "a client gone meanwhile takes nothing");
      } else {
        LogLine(absl::StrCat("serve proxy: request ", request_.request_id, " to ", replica,
                             " broke off: ", end.message()));
        writer_->Fail();
      }
    }
    End();
  }

  // The replica's actor died before it answered (its stream ended Unavailable with no head):
  // as Ray's router on ActorDiedError, the replica is routed around and the request waits
  // again, first in line. False (nothing done) when the client left, the head went out, or
  // the request was sent to dead replicas kMaxDeadReplicaRetries times already.
  bool RouteAroundDeadReplica(uint64_t attempt, const absl::Status& end) {
    std::string replica;
    {
      absl::MutexLock lock(&mu_);
      if (attempt != attempt_ || head_sent_ || complete_ || client_gone_ ||
          dead_replica_retries_ >= kMaxDeadReplicaRetries) {
        return false;
      }
      ++dead_replica_retries_;
      replica = replica_;
    }
    LogLine(absl::StrCat("serve proxy: request ", request_.request_id,
                         " routed again: ", end.message()));
    router_->Died(replica);
    Reroute();
    return true;
  }

  void FailBeforeHead(const absl::Status& why) {
    LogLine(absl::StrCat("serve proxy: request ", request_.request_id, ": ", why.message()));
    {
      absl::MutexLock lock(&mu_);
      head_sent_ = true;
      complete_ = true;
    }
    Record("500");
    IgnoreStatus(writer_->Start(500, TextPlain(), ResponseMode::kComplete, kInternalError),
                 "a client gone meanwhile takes nothing");
  }

  void CancelStream() {
    ReplicaStream* stream = nullptr;
    {
      absl::MutexLock lock(&mu_);
      stream = current_stream_;
    }
    if (stream != nullptr) stream->Cancel();
  }

  // The loop thread (or Stop's): must not block.
  void ClientGone() {
    ReplicaStream* stream = nullptr;
    DeploymentRouter::Ticket ticket = 0;
    {
      absl::MutexLock lock(&mu_);
      if (client_gone_) return;
      client_gone_ = true;
      stream = current_stream_;
      ticket = replica_.empty() ? ticket_ : 0;
    }
    const bool timed_out = core_->request_timeout.has_value() &&
                           core_->clock->Now() - arrived_ >= *core_->request_timeout;
    Record(timed_out ? "408" : kDisconnection);
    // Queued: dropped (its callback then ends it); running: its stream is cancelled.
    if (ticket != 0) router_->Cancel(ticket);
    if (stream != nullptr) stream->Cancel();
  }

  // While the client's connection holds too much, the delivering thread waits for it.
  void WaitWritable() {
    if (!writer_->WouldBuffer()) return;
    auto writable = std::make_shared<absl::Notification>();
    writer_->OnWritable([writable] { writable->Notify(); });
    writable->WaitForNotification();
  }

  void Record(const std::string& code) {
    {
      absl::MutexLock lock(&mu_);
      if (recorded_) return;
      recorded_ = true;
    }
    core_->Record(labels_, code, arrived_);
  }

  void End() {
    {
      absl::MutexLock lock(&mu_);
      if (ended_) return;
      ended_ = true;
    }
    core_->Ended();
  }

  const std::shared_ptr<Core> core_;
  const std::shared_ptr<ResponseWriter> writer_;
  const Labels labels_;
  const absl::Time arrived_;
  // Set by Begin, before any callback can come.
  std::shared_ptr<DeploymentRouter> router_;
  RouteRequest request_;
  std::string frame_;

  absl::Mutex mu_;
  DeploymentRouter::Ticket ticket_ ABSL_GUARDED_BY(mu_) = 0;
  std::string replica_ ABSL_GUARDED_BY(mu_);   // "" while queued
  uint64_t attempt_ ABSL_GUARDED_BY(mu_) = 0;  // the stream whose items count
  // Every stream started (a handle's Cancel stays valid while the exchange lives).
  std::vector<std::unique_ptr<ReplicaStream>> streams_ ABSL_GUARDED_BY(mu_);
  ReplicaStream* current_stream_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool head_sent_ ABSL_GUARDED_BY(mu_) = false;
  bool complete_ ABSL_GUARDED_BY(mu_) = false;  // nothing more goes to the client
  int status_ ABSL_GUARDED_BY(mu_) = 200;
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
  int dead_replica_retries_ ABSL_GUARDED_BY(mu_) = 0;
  bool recorded_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
};

absl::Status CheckOptions(const ServeProxyOptions& options) {
  if (options.runtime == nullptr || options.replica_sets == nullptr) {
    return absl::InvalidArgumentError("a serve proxy needs a replica runtime and a source");
  }
  if (options.node_id.empty()) return absl::InvalidArgumentError("a serve proxy needs a node id");
  if (options.routes_wait <= absl::ZeroDuration() || options.routes_retry <= absl::ZeroDuration() ||
      options.router_watch_wait <= absl::ZeroDuration() ||
      options.report_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "a serve proxy's routes_wait, routes_retry, router_watch_wait and report_interval must "
        "be positive");
  }
  return absl::OkStatus();
}

}  // namespace

ServeProxy::ServeProxy(ServeProxyOptions options, std::shared_ptr<Core> core)
    : options_(std::move(options)), core_(std::move(core)) {}

absl::StatusOr<std::unique_ptr<ServeProxy>> ServeProxy::Start(ServeProxyOptions options) {
  TESSERA_RETURN_IF_ERROR(CheckOptions(options));
  if (options.http.clock == nullptr) options.http.clock = Clock::Real();
  auto core = std::make_shared<Core>();
  core->runtime = options.runtime;
  core->clock = options.http.clock;
  core->request_timeout = options.http.request_timeout;
  TESSERA_ASSIGN_OR_RETURN(core->families,
                           MakeMetrics(options.metrics, options.node_id, options.node_ip_address));
  std::unique_ptr<ServeProxy> proxy(new ServeProxy(std::move(options), std::move(core)));
  ServeProxy* self = proxy.get();
  TESSERA_ASSIGN_OR_RETURN(
      proxy->server_,
      HttpProxyServer::Start(self->options_.http,
                             [self](ProxyRequest request, std::shared_ptr<ResponseWriter> writer) {
                               self->Handle(std::move(request), std::move(writer));
                             }));
  proxy->watcher_ = std::thread([self] { self->WatchRoutes(); });
  return proxy;
}

ServeProxy::~ServeProxy() { Stop(); }

int ServeProxy::port() const { return server_->port(); }

HttpProxyServerStats ServeProxy::http_stats() const { return server_->stats(); }

uint64_t ServeProxy::route_table_version() const {
  absl::MutexLock lock(&mu_);
  return routes_version_;
}

int64_t ServeProxy::ongoing_requests() const { return core_->Live(); }

void ServeProxy::SetDraining(bool draining) {
  absl::MutexLock lock(&mu_);
  draining_ = draining;
}

void ServeProxy::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  // No request comes after it; those in flight are cancelled (their OnClientGone run here).
  if (server_ != nullptr) server_->Stop();
  if (watcher_.joinable()) watcher_.join();
  std::map<std::string, std::shared_ptr<DeploymentRouter>> routers;
  {
    absl::MutexLock lock(&mu_);
    routers.swap(routers_);
  }
  // Requests still queued get Cancelled, which ends them.
  for (auto& [application, router] : routers) router->Stop();
  core_->AwaitNoneLive();
}

// --- Requests ---------------------------------------------------------------------------------

void ServeProxy::Handle(ProxyRequest request, std::shared_ptr<ResponseWriter> writer) {
  const std::string& path = request.head.path;
  if (path == "/-/healthz" || path == "/-/routes") {
    AnswerOwnRoute(request, std::move(writer));
    return;
  }
  const absl::Time arrived = core_->clock->Now();
  std::optional<RouteEntry> route = Match(path);
  auto exchange = std::make_shared<Exchange>(
      core_, writer,
      Labels{.route = route.has_value() ? route->route_prefix : "",
             .method = MethodLabel(request.head.method),
             .application = route.has_value() ? route->application : "",
             .deployment = route.has_value() ? route->ingress_deployment : ""},
      arrived);
  if (!route.has_value()) {
    exchange->Respond(404, TextPlain(),
                      absl::StrCat("Path '", path,
                                   "' not found. Ping http://.../-/routes for available routes."));
    return;
  }
  absl::StatusOr<std::shared_ptr<DeploymentRouter>> router = RouterFor(*route);
  if (!router.ok()) {
    LogLine(absl::StrCat("serve proxy: no router for application ", route->application, ": ",
                         router.status().message()));
    exchange->Respond(500, TextPlain(), kInternalError);
    return;
  }
  RouteRequest route_request{.request_id = request.request_id,
                             .multiplexed_model_id = HeaderValue(request.head, kModelIdHeader)};
  exchange->Begin(*std::move(router), std::move(route_request),
                  RequestFrame(request, route->route_prefix));
}

void ServeProxy::AnswerOwnRoute(const ProxyRequest& request,
                                std::shared_ptr<ResponseWriter> writer) {
  const std::string& path = request.head.path;
  auto exchange = std::make_shared<Exchange>(
      core_, std::move(writer),
      Labels{.route = path, .method = MethodLabel(request.head.method), .application = ""},
      core_->clock->Now());
  bool populated = false;
  bool draining = false;
  nlohmann::json routes = nlohmann::json::object();
  {
    absl::MutexLock lock(&mu_);
    populated = populated_;
    draining = draining_;
    for (const RouteEntry& route : routes_) routes[route.route_prefix] = route.application;
  }
  if (path == "/-/healthz") {
    if (draining) {
      exchange->Respond(503, TextPlain(), kDraining);
    } else {
      exchange->Respond(populated ? 200 : 503, TextPlain(), populated ? "success" : kNoRoutes);
    }
    return;
  }
  exchange->Respond(200, {{"content-type", "application/json"}},
                    routes.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

std::optional<RouteEntry> ServeProxy::Match(const std::string& path) const {
  absl::MutexLock lock(&mu_);
  const RouteEntry* route = MatchRoute(routes_, path);
  if (route == nullptr) return std::nullopt;
  return *route;
}

absl::StatusOr<std::shared_ptr<DeploymentRouter>> ServeProxy::RouterFor(const RouteEntry& route) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::CancelledError("the serve proxy is stopping");
  auto found = routers_.find(route.application);
  if (found != routers_.end()) return found->second;
  // Proxies prefer their own node, then their zone (Ray's RAY_SERVE_PROXY_PREFER_LOCAL_*).
  TESSERA_ASSIGN_OR_RETURN(
      std::unique_ptr<DeploymentRouter> router,
      DeploymentRouter::Create({.application = route.application,
                                .deployment = "",
                                .source = absl::StrCat("proxy:", options_.node_id),
                                .runtime = options_.runtime,
                                .replica_sets = options_.replica_sets,
                                .clock = core_->clock,
                                .self_node_id = options_.node_id,
                                .prefer_local_node = true,
                                .prefer_local_az = true,
                                .watch_wait = options_.router_watch_wait,
                                .report_interval = options_.report_interval,
                                .seed = options_.seed}));
  std::shared_ptr<DeploymentRouter> shared = std::move(router);
  routers_.emplace(route.application, shared);
  return shared;
}

// --- The route table --------------------------------------------------------------------------

void ServeProxy::WatchRoutes() {
  uint64_t known = 0;
  bool first = true;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    absl::StatusOr<RouteTable> table =
        options_.replica_sets->GetRoutes(known, options_.routes_wait);
    if (table.ok()) {
      if (first || table->version != known) ApplyRoutes(*table);
      first = false;
      known = table->version;
      continue;
    }
    absl::MutexLock lock(&mu_);
    auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    core_->clock->AwaitWithDeadline(mu_, absl::Condition(&stopping),
                                    core_->clock->Now() + options_.routes_retry);
  }
}

void ServeProxy::ApplyRoutes(const RouteTable& table) {
  std::vector<RouteEntry> routes;
  for (const RouteEntry& route : table.routes) {
    if (!route.route_prefix.empty()) routes.push_back(route);
  }
  std::stable_sort(routes.begin(), routes.end(), [](const RouteEntry& a, const RouteEntry& b) {
    return a.route_prefix.size() > b.route_prefix.size();
  });
  std::vector<std::shared_ptr<DeploymentRouter>> gone;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = routers_.begin(); it != routers_.end();) {
      const bool routed = std::any_of(routes.begin(), routes.end(), [&](const RouteEntry& route) {
        return route.application == it->first;
      });
      if (routed) {
        ++it;
      } else {
        gone.push_back(std::move(it->second));
        it = routers_.erase(it);
      }
    }
    routes_ = std::move(routes);
    routes_version_ = table.version;
    populated_ = true;
  }
  // Their requests still queued end Cancelled (503); those streaming go on.
  for (const std::shared_ptr<DeploymentRouter>& router : gone) router->Stop();
}

}  // namespace tessera::serve

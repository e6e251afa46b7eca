#include "head/head_server.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "client/cluster_client.h"
#include "head/head_service_internal.h"
#include "head/node_agent_client.h"
#include "head/redis_state_store.h"
#include "process/private_paths.h"
#include "rpc/token.h"
#include "train/cluster_gang_backend.h"

namespace tessera {

namespace {

// The host clients on this machine dial for a wildcard bind.
std::string DialableHost(const std::string& bind) {
  if (bind == "0.0.0.0" || bind.empty()) return "127.0.0.1";
  if (bind == "::" || bind == "[::]") return "::1";
  return bind;
}

// The job manager's records in the head's StateStore, through its StoreWriter: a submission's
// record is a write the caller is answered on, a job's progress the head's own (kept while the
// store is degraded).
class StoredJobRecords final : public train::JobRecordStore {
 public:
  explicit StoredJobRecords(StoreWriter* writer) : writer_(writer) {}
  absl::Status Writable() const override { return writer_->Writable(); }
  absl::Status Put(const JobId& job_id, const std::string& record) override {
    return writer_->Write(train::kTrainJobsTable, job_id.value(), record);
  }
  void Keep(const JobId& job_id, const std::string& record) override {
    writer_->Put(train::kTrainJobsTable, job_id.value(), record);
  }
  void Forget(const JobId& job_id) override {
    writer_->Delete(train::kTrainJobsTable, job_id.value());
  }
  // The store's keys are the job ids.
  absl::StatusOr<std::vector<std::pair<JobId, std::string>>> List() const override {
    TESSERA_ASSIGN_OR_RETURN(auto entries, writer_->store()->List(train::kTrainJobsTable));
    std::vector<std::pair<JobId, std::string>> records;
    records.reserve(entries.size());
    for (auto& [key, record] : entries) records.emplace_back(JobId(key), std::move(record));
    return records;
  }

 private:
  StoreWriter* const writer_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<HeadServer>> HeadServer::Create(const HeadOptions& options) {
  if (options.state_dir.empty()) return absl::InvalidArgumentError("state folder is empty");
  if (options.heartbeat_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("heartbeat interval must be positive");
  }
  if (options.node_timeout <= options.heartbeat_interval) {
    return absl::InvalidArgumentError("node timeout must be longer than the heartbeat interval");
  }
  if (absl::Status status = EnsurePrivateDirectory(options.state_dir); !status.ok()) return status;
  std::unique_ptr<HeadServer> head(new HeadServer());
  head->options_ = options;
  TESSERA_RETURN_IF_ERROR(head->ReadTokens());
  TESSERA_RETURN_IF_ERROR(head->OpenStore());
  TESSERA_RETURN_IF_ERROR(head->StartService());
  head->StartJobManager();
  TESSERA_RETURN_IF_ERROR(head->BuildExtensions());
  TESSERA_RETURN_IF_ERROR(head->ServeRpc());
  if (options.http_port >= 0) {
    TESSERA_RETURN_IF_ERROR(head->ServeHttp());
  }

  HeadServer* raw = head.get();
  head->ticker_ = std::thread([raw] { raw->HealthLoop(); });
  head->reconciler_ = std::thread([raw] { raw->ReconcileLoop(); });
  // The jobs a previous head ran, once their controllers can call this head.
  if (absl::Status resumed = head->jobs_->Resume(); !resumed.ok()) {
    head->Shutdown();
    return absl::Status(resumed.code(),
                        absl::StrCat("cannot adopt the training jobs: ", resumed.message()));
  }
  TESSERA_RETURN_IF_ERROR(head->PublishAddresses());
  TESSERA_RETURN_IF_ERROR(head->StartExtensions());
  return head;
}

absl::Status HeadServer::BuildExtensions() {
  HeadExtensionContext context;
  context.state_dir = options_.state_dir;
  context.store = store_.get();
  context.durable = !options_.redis_address.empty();
  context.clock = service_->clock();
  context.registry = &registry_;
  context.service = service_.get();
  for (const HeadExtensionFactory& factory : options_.extensions) {
    auto extension = factory(context);
    if (!extension.ok()) return extension.status();
    extensions_.push_back(*std::move(extension));
  }
  return absl::OkStatus();
}

absl::Status HeadServer::StartExtensions() {
  HeadEndpoints endpoints;
  endpoints.address = address_;
  endpoints.token_file = options_.state_dir + "/token";
  endpoints.http_address = http_address_;
  if (http_ != nullptr) {
    HeadHttp* http = http_.get();
    endpoints.add_http_route = [http](std::string path, metrics::HttpHandler handler) {
      return http->Handle(std::move(path), std::move(handler));
    };
  }
  for (const std::unique_ptr<HeadExtension>& extension : extensions_) {
    if (absl::Status started = extension->Start(endpoints); !started.ok()) {
      Shutdown();
      return started;
    }
  }
  return absl::OkStatus();
}

absl::Status HeadServer::ReadTokens() {
  auto token = rpc::ReadOrCreateTokenFile(options_.state_dir + "/token");
  if (!token.ok()) return token.status();
  token_ = *token;
  // What Prometheus is given instead of the token (docs/observability.md).
  auto scrape_token = rpc::DeriveScrapeToken(token_);
  if (!scrape_token.ok()) return scrape_token.status();
  return rpc::WriteTokenFile(options_.state_dir + "/scrape-token", *scrape_token);
}

absl::Status HeadServer::OpenStore() {
  if (options_.redis_address.empty()) {
    store_ = std::make_unique<InMemoryStateStore>();
    return absl::OkStatus();
  }
  RedisStateStoreOptions redis;
  redis.address = options_.redis_address;
  redis.password_file = options_.redis_password_file;
  redis.key_prefix = options_.redis_key_prefix;
  auto store = RedisStateStore::Create(std::move(redis));
  if (!store.ok()) return store.status();
  store_ = *std::move(store);
  return absl::OkStatus();
}

absl::Status HeadServer::StartService() {
  rpc::RetryOptions retry;
  retry.attempt_timeout = absl::Seconds(2);
  // Bounded by the node timeout: past it the node is dead anyway.
  retry.total_budget = options_.node_timeout;
  auto latency = HeadLatencyMetrics::Register(registry_);
  if (!latency.ok()) return latency.status();
  auto store_metrics = StateStoreMetrics::Register(registry_);
  if (!store_metrics.ok()) return store_metrics.status();
  auto rpc_metrics = rpc::RpcServerMetrics::Create(registry_);
  if (!rpc_metrics.ok()) return rpc_metrics.status();
  rpc_metrics_ = *std::move(rpc_metrics);
  HeadServiceOptions service_options;
  service_options.latency = *latency;
  service_options.store_metrics = *store_metrics;
  service_options.heartbeat_interval = options_.heartbeat_interval;
  service_options.node_timeout = options_.node_timeout;
  service_options.driver_timeout = options_.driver_timeout;
  service_options.scheduling = options_.scheduling;
  service_options.store = store_.get();
  service_options.agent_clients = GrpcNodeAgentClientFactory(token_, retry);
  HeadServer* raw = this;
  service_options.on_shutdown = [raw] {
    if (!raw->requested_.HasBeenNotified()) raw->requested_.Notify();
  };
  service_ = std::make_unique<HeadService>(std::move(service_options));
  // What a previous head left in the store (Redis) comes back before anything is served.
  if (absl::Status restored = service_->Restore(); !restored.ok()) {
    return absl::Status(restored.code(),
                        absl::StrCat("cannot restore the head's state: ", restored.message()));
  }
  return absl::OkStatus();
}

void HeadServer::StartJobManager() {
  train::JobManagerOptions jobs;
  jobs.jobs_dir = options_.state_dir + "/jobs";
  jobs.clock = service_->clock();
  // On Redis, jobs outlive this process: their records are kept there, and their ranks wait
  // for the next head instead of ending with their watches.
  const bool durable = !options_.redis_address.empty();
  if (durable) {
    job_records_ = std::make_unique<StoredJobRecords>(&service_->store_writer());
    jobs.records = job_records_.get();
  }
  HeadServer* raw = this;
  HeadService* service = service_.get();
  // Each job's controller calls this head in process (its cluster controller,
  // never over gRPC) and the agents on a connection of its own.
  jobs.backends = [raw, service, durable]() -> absl::StatusOr<std::unique_ptr<train::GangBackend>> {
    // For the agents only: its head stub is never called.
    client::ClusterClientOptions client;
    client.state_dir = raw->options_.state_dir;
    client.head_address = raw->address_;
    client.token_file = raw->options_.state_dir + "/token";
    // A rank's agent that does not answer is given up on quickly: its node is being lost.
    client.call_deadline = absl::Seconds(5);
    client.retry_budget = absl::Seconds(3);
    auto connected = client::ClusterClient::Connect(std::move(client));
    if (!connected.ok()) return connected.status();
    return std::make_unique<train::ClusterGangBackend>(service->InProcessHead(),
                                                       *std::move(connected), durable);
  };
  EventLog* events = &service_->mutable_event_log();
  jobs.on_event = [events](const std::string& kind, const std::string& message) {
    events->RecordChange(message, kind);
  };
  jobs_ = std::make_unique<train::JobManager>(std::move(jobs));
}

absl::Status HeadServer::ServeRpc() {
  rpc::ServerOptions server_options;
  server_options.bind_address = options_.bind;
  server_options.port = options_.port;
  server_options.token = token_;
  server_options.metrics = rpc_metrics_.get();
  std::vector<grpc::Service*> services = service_->services();
  services.push_back(jobs_.get());
  for (const std::unique_ptr<HeadExtension>& extension : extensions_) {
    for (grpc::Service* service : extension->services()) services.push_back(service);
  }
  auto server = rpc::RpcServer::Start(server_options, services);
  if (!server.ok()) return server.status();
  server_ = *std::move(server);
  address_ = rpc::JoinHostPort(DialableHost(options_.bind), server_->port());
  return absl::OkStatus();
}

absl::Status HeadServer::ServeHttp() {
  HeadHttpOptions http;
  http.host = options_.bind;
  http.port = options_.http_port;
  // On loopback too: every local user reaches a loopback port, and only the cluster's user
  // reads the token file (and the job logs it would serve).
  http.bearer_token = token_;
  TESSERA_ASSIGN_OR_RETURN(http.scrape_token, rpc::DeriveScrapeToken(token_));
  http.dashboard_dir = options_.dashboard_dir.empty() ? FindDashboardDir() : options_.dashboard_dir;
  http.jobs_dir = options_.state_dir + "/jobs";
  http.service = service_.get();
  http.jobs = jobs_.get();
  http.registry = &registry_;
  auto started = HeadHttp::Start(std::move(http));
  if (!started.ok()) {
    Shutdown();
    return absl::Status(started.status().code(),
                        absl::StrCat("cannot serve HTTP: ", started.status().message()));
  }
  http_ = *std::move(started);
  http_address_ = rpc::JoinHostPort(DialableHost(options_.bind), http_->port());
  service_->set_http(http_address_, http_->sessions());
  return absl::OkStatus();
}

absl::Status HeadServer::PublishAddresses() {
  // head.address last: who waits for it (the CLI, tests) then finds the pid and HTTP files too.
  absl::Status written =
      WritePrivateFileAtomically(options_.state_dir + "/head.pid", absl::StrCat(::getpid(), "\n"));
  if (written.ok() && !http_address_.empty()) {
    written = WritePrivateFileAtomically(options_.state_dir + "/head.http", http_address_ + "\n");
  }
  if (written.ok()) {
    written = WritePrivateFileAtomically(options_.state_dir + "/head.address", address_ + "\n");
  }
  if (!written.ok()) {
    Shutdown();
    return written;
  }
  return absl::OkStatus();
}

HeadServer::~HeadServer() { Shutdown(); }

absl::Duration HeadServer::TickPeriod() const {
  // Often enough that a dead node is noticed within a small fraction of its timeout.
  return std::min(options_.heartbeat_interval / 2, absl::Milliseconds(100));
}

void HeadServer::HealthLoop() {
  while (!stop_ticker_.WaitForNotificationWithTimeout(TickPeriod())) service_->CheckHealth();
}

void HeadServer::ReconcileLoop() {
  // The two-phase rounds run on threads of their own; releasing a gone driver's reservations
  // waits for its agents here, never on the health loop.
  absl::Time targets_due = absl::InfinitePast();
  while (!stop_ticker_.WaitForNotificationWithTimeout(TickPeriod())) {
    service_->Reconcile(/*wait=*/false);
    if (service_->clock()->Now() >= targets_due) {
      WritePrometheusTargets();
      targets_due = service_->clock()->Now() + absl::Seconds(2);
    }
  }
}

void HeadServer::WritePrometheusTargets() {
  if (http_address_.empty()) return;
  // One group per endpoint, so each series carries the node it came from.
  nlohmann::ordered_json groups = nlohmann::ordered_json::array();
  groups.push_back({{"targets", {http_address_}}, {"labels", {{"job", "tessera-head"}}}});
  v1::ListNodesResponse nodes;
  HeadService* service = service_.get();
  if (!head_internal::AllPages(
           [service](v1::ListRequest* r, v1::ListNodesResponse* p) {
             return service->nodes().ListNodes(nullptr, r, p);
           },
           &nodes)
           .ok()) {
    return;
  }
  for (const v1::NodeInfo& node : nodes.nodes()) {
    if (node.state() != v1::NODE_STATE_ALIVE || node.node().http_address().empty()) continue;
    groups.push_back({{"targets", {node.node().http_address()}},
                      {"labels", {{"job", "tessera-node"}, {"node", node.node().node_id()}}}});
  }
  std::string text = groups.dump(2) + "\n";
  if (text == prometheus_targets_) return;
  const std::string dir = options_.state_dir + "/prometheus";
  ::mkdir(dir.c_str(), 0700);
  // Written whole, then renamed over the old one: Prometheus never reads half a file.
  if (WritePrivateFileAtomically(dir + "/targets.json", text).ok()) {
    prometheus_targets_ = std::move(text);
  }
}

void HeadServer::Shutdown() {
  absl::MutexLock lock(&shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  if (!requested_.HasBeenNotified()) requested_.Notify();
  // Extensions first: they own work (replicas) and call the head's parts while they stop.
  for (const std::unique_ptr<HeadExtension>& extension : extensions_) extension->Shutdown();
  // Jobs next: their controllers release their reservations through this head.
  if (jobs_ != nullptr) jobs_->Shutdown();
  if (!stop_ticker_.HasBeenNotified()) stop_ticker_.Notify();
  if (ticker_.joinable()) ticker_.join();
  if (reconciler_.joinable()) reconciler_.join();
  if (http_ != nullptr) http_->Stop();
  // A client's wait for a reservation would hold its call, and so the server, up to its timeout.
  if (service_ != nullptr) service_->EndWaits();
  if (server_ != nullptr) {
    // gRPC waits out the whole grace while any client is still connected, not only while
    // calls run, and the CLI that asked for the shutdown stays connected until it sees this
    // process exit. The head's calls are short unary ones: a brief grace lets them finish.
    server_->Shutdown(absl::Milliseconds(100));
    server_->Wait();
  }
  ::unlink((options_.state_dir + "/head.address").c_str());
  ::unlink((options_.state_dir + "/head.http").c_str());
  ::unlink((options_.state_dir + "/head.pid").c_str());
}

void HeadServer::Wait() { requested_.WaitForNotification(); }

absl::Status RunHead(const HeadOptions& options) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  // Blocked before any thread starts, so every thread inherits the mask and the signals wait
  // for sigtimedwait below instead of killing the process.
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  auto head = HeadServer::Create(options);
  if (!head.ok()) return head.status();
  while (!(*head)->shutdown_requested()) {
    timespec wait{0, 100 * 1000 * 1000};
    int signal = sigtimedwait(&signals, nullptr, &wait);
    if (signal == SIGTERM || signal == SIGINT) break;
  }
  (*head)->Shutdown();
  return absl::OkStatus();
}

}  // namespace tessera

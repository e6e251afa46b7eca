#include "node/agent_server.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/log_line.h"
#include "base/status_macros.h"
#include "metrics/metrics_endpoint.h"
#include "node/agent_proto.h"
#include "node/node_hardware_loader.h"
#include "process/private_paths.h"
#include "rpc/token.h"

namespace tessera {
namespace {

// The store's socket in the node folder (docs/cluster-runtime.md, the state folder).
constexpr char kObjectStoreSocketName[] = "objects.sock";

std::string NewIncarnation() {
  absl::BitGen gen;
  return absl::StrFormat("%08x%08x", absl::Uniform<uint32_t>(gen), absl::Uniform<uint32_t>(gen));
}

// Removes `path` when its first line is `expected`; leaves it otherwise (or when unreadable).
void RemoveIfItHolds(const std::string& path, const std::string& expected) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line) || line != expected) return;
  in.close();
  std::error_code ec;
  std::filesystem::remove(path, ec);
}

// The host others dial: the bind address, unless it is a wildcard.
std::string AdvertisedHost(const std::string& bind) {
  if (bind != "0.0.0.0" && bind != "::" && bind != "[::]") return bind;
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "127.0.0.1";
  return name;
}

// The latest reading's devices as the head's DeviceSamples (those that measure anything).
std::vector<v1::DeviceSample> DeviceSamplesOf(const NodeReading& reading) {
  std::vector<v1::DeviceSample> samples;
  if (reading.read_at == absl::InfinitePast()) return samples;
  for (const DeviceReading& device : reading.devices) {
    if (device.resource.empty()) continue;  // not one of the node's advertised devices
    v1::DeviceSample sample;
    if (DeviceSampleToProto(device.telemetry, device.resource, device.instance, reading.read_at,
                            &sample)) {
      samples.push_back(std::move(sample));
    }
  }
  return samples;
}

// What the latest reading says the workers use; nullopt before the first reading.
std::optional<v1::NodeUsage> UsageOf(const NodeReading& reading) {
  if (reading.read_at == absl::InfinitePast()) return std::nullopt;
  v1::NodeUsage usage;
  usage.set_cpu_cores(reading.workers.cpu_cores);
  usage.set_memory_bytes(reading.workers.memory_bytes);
  usage.set_time_ms(absl::ToUnixMillis(reading.read_at));
  return usage;
}

// The pool workers start from; null (workers forked) when none is asked for, or when the
// default launcher is missing (said on stderr: agents linked into test programs have none beside
// them). A launcher given explicitly must work.
absl::StatusOr<std::unique_ptr<LauncherPool>> StartLauncherPool(const AgentOptions& options,
                                                                const NodeId& node,
                                                                const std::string& workers_dir) {
  if (options.prestarted_workers == 0) return nullptr;
  const std::string path = options.launcher.empty() ? DefaultLauncherPath() : options.launcher;
  // Worker logs go to workers_dir: the launchers make their files there ahead of time.
  auto pool = LauncherPool::Create({path, options.prestarted_workers, workers_dir});
  if (pool.ok() || !options.launcher.empty()) return pool;
  LogLine(absl::StrCat("node agent ", node.value(), ": ", pool.status().message(),
                       "; workers are forked from the agent instead"));
  return nullptr;
}

}  // namespace

absl::StatusOr<std::unique_ptr<NodeAgentServer>> NodeAgentServer::Create(
    const AgentOptions& given) {
  TESSERA_ASSIGN_OR_RETURN(AgentOptions options, ResolveAgentOptions(given));
  if (options.token.empty()) {
    return absl::NotFoundError(absl::StrCat("no cluster token: ", options.state_dir,
                                            "/token does not exist and TESSERA_TOKEN is not set"));
  }
  TESSERA_ASSIGN_OR_RETURN(LoadedNode loaded, LoadNodeHardware(options));

  std::unique_ptr<NodeAgentServer> server(new NodeAgentServer());
  server->incarnation_ = NewIncarnation();
  TESSERA_ASSIGN_OR_RETURN(
      server->state_, AgentState::Create(loaded.id, std::move(loaded.hardware),
                                         AgentStateOptions{server->incarnation_.substr(0, 6)}));
  server->node_dir_ = absl::StrCat(options.state_dir, "/nodes/", loaded.id.value());
  const std::string workers_dir = server->node_dir_ + "/workers";
  TESSERA_RETURN_IF_ERROR(EnsurePrivateDirectory(workers_dir));

  // ResolveAgentOptions decided the size against this host's memory (a default included).
  if (const uint64_t store_bytes = options.object_store_bytes.value_or(0); store_bytes > 0) {
    TESSERA_RETURN_IF_ERROR(server->StartObjectStore(options, store_bytes));
  }

  // The HTTP endpoint and what it serves, before the head link: the registration names it.
  TESSERA_RETURN_IF_ERROR(server->StartMetrics(options));
  if (options.http_port >= 0) {
    TESSERA_RETURN_IF_ERROR(server->ServeHttp(options));
  }

  TESSERA_ASSIGN_OR_RETURN(server->launchers_, StartLauncherPool(options, loaded.id, workers_dir));
  SupervisorOptions supervisor;
  supervisor.launcher_pool = server->launchers_.get();
  TESSERA_ASSIGN_OR_RETURN(server->workers_, ProcessSupervisor::Create(supervisor));

  AgentServiceOptions service_options;
  service_options.workers_dir = workers_dir;
  service_options.agent_env = options.environment.value_or(Environment::FromProcess());
  service_options.slice_env = std::move(loaded.slice_env);
  service_options.max_spillback_hops = options.max_spillback_hops;
  service_options.kill_grace = absl::Milliseconds(options.kill_grace_ms);
  service_options.token = options.token;
  service_options.worker_bind = AdvertisedHost(options.bind);
  // Workers read the token from a private file of this node, never from their environment
  // (where it would reach their logs, their children and `ps e`).
  service_options.worker_token_file = server->node_dir_ + "/token";
  TESSERA_RETURN_IF_ERROR(rpc::WriteTokenFile(service_options.worker_token_file, options.token));
  if (server->objects_ != nullptr) {
    service_options.objects = {&server->objects_->store(), &server->objects_->arena()};
    service_options.data_server = server->object_data_.get();
    service_options.object_store_socket = server->node_dir_ + "/" + kObjectStoreSocketName;
  }

  if (!options.head_address.empty()) server->LinkToHead(options);
  server->StartService(options, loaded.id, workers_dir, std::move(service_options));
  TESSERA_RETURN_IF_ERROR(server->StartServing(options));

  server->options_ = std::move(options);
  TESSERA_RETURN_IF_ERROR(server->RegisterAndPublish());
  return server;
}

absl::Status NodeAgentServer::StartObjectStore(const AgentOptions& options, uint64_t store_bytes) {
  ObjectStoreServerOptions store;
  store.socket_path = node_dir_ + "/" + kObjectStoreSocketName;
  store.capacity_bytes = store_bytes;
  // Primaries spill here when the arena is full (docs/objects.md).
  store.spill_dir = node_dir_ + "/spill";
  TESSERA_ASSIGN_OR_RETURN(objects_, ObjectStoreServer::Start(std::move(store)));
  ObjectDataServerOptions data;
  data.bind_address = options.bind;
  TESSERA_ASSIGN_OR_RETURN(
      object_data_,
      ObjectDataServer::Start({&objects_->store(), &objects_->arena()}, std::move(data)));
  return absl::OkStatus();
}

absl::Status NodeAgentServer::StartMetrics(const AgentOptions& options) {
  AgentState* state = state_.get();
  TelemetrySamplerOptions telemetry;
  telemetry.interval = absl::Milliseconds(options.telemetry_interval_ms);
  telemetry.sysroot = options.sysroot;
  telemetry.environment = options.environment.value_or(Environment::FromProcess());
  telemetry.clock = options.clock;
  telemetry_ = TelemetrySampler::Start(state, std::move(telemetry));
  TelemetrySampler* sampler = telemetry_.get();
  AgentMetricsSources sources;
  sources.state = state;
  sources.latest = [sampler] { return sampler->Latest(); };
  if (objects_ != nullptr) sources.object_store = &objects_->store();
  TESSERA_ASSIGN_OR_RETURN(metrics_, AgentMetrics::Create(registry_, std::move(sources)));
  return absl::OkStatus();
}

absl::Status NodeAgentServer::ServeHttp(const AgentOptions& options) {
  metrics::HttpServerOptions http;
  http.host = options.bind;
  http.port = options.http_port;
  http.worker_threads = 2;
  // The token on loopback too: every local user reaches a loopback port.
  http.bearer_token = options.token;
  TESSERA_ASSIGN_OR_RETURN(http.scrape_token, rpc::DeriveScrapeToken(options.token));
  auto started = metrics::HttpServer::Start(std::move(http));
  if (!started.ok()) {
    return absl::Status(started.status().code(),
                        absl::StrCat("the HTTP endpoint (--http-port ", options.http_port,
                                     "): ", started.status().message()));
  }
  http_ = *std::move(started);
  TESSERA_RETURN_IF_ERROR(http_->Handle("/metrics", metrics::PrometheusMetricsHandler(registry_),
                                        {.access = metrics::HttpAccess::kMetrics}));
  http_address_ = rpc::JoinHostPort(AdvertisedHost(options.bind), http_->port());
  return absl::OkStatus();
}

void NodeAgentServer::LinkToHead(const AgentOptions& options) {
  TelemetrySampler* sampler = telemetry_.get();
  HeadLinkOptions link;
  link.head_address = options.head_address;
  link.head_fallbacks = options.head_fallbacks;
  if (!options.head_address_file.empty()) {
    // The head of this state folder says where it listens now (a restart may change its port).
    link.find_head = [file = options.head_address_file, dir = options.state_dir] {
      return PublishedHeadAddress(file, dir);
    };
  }
  link.token = options.token;
  link.incarnation = incarnation_;
  link.http_address = http_address_;
  link.device_samples = [sampler] { return DeviceSamplesOf(sampler->Latest()); };
  link.usage = [sampler] { return UsageOf(sampler->Latest()); };
  link.call_timeout = absl::Milliseconds(options.head_call_timeout_ms);
  link.retry_budget = absl::Milliseconds(options.head_retry_budget_ms);
  NodeAgentServer* self = this;
  // The node id went to another live agent while this one was away: this agent stops, and
  // RunNodeAgent reports the refusal.
  link.on_refused = [self](const absl::Status&) { self->RequestShutdown(); };
  // What a dead driver owned here goes, though it never connected to this node's store.
  link.on_gone_drivers = [self](const std::vector<std::string>& drivers) {
    if (self->objects_ == nullptr) return;
    for (const std::string& driver : drivers) self->objects_->store().OwnerDied(driver);
  };
  head_ = std::make_unique<HeadLink>(
      std::move(link), state_.get(), [self](const std::vector<WorkerId>& workers) {
        for (const WorkerId& id : workers) {
          self->state_->NoteKill(id, "after the head released its bundle",
                                 /*bundle_removed=*/true);
        }
        self->service_->KillNow(workers);
      });
}

void NodeAgentServer::StartService(const AgentOptions& options, const NodeId& node,
                                   const std::string& workers_dir,
                                   AgentServiceOptions service_options) {
  AgentState* state = state_.get();
  watchdog_ = std::make_unique<WorkerWatchdog>(WatchdogOptions{}, MakeProcProgressProbe());
  service_options.watchdog = watchdog_.get();
  service_options.clock = options.clock;
  device_errors_ = std::make_unique<WorkerDeviceErrors>(
      state->hardware(), Sysroot(options.sysroot), options.device_errors,
      absl::StrCat("node agent ", node.value()), options.clock);
  service_options.device_errors = device_errors_.get();
  service_options.working_dirs_root = node_dir_ + "/jobs";
  stdin_pipes_ = std::make_unique<WorkerStdinPipes>(workers_dir);
  service_options.stdin_pipes = stdin_pipes_.get();
  service_options.metrics = metrics_.get();
  NodeAgentServer* self = this;
  service_ = std::make_unique<NodeAgentService>(std::move(service_options), state, workers_.get(),
                                                head_.get(), [self] { self->RequestShutdown(); });
}

absl::Status NodeAgentServer::StartServing(const AgentOptions& options) {
  rpc::ServerOptions server_options;
  server_options.bind_address = options.bind;
  server_options.port = options.port;
  server_options.token = options.token;
  TESSERA_ASSIGN_OR_RETURN(rpc_metrics_, rpc::RpcServerMetrics::Create(registry_));
  server_options.metrics = rpc_metrics_.get();
  TESSERA_ASSIGN_OR_RETURN(server_, rpc::RpcServer::Start(server_options, {service_.get()}));
  NodeAgentServer* self = this;
  // Rounds every 100 ms of real time; what the watchdog judges by is the agent's clock.
  watchdog_thread_ = std::thread([self, clock = options.clock] {
    absl::MutexLock lock(&self->mu_);
    while (!self->mu_.AwaitWithTimeout(absl::Condition(&self->stop_watchdog_),
                                       absl::Milliseconds(100))) {
      self->mu_.Unlock();
      self->service_->EnforceWatchdog(clock->Now());
      self->device_errors_->Poll();
      self->mu_.Lock();
    }
  });
  address_ = rpc::JoinHostPort(AdvertisedHost(options.bind), server_->port());
  return absl::OkStatus();
}

absl::Status NodeAgentServer::RegisterAndPublish() {
  // Registered before the address file appears, so whoever waits for the file finds the node
  // known to the head (when the head answered).
  if (head_ != nullptr) {
    absl::Status registered = head_->Start(address_);
    // Another live agent holds this node id: this one must not run beside it.
    if (absl::IsAlreadyExists(registered)) return registered;
    if (!registered.ok()) {
      LogLine(absl::StrCat("node agent ", node_id().value(),
                           ": not registered yet with the head at ", options_.head_address, ": ",
                           registered.message()));
    }
  }
  TESSERA_RETURN_IF_ERROR(
      WritePrivateFileAtomically(node_dir_ + "/agent.pid", absl::StrCat(::getpid(), "\n")));
  // Before agent.address: whoever waits for that file finds this one too.
  if (http_ != nullptr) {
    TESSERA_RETURN_IF_ERROR(
        WritePrivateFileAtomically(node_dir_ + "/agent.http", http_address_ + "\n"));
  }
  TESSERA_RETURN_IF_ERROR(
      WritePrivateFileAtomically(node_dir_ + "/agent.address", address_ + "\n"));
  return absl::OkStatus();
}

NodeAgentServer::~NodeAgentServer() { Shutdown(); }

void NodeAgentServer::RequestShutdown() {
  absl::MutexLock lock(&mu_);
  requested_ = true;
}

void NodeAgentServer::Wait() {
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&requested_));
  }
  Shutdown();
}

void NodeAgentServer::Shutdown() {
  absl::MutexLock serial(&shutdown_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    requested_ = true;
  }
  {
    absl::MutexLock lock(&mu_);
    stop_watchdog_ = true;
  }
  if (watchdog_thread_.joinable()) watchdog_thread_.join();
  // No scrape from here on: what /metrics reads is torn down below.
  if (http_ != nullptr) http_->Stop();
  const absl::Duration grace = absl::Milliseconds(options_.kill_grace_ms);
  // Workers first, so watchers see their exits while the server still serves them; then no new
  // calls; then whatever a last call started.
  if (service_ != nullptr) service_->TerminateAll();
  if (server_ != nullptr) {
    server_->Shutdown(grace + absl::Seconds(1));
    server_->Wait();
  }
  if (workers_ != nullptr) workers_->Shutdown(grace);
  if (launchers_ != nullptr) launchers_->Shutdown();
  if (head_ != nullptr) head_->Stop();
  if (telemetry_ != nullptr) telemetry_->Stop();
  if (object_data_ != nullptr) object_data_->Stop();
  if (objects_ != nullptr) objects_->Stop();
  if (!node_dir_.empty()) {
    // Only this agent's own: a second agent refused for the same node id leaves the live
    // agent's files alone.
    RemoveIfItHolds(node_dir_ + "/agent.address", address_);
    if (!http_address_.empty()) RemoveIfItHolds(node_dir_ + "/agent.http", http_address_);
    RemoveIfItHolds(node_dir_ + "/agent.pid", std::to_string(::getpid()));
  }
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
}

absl::Status RunNodeAgent(const AgentOptions& options) {
  // Blocked before any thread starts, so every thread inherits the mask and only sigtimedwait
  // below sees SIGTERM and SIGINT.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigset_t previous;
  pthread_sigmask(SIG_BLOCK, &signals, &previous);

  auto server = NodeAgentServer::Create(options);
  if (!server.ok()) {
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    return server.status();
  }
  std::printf("node agent %s listening on %s\n", (*server)->node_id().value().c_str(),
              (*server)->address().c_str());
  std::fflush(stdout);

  absl::Mutex mu;
  bool done = false;
  std::thread watcher([&] {
    const timespec tick = {0, 200 * 1000 * 1000};
    while (true) {
      {
        absl::MutexLock lock(&mu);
        if (done) return;
      }
      if (sigtimedwait(&signals, nullptr, &tick) > 0) {
        (*server)->RequestShutdown();
        return;
      }
    }
  });
  (*server)->Wait();
  // The head refused this agent's node id after a reconnect: say so, as a failed start does.
  absl::Status refused =
      (*server)->head_link() != nullptr ? (*server)->head_link()->refusal() : absl::OkStatus();
  {
    absl::MutexLock lock(&mu);
    done = true;
  }
  watcher.join();
  server->reset();
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return refused;
}

}  // namespace tessera

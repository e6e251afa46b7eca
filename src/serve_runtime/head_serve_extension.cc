#include "serve_runtime/head_serve_extension.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "base/log_line.h"
#include "base/status_macros.h"
#include "serve_runtime/actor_replica_runtime.h"
#include "serve_runtime/head_actor_records.h"
#include "serve_runtime/serve_controller.h"
#include "serve_runtime/serve_controller_service.h"
#include "serve_runtime/serve_metrics_json.h"
#include "serve_runtime/serve_proxy.h"
#include "tessera/tessera.h"

namespace tessera::serve {
namespace {

// The node id the head's proxy reports itself under (it runs in the head's process, which is
// no node of its own).
constexpr char kHeadProxyNode[] = "head";

// A ReplicaRuntime and ProxyRuntime that joins the cluster as a driver (tessera::Init) at its
// first use, with the Python environment Serve was started with, then passes every call to an
// ActorReplicaRuntime. When the driver cannot start, every call fails with why.
class LazyReplicaRuntime final : public ReplicaRuntime, public ProxyRuntime {
 public:
  LazyReplicaRuntime(std::string state_dir, HeadService* head)
      : state_dir_(std::move(state_dir)), head_(head) {}
  ~LazyReplicaRuntime() override { Stop(); }

  // Where the head serves (known once it does) and how to read Serve's start options.
  void Configure(const HeadEndpoints& endpoints,
                 std::function<std::optional<v1::ServeStartOptions>()> start_options)
      ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&host_mu_);
      head_host_ = HostOfAddress(endpoints.address);
    }
    absl::MutexLock lock(&mu_);
    endpoints_ = endpoints;
    start_options_ = std::move(start_options);
  }

  // The host of the head's machine ("" before Configure). Not behind mu_, which a join holds.
  std::string head_host() const ABSL_LOCKS_EXCLUDED(host_mu_) {
    absl::MutexLock lock(&host_mu_);
    return head_host_;
  }

  void Start(const ReplicaLaunch& launch, std::function<void(const std::string&)> pending,
             std::function<void(absl::StatusOr<ReplicaAddress>)> done) override {
    auto runtime = Runtime();
    if (!runtime.ok()) return done(runtime.status());
    (*runtime)->Start(launch, std::move(pending), std::move(done));
  }
  void Find(const std::string& replica_id,
            std::function<void(absl::StatusOr<ReplicaAddress>)> done) override {
    auto runtime = Runtime();
    if (!runtime.ok()) return done(runtime.status());
    (*runtime)->Find(replica_id, std::move(done));
  }
  void Call(const std::string& replica_id, const std::string& method,
            std::optional<std::string> argument, absl::Duration timeout,
            std::function<void(absl::StatusOr<std::string>)> done) override {
    auto runtime = Runtime();
    if (!runtime.ok()) return done(runtime.status());
    (*runtime)->Call(replica_id, method, std::move(argument), timeout, std::move(done));
  }
  std::unique_ptr<ReplicaStream> CallStreaming(const std::string& replica_id,
                                               const std::string& method, std::string argument,
                                               std::function<void(std::string)> on_item,
                                               std::function<void(absl::Status)> on_end) override {
    auto runtime = Runtime();
    if (!runtime.ok()) {
      on_end(runtime.status());
      return nullptr;
    }
    return (*runtime)->CallStreaming(replica_id, method, std::move(argument), std::move(on_item),
                                     std::move(on_end));
  }
  void Kill(const std::string& replica_id) override {
    auto runtime = Runtime();
    if (runtime.ok()) (*runtime)->Kill(replica_id);
  }

  void StartProxy(const ProxyLaunch& launch,
                  std::function<void(absl::StatusOr<std::string>)> done) override {
    auto runtime = Runtime();
    if (!runtime.ok()) return done(runtime.status());
    (*runtime)->StartProxy(launch, std::move(done));
  }
  void FindProxy(const std::string& node_id,
                 std::function<void(absl::StatusOr<std::string>)> done) override {
    auto runtime = Runtime();
    if (!runtime.ok()) return done(runtime.status());
    (*runtime)->FindProxy(node_id, std::move(done));
  }
  void CallProxy(const std::string& node_id, const std::string& method, absl::Duration timeout,
                 std::function<void(absl::StatusOr<std::string>)> done) override {
    auto runtime = Runtime();
    if (!runtime.ok()) return done(runtime.status());
    (*runtime)->CallProxy(node_id, method, timeout, std::move(done));
  }
  void KillProxy(const std::string& node_id) override {
    auto runtime = Runtime();
    if (runtime.ok()) (*runtime)->KillProxy(node_id);
  }

  // Stops the calls in flight and leaves the cluster (the replicas live on: they are detached).
  void Stop() ABSL_LOCKS_EXCLUDED(mu_) {
    std::unique_ptr<ActorReplicaRuntime> runtime;
    bool joined = false;
    {
      absl::MutexLock lock(&mu_);
      runtime = std::move(runtime_);
      joined = joined_;
      joined_ = false;
      stopped_ = true;
    }
    if (runtime != nullptr) runtime->Stop();
    runtime.reset();
    if (joined) tessera::Shutdown();
  }

 private:
  absl::StatusOr<ActorReplicaRuntime*> Runtime() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (runtime_ != nullptr) return runtime_.get();
    if (stopped_) return absl::CancelledError("Serve is stopping with the head");
    if (!join_error_.ok()) return join_error_;
    std::optional<v1::ServeStartOptions> start =
        start_options_ ? start_options_() : std::optional<v1::ServeStartOptions>();
    if (!start.has_value() || endpoints_.address.empty()) {
      return absl::FailedPreconditionError("Serve is not started");
    }
    InitOptions init;
    init.state_dir = state_dir_;
    init.head_address = endpoints_.address;
    init.token_file = endpoints_.token_file;
    const std::string python =
        start->python_executable().empty() ? "/usr/bin/python3" : start->python_executable();
    init.worker_command = {python, "-m", "tessera._private.worker_main"};
    init.worker_env["PYTHONPATH"] = absl::StrJoin(start->python_path(), ":");
    init.worker_env["PYTHONUNBUFFERED"] = "1";
    init.worker_env["TESSERA_NAMESPACE"] = kServeNamespace;
    init.prefix_worker_output = true;
    // The head's own driver: its actors' calls are the replicas' requests, not a job's tasks.
    init.record_task_events = false;
    if (absl::Status joined = tessera::Init(init); !joined.ok()) {
      join_error_ = absl::Status(joined.code(),
                                 absl::StrCat("the head cannot run replicas: ", joined.message()));
      LogLine(join_error_.ToString());
      return join_error_;
    }
    joined_ = true;
    ActorReplicaRuntimeOptions options;
    options.actor_record = HeadActorRecords(head_);
    options.explain_pending = HeadPendingExplanation(head_);
    runtime_ = std::make_unique<ActorReplicaRuntime>(std::move(options));
    return runtime_.get();
  }

  const std::string state_dir_;
  HeadService* const head_;
  mutable absl::Mutex host_mu_;
  std::string head_host_ ABSL_GUARDED_BY(host_mu_);
  absl::Mutex mu_;
  HeadEndpoints endpoints_ ABSL_GUARDED_BY(mu_);
  std::function<std::optional<v1::ServeStartOptions>()> start_options_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<ActorReplicaRuntime> runtime_ ABSL_GUARDED_BY(mu_);
  absl::Status join_error_ ABSL_GUARDED_BY(mu_);
  bool joined_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

class ServeHeadExtensionImpl final : public HeadExtension {
 public:
  explicit ServeHeadExtensionImpl(const HeadExtensionContext& context)
      : context_(context), runtime_(context.state_dir, context.service) {
    ServeControllerOptions options;
    options.registry = context.registry;
    ServeHeadExtensionImpl* raw = this;
    options.on_serve_state = [raw](const std::optional<v1::ServeStartOptions>& started) {
      raw->OnServeState(started);
    };
    // The nodes' proxies: actors of the head's driver, on the nodes the head lists alive.
    LazyReplicaRuntime* runtime = &runtime_;
    options.proxies.runtime = &runtime_;
    options.proxies.list_nodes = HeadAliveNodes(context.service);
    options.proxies.head_host = [runtime] { return runtime->head_host(); };
    controller_ = std::make_unique<ServeController>(context.store, context.clock, &runtime_,
                                                    std::move(options));
    service_ = std::make_unique<ServeControllerService>(*controller_);
  }
  ~ServeHeadExtensionImpl() override { Shutdown(); }

  std::vector<grpc::Service*> services() override { return {service_.get()}; }

  absl::Status Start(const HeadEndpoints& endpoints) override {
    ServeController* controller = controller_.get();
    runtime_.Configure(endpoints, [controller] { return controller->start_options(); });
    if (endpoints.add_http_route) {
      ServeControllerService* service = service_.get();
      TESSERA_RETURN_IF_ERROR(
          endpoints.add_http_route("/api/v1/serve", [service](const metrics::HttpRequest&) {
            return metrics::HttpResponse{200, "application/json", service->StatusJson().dump()};
          }));
      // The dashboard's Serve page reads the figures of /metrics here, as JSON.
      if (metrics::MetricRegistry* registry = context_.registry; registry != nullptr) {
        TESSERA_RETURN_IF_ERROR(endpoints.add_http_route(
            "/api/v1/serve/metrics", [registry](const metrics::HttpRequest&) {
              return metrics::HttpResponse{
                  200, "application/json",
                  ServeMetricsJson(registry->Collect())
                      .dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)};
            }));
      }
    }
    // What a previous head left: applications and their replicas, re-adopted.
    if (absl::Status recovered = controller_->Recover(); !recovered.ok()) {
      return absl::Status(recovered.code(),
                          absl::StrCat("cannot recover Serve: ", recovered.message()));
    }
    return controller_->Start();
  }

  void Shutdown() override {
    {
      absl::MutexLock lock(&mu_);
      if (shut_down_) return;
      shut_down_ = true;
    }
    StopProxy();
    if (controller_ != nullptr) controller_->Stop();
    runtime_.Stop();
  }

 private:
  // The controller's on_serve_state: the proxy follows Serve's start and shutdown.
  void OnServeState(const std::optional<v1::ServeStartOptions>& started) ABSL_LOCKS_EXCLUDED(mu_) {
    if (!started.has_value() || started->proxy_location() == "Disabled") {
      StopProxy();
      return;
    }
    absl::MutexLock lock(&mu_);
    if (shut_down_ || proxy_ != nullptr) return;
    ServeProxyOptions options;
    options.http.host = started->http_host();
    options.http.port = started->http_port();
    if (started->request_timeout_s() > 0) {
      options.http.request_timeout = absl::Seconds(started->request_timeout_s());
    }
    if (started->keep_alive_timeout_s() > 0) {
      options.http.keep_alive_timeout = absl::Seconds(started->keep_alive_timeout_s());
    }
    options.node_id = kHeadProxyNode;
    options.node_ip_address = started->http_host();
    options.runtime = &runtime_;
    options.replica_sets = controller_.get();
    options.metrics = context_.registry;
    auto proxy = ServeProxy::Start(std::move(options));
    if (!proxy.ok()) {
      LogLine(absl::StrCat("serve: the HTTP proxy cannot start: ", proxy.status().message()));
      controller_->SetProxyStatus(kHeadProxyNode, ProxyStatus::kUnhealthy, "");
      return;
    }
    proxy_ = *std::move(proxy);
    const std::string host = started->http_host().empty() || started->http_host() == "0.0.0.0"
                                 ? "127.0.0.1"
                                 : started->http_host();
    controller_->SetProxyStatus(kHeadProxyNode, ProxyStatus::kHealthy,
                                absl::StrCat(host, ":", proxy_->port()));
  }

  void StopProxy() ABSL_LOCKS_EXCLUDED(mu_) {
    std::unique_ptr<ServeProxy> proxy;
    {
      absl::MutexLock lock(&mu_);
      proxy = std::move(proxy_);
    }
    if (proxy == nullptr) return;
    proxy->Stop();
    controller_->RemoveProxy(kHeadProxyNode);
  }

  const HeadExtensionContext context_;
  LazyReplicaRuntime runtime_;
  std::unique_ptr<ServeController> controller_;
  std::unique_ptr<ServeControllerService> service_;
  absl::Mutex mu_;
  std::unique_ptr<ServeProxy> proxy_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

HeadExtensionFactory ServeHeadExtension() {
  return [](const HeadExtensionContext& context) -> absl::StatusOr<std::unique_ptr<HeadExtension>> {
    if (context.store == nullptr || context.clock == nullptr || context.service == nullptr) {
      return absl::InvalidArgumentError("the serve extension needs the head's store and clock");
    }
    return std::make_unique<ServeHeadExtensionImpl>(context);
  };
}

}  // namespace tessera::serve

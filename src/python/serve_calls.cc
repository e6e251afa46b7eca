#include "python/serve_calls.h"

#include <google/protobuf/util/json_util.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/reservations.h"
#include "base/clock.h"
#include "base/status_macros.h"
#include "client/cluster_client.h"
#include "grpcpp/client_context.h"
#include "python/core_error.h"
#include "python/object_ref.h"
#include "rpc/message_json.h"
#include "serve_runtime/actor_replica_runtime.h"
#include "serve_runtime/deployment_router.h"
#include "serve_runtime/grpc_replica_set_source.h"
#include "serve_runtime/serve_proxy.h"
#include "tessera/runtime_context.h"
#include "tessera/v1/serve.grpc.pb.h"
#include "tessera/v1/serve.pb.h"
#include "vocabulary/slice_shape.h"
#include "wire/proto_convert.h"

namespace tessera::python {
namespace {

// How long a route waits without the GIL before it checks for signals (Ctrl-C).
constexpr absl::Duration kSignalSlice = absl::Milliseconds(100);

// What a route raises for back pressure (the deployment's max_queued_requests reached at this
// caller): python/tessera/serve/handle.py raises BackPressureError for it, with the router's
// message (Ray's BackPressureError text).
struct ServeBackPressure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

absl::Duration TimeoutFrom(const py::object& seconds) {
  if (seconds.is_none()) return absl::InfiniteDuration();
  const double value = seconds.cast<double>();
  if (value < 0) throw py::value_error(absl::StrCat("timeout_s ", value, " is negative"));
  return absl::Seconds(value);
}

// ---------------------------------------------------------------------------------------------
// The process's connection to the serve controller.

// What this process's serve calls share for the cluster init joined: the head's connection, the
// controller's replica sets read over it, and the actor calls of the routers' probes.
struct ServeConnection {
  client::ClusterClientOptions options;
  std::string driver_id;  // of the init it was made for ("" in a worker)
  std::shared_ptr<client::ClusterClient> head;
  std::unique_ptr<serve::GrpcReplicaSetSource> source;
  std::unique_ptr<serve::ActorReplicaRuntime> runtime;

  bool Serves(const client::ClusterClientOptions& other, const std::string& other_driver) const {
    return driver_id == other_driver && options.state_dir == other.state_dir &&
           options.head_address == other.head_address && options.token_file == other.token_file;
  }
};

// The connection of the current init, made at the first serve call after it (routers made
// before keep the one they were made with).
class ServeConnections {
 public:
  absl::StatusOr<std::shared_ptr<ServeConnection>> Current() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Mutex mu_;
  std::shared_ptr<ServeConnection> current_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::shared_ptr<ServeConnection>> ServeConnections::Current() {
  std::optional<client::ClusterClientOptions> options = api::ReservationCluster();
  if (!options.has_value()) {
    return absl::FailedPreconditionError(
        "tessera is not connected to a cluster: call tessera.init() first");
  }
  const std::string driver_id = api::ReservationOwner();
  absl::MutexLock lock(&mu_);
  if (current_ != nullptr && current_->Serves(*options, driver_id)) return current_;
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<client::ClusterClient> head,
                           client::ClusterClient::Connect(*options));
  auto connection = std::make_shared<ServeConnection>();
  connection->options = *std::move(options);
  connection->driver_id = driver_id;
  connection->head = std::move(head);
  connection->source = std::make_unique<serve::GrpcReplicaSetSource>(connection->head);
  connection->runtime = std::make_unique<serve::ActorReplicaRuntime>();
  current_ = connection;
  return connection;
}

// Never destroyed: a router's threads may still use a connection while the process exits.
ServeConnections& Connections() {
  static auto* connections = new ServeConnections();
  return *connections;
}

template <typename Request, typename Response>
using HeadServeMethod = grpc::Status (v1::HeadServe::Stub::*)(grpc::ClientContext*, const Request&,
                                                              Response*);

// One call of the controller, retried as ClusterClient retries: every HeadServe call may be
// sent twice (a deploy or a delete sets a goal, the others read). Runs without the GIL.
template <typename Request, typename Response>
absl::StatusOr<Response> CallController(HeadServeMethod<Request, Response> method,
                                        const Request& request) {
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<ServeConnection> connection, Connections().Current());
  client::ClusterClient& head = *connection->head;
  Response response;
  const absl::Status status =
      head.Call(head.HeadPeer(), client::Retry::kSafe, [&](grpc::ClientContext* context) {
        response.Clear();  // nothing of a failed attempt stays
        return (head.head_serve().*method)(context, request, &response);
      });
  if (!status.ok()) return status;
  return response;
}

// CallController from Python: without the GIL, its failure raised as CoreError.
template <typename Request, typename Response>
Response CallControllerFromPython(HeadServeMethod<Request, Response> method,
                                  const Request& request) {
  CheckNotForked();
  absl::StatusOr<Response> response;
  {
    py::gil_scoped_release release;
    response = CallController(method, request);
  }
  if (!response.ok()) ThrowStatus(response.status());
  return *std::move(response);
}

// The request the package builds as JSON (the proto3 JSON mapping: the Python side has no
// protobuf module): ValueError when it is not one, since that is the package's own bug.
v1::DeployServeApplicationsRequest DeployRequestFrom(const std::string& json) {
  v1::DeployServeApplicationsRequest request;
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, &request);
  if (!parsed.ok()) {
    throw py::value_error(absl::StrCat("serve_deploy: not a DeployServeApplicationsRequest: ",
                                       std::string(parsed.message())));
  }
  return request;
}

// The TPU slice each replica of a deployment takes (a ServeReplicaSlice), as the proto3 JSON
// the package puts into its deploy request: the shape's text (a generation or pod type, and a
// topology) parsed here, once, into the protocol's generation and dims. A bad shape is a
// ValueError naming it.
std::string ReplicaSliceJson(const std::string& accelerator_type, const std::string& topology,
                             const std::map<std::string, double>& per_host, bool sub_slice) {
  const absl::StatusOr<SliceShape> shape =
      ParseSliceShape(accelerator_type, topology, std::nullopt);
  if (!shape.ok()) {
    throw py::value_error(absl::StrCat("replica slice ", accelerator_type, " ", topology, ": ",
                                       shape.status().message()));
  }
  v1::ServeReplicaSlice slice;
  wire::SliceShapeToProto(*shape, slice.mutable_shape());
  for (const auto& [name, amount] : per_host) (*slice.mutable_per_host())[name] = amount;
  slice.set_sub_slice(sub_slice);
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string json;
  const auto printed = google::protobuf::util::MessageToJsonString(slice, &json, options);
  if (!printed.ok()) {
    throw std::runtime_error(absl::StrCat("serve_replica_slice: cannot write the slice as JSON: ",
                                          std::string(printed.message())));
  }
  return json;
}

// ---------------------------------------------------------------------------------------------
// Routing.

// Replicas a route found after its caller had stopped waiting (a timeout, Ctrl-C): each counts
// a request in the router that was never sent, so the router is told it finished, at the
// router's next call.
class AbandonedReplicas {
 public:
  void Add(std::string replica_id) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    replica_ids_.push_back(std::move(replica_id));
  }
  std::vector<std::string> Take() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return std::exchange(replica_ids_, {});
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> replica_ids_ ABSL_GUARDED_BY(mu_);
};

// One route's answer, handed from the router's callback to the caller waiting for it.
class PendingRoute {
 public:
  // The router's answer; a replica found for a caller that stopped waiting goes to `abandoned`.
  void Deliver(absl::StatusOr<v1::ServeReplica> replica, AbandonedReplicas& abandoned)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (abandoned_) {
      if (replica.ok()) abandoned.Add(replica->replica_id());
      return;
    }
    answer_ = std::move(replica);
  }

  // The answer once there is one; nullopt at `deadline` (real time).
  std::optional<absl::StatusOr<v1::ServeReplica>> WaitUntil(absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto answered = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return answer_.has_value(); };
    Clock::Real()->AwaitWithDeadline(mu_, absl::Condition(&answered), deadline);
    return answer_;
  }

  // The caller stops waiting: a replica found already, or later, goes to `abandoned`.
  void Abandon(AbandonedReplicas& abandoned) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    abandoned_ = true;
    if (answer_.has_value() && answer_->ok()) abandoned.Add((*answer_)->replica_id());
  }

 private:
  absl::Mutex mu_;
  std::optional<absl::StatusOr<v1::ServeReplica>> answer_ ABSL_GUARDED_BY(mu_);
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;
};

// tessera._core.ServeRouter: one deployment's router for this process's handles.
class ServeRouter {
 public:
  ServeRouter(std::shared_ptr<ServeConnection> connection, std::string app, std::string deployment,
              bool prefer_local_node)
      : connection_(std::move(connection)),
        app_(std::move(app)),
        deployment_(std::move(deployment)),
        prefer_local_node_(prefer_local_node) {}

  // The router's threads start here, without the GIL.
  absl::Status Open() {
    serve::DeploymentRouterOptions options;
    options.application = app_;
    options.deployment = deployment_;
    options.source = absl::StrCat("handle:", connection_->driver_id, ":", app_, "/", deployment_);
    options.runtime = connection_->runtime.get();
    options.replica_sets = connection_->source.get();
    // This process's node (a worker's, or a driver's local node): handles prefer it only when
    // asked (Ray's _prefer_local_routing); proxies always do.
    options.self_node_id = GetRuntimeContext().node_id;
    options.prefer_local_node = prefer_local_node_;
    auto router = serve::DeploymentRouter::Create(std::move(options));
    if (!router.ok()) return router.status();
    router_ = *std::move(router);
    return absl::OkStatus();
  }

  // Python deletes it with the GIL held; the router's threads end without it.
  ~ServeRouter() { Stop(); }

  ServeRouter(const ServeRouter&) = delete;
  ServeRouter& operator=(const ServeRouter&) = delete;

  py::tuple Route(const std::string& model_id, const py::object& timeout_s);
  void Finished(const std::string& replica_id);
  void Died(const std::string& replica_id);
  void Stop();

 private:
  absl::StatusOr<v1::ServeReplica> Await(PendingRoute& pending, absl::Duration timeout);
  // Tells the router of the abandoned routes' replicas. Without the GIL.
  void FinishAbandoned();

  // Declared first, destroyed last: the router reads the connection's source and runtime.
  std::shared_ptr<ServeConnection> connection_;
  const std::string app_;
  const std::string deployment_;
  const bool prefer_local_node_;
  std::shared_ptr<AbandonedReplicas> abandoned_ = std::make_shared<AbandonedReplicas>();
  std::unique_ptr<serve::DeploymentRouter> router_;
  // Read and written only with the GIL held (every method runs with it), which orders them.
  bool stopped_ = false;
};

py::tuple ServeRouter::Route(const std::string& model_id, const py::object& timeout_s) {
  CheckNotForked();
  const absl::Duration timeout = TimeoutFrom(timeout_s);
  if (stopped_) {
    ThrowStatus(absl::FailedPreconditionError(absl::StrCat(
        "the router of deployment ", deployment_, " of application ", app_, " was stopped")));
  }
  auto pending = std::make_shared<PendingRoute>();
  {
    py::gil_scoped_release release;
    FinishAbandoned();
    serve::DeploymentRouter* router = router_.get();
    auto ticket = router_->Route(
        {.request_id = "", .multiplexed_model_id = model_id},
        [pending, router, abandoned = abandoned_](absl::StatusOr<std::string> replica_id) {
          if (!replica_id.ok()) return pending->Deliver(replica_id.status(), *abandoned);
          std::optional<v1::ServeReplica> replica = router->Replica(*replica_id);
          if (!replica.has_value()) {
            // Chosen from a set a newer one replaced at once: the request is let go and asked
            // again by the caller (Unavailable: routed again).
            router->Finished(*replica_id);
            return pending->Deliver(
                absl::UnavailableError(absl::StrCat("replica ", *replica_id, " is gone")),
                *abandoned);
          }
          pending->Deliver(*std::move(replica), *abandoned);
        });
    if (!ticket.ok()) pending->Deliver(ticket.status(), *abandoned_);
  }
  const absl::StatusOr<v1::ServeReplica> replica = Await(*pending, timeout);
  if (absl::IsResourceExhausted(replica.status())) {
    throw ServeBackPressure(std::string(replica.status().message()));
  }
  if (!replica.ok()) ThrowStatus(replica.status());
  return py::make_tuple(replica->replica_id(), replica->actor_id(), replica->owner_address());
}

absl::StatusOr<v1::ServeReplica> ServeRouter::Await(PendingRoute& pending, absl::Duration timeout) {
  Clock* clock = Clock::Real();
  const absl::Time deadline =
      timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : clock->Now() + timeout;
  while (true) {
    std::optional<absl::StatusOr<v1::ServeReplica>> answer;
    {
      py::gil_scoped_release release;
      answer = pending.WaitUntil(std::min(deadline, clock->Now() + kSignalSlice));
    }
    if (answer.has_value()) return *std::move(answer);
    if (clock->Now() >= deadline) {
      pending.Abandon(*abandoned_);
      return absl::DeadlineExceededError(
          absl::StrCat("no replica of deployment ", deployment_, " of application ", app_,
                       " took the request within ", absl::FormatDuration(timeout)));
    }
    if (PyErr_CheckSignals() != 0) {
      pending.Abandon(*abandoned_);
      throw py::error_already_set();
    }
  }
}

void ServeRouter::Finished(const std::string& replica_id) {
  if (stopped_) return;
  py::gil_scoped_release release;
  FinishAbandoned();
  router_->Finished(replica_id);
}

void ServeRouter::Died(const std::string& replica_id) {
  if (stopped_) return;
  py::gil_scoped_release release;
  router_->Died(replica_id);
}

void ServeRouter::Stop() {
  if (stopped_) return;
  stopped_ = true;
  py::gil_scoped_release release;
  if (router_ != nullptr) router_->Stop();
}

void ServeRouter::FinishAbandoned() {
  for (const std::string& replica_id : abandoned_->Take()) router_->Finished(replica_id);
}

// This process's connection to the controller, made without the GIL; CoreError when there is
// none.
std::shared_ptr<ServeConnection> CurrentConnection() {
  CheckNotForked();
  absl::StatusOr<std::shared_ptr<ServeConnection>> connection;
  {
    py::gil_scoped_release release;
    connection = Connections().Current();
  }
  if (!connection.ok()) ThrowStatus(connection.status());
  return *std::move(connection);
}

std::unique_ptr<ServeRouter> MakeRouter(const std::string& app, const std::string& deployment,
                                        bool prefer_local_routing) {
  auto router =
      std::make_unique<ServeRouter>(CurrentConnection(), app, deployment, prefer_local_routing);
  absl::Status opened;
  {
    py::gil_scoped_release release;  // the router starts its threads
    opened = router->Open();
  }
  if (!opened.ok()) ThrowStatus(opened);
  return router;
}

// ---------------------------------------------------------------------------------------------
// Bindings.

void BindControllerCalls(py::module_& m) {
  m.def(
      "serve_deploy",
      [](const std::string& request_json) {
        const v1::DeployServeApplicationsRequest request = DeployRequestFrom(request_json);
        CallControllerFromPython(&v1::HeadServe::Stub::DeployApplications, request);
      },
      py::arg("request_json"),
      "Deploys (or updates) applications: a DeployServeApplicationsRequest in the proto3 JSON "
      "mapping (bytes as base64). Returns once the controller recorded the goal.");
  m.def(
      "serve_delete",
      [](const std::vector<std::string>& names) {
        v1::DeleteServeApplicationsRequest request;
        for (const std::string& name : names) request.add_names(name);
        CallControllerFromPython(&v1::HeadServe::Stub::DeleteApplications, request);
      },
      py::arg("names"), "Deletes these applications (their deletion goes on in the controller).");
  m.def(
      "serve_shutdown",
      [] { CallControllerFromPython(&v1::HeadServe::Stub::Shutdown, v1::ShutdownServeRequest()); },
      "Deletes every application and stops the proxies.");
  m.def(
      "serve_status",
      [] {
        const v1::ServeStatus status =
            CallControllerFromPython(&v1::HeadServe::Stub::GetStatus, v1::GetServeStatusRequest());
        return rpc::MessageJson(status).dump();
      },
      "Serve's status (a ServeStatus message) as JSON: the proto's field names, every field.");
  m.def("serve_replica_slice", &ReplicaSliceJson, py::arg("accelerator_type"), py::arg("topology"),
        py::arg("per_host"), py::arg("sub_slice"),
        "A deployment's replica slice (a ServeReplicaSlice) as proto3 JSON: the shape's text "
        "(\"TPU-V6E\", \"4x4\") parsed here into its generation and dims, per_host the "
        "amounts every host's bundle gets besides its chips. ValueError for a bad shape.");
}

void BindRouter(py::module_& m) {
  py::register_exception<ServeBackPressure>(m, "ServeBackPressure");
  py::class_<ServeRouter>(m, "ServeRouter")
      .def("route", &ServeRouter::Route, py::arg("model_id") = "",
           py::arg("timeout_s") = py::none(),
           "Waits for a replica to take one request (None: as long as it takes): (replica_id, "
           "actor_id, owner_address). ServeBackPressure when the deployment's "
           "max_queued_requests wait here already; CoreError GET_TIMEOUT past timeout_s.")
      .def("finished", &ServeRouter::Finished, py::arg("replica_id"),
           "A request routed to `replica_id` ended (however it ended).")
      .def("died", &ServeRouter::Died, py::arg("replica_id"),
           "A request routed to `replica_id` found its actor dead: the replica is routed "
           "around until the next replica set names it again.")
      .def("stop", &ServeRouter::Stop,
           "Stops the router: routes still waiting fail. Idempotent; the router is unusable "
           "after it.");
  m.def("serve_router", &MakeRouter, py::arg("app"), py::arg("deployment"),
        py::arg("prefer_local_routing") = false,
        "A router for handles to `deployment` (\"\": the ingress) of application `app`; with "
        "prefer_local_routing, replicas on this process's node are tried first.");
}

// ---------------------------------------------------------------------------------------------
// A node's proxy.

// tessera._core.ServeProxyHost: the C++ HTTP proxy of a node (serve::ServeProxy), run by the
// process of its ProxyActor (python/tessera/serve/proxy.py): the route table and the replica sets
// come from the controller over this process's connection, the replicas are called through its
// replica runtime, and the routers prefer the replicas of this node.
class ServeProxyHost {
 public:
  explicit ServeProxyHost(std::shared_ptr<ServeConnection> connection)
      : connection_(std::move(connection)) {}
  // Python deletes it with the GIL held; the proxy's threads end without it.
  ~ServeProxyHost() { Stop(); }
  ServeProxyHost(const ServeProxyHost&) = delete;
  ServeProxyHost& operator=(const ServeProxyHost&) = delete;

  // Binds and starts serving; without the GIL.
  absl::Status Open(serve::ServeProxyOptions options) {
    options.runtime = connection_->runtime.get();
    options.replica_sets = connection_->source.get();
    absl::StatusOr<std::unique_ptr<serve::ServeProxy>> proxy =
        serve::ServeProxy::Start(std::move(options));
    if (!proxy.ok()) return proxy.status();
    proxy_ = *std::move(proxy);
    return absl::OkStatus();
  }

  int port() const { return proxy_ == nullptr ? 0 : proxy_->port(); }
  int64_t OngoingRequests() const { return proxy_ == nullptr ? 0 : proxy_->ongoing_requests(); }
  void SetDraining(bool draining) {
    if (proxy_ != nullptr) proxy_->SetDraining(draining);
  }
  // Stops serving (requests in flight are cancelled); idempotent.
  void Stop() {
    if (proxy_ == nullptr) return;
    py::gil_scoped_release release;
    proxy_->Stop();
  }

 private:
  // Declared first, destroyed last: the proxy reads the connection's source and runtime.
  std::shared_ptr<ServeConnection> connection_;
  std::unique_ptr<serve::ServeProxy> proxy_;
};

std::unique_ptr<ServeProxyHost> StartServeProxy(const std::string& node_id,
                                                const std::string& node_ip_address,
                                                const std::string& host, int port,
                                                double request_timeout_s,
                                                double keep_alive_timeout_s) {
  if (port < 0 || port > 65535) {
    throw py::value_error(absl::StrCat("port ", port, " is not between 0 and 65535"));
  }
  serve::ServeProxyOptions options;
  options.http.host = host;
  options.http.port = port;
  if (request_timeout_s > 0) options.http.request_timeout = absl::Seconds(request_timeout_s);
  if (keep_alive_timeout_s > 0)
    options.http.keep_alive_timeout = absl::Seconds(keep_alive_timeout_s);
  options.node_id = node_id;
  options.node_ip_address = node_ip_address;
  auto proxy = std::make_unique<ServeProxyHost>(CurrentConnection());
  absl::Status opened;
  {
    py::gil_scoped_release release;  // the proxy starts its threads
    opened = proxy->Open(std::move(options));
  }
  if (!opened.ok()) ThrowStatus(opened);
  return proxy;
}

void BindProxy(py::module_& m) {
  py::class_<ServeProxyHost>(m, "ServeProxyHost")
      .def("port", &ServeProxyHost::port, "The port its HTTP server is bound to.")
      .def("ongoing_requests", &ServeProxyHost::OngoingRequests,
           "Requests it has not finished answering.")
      .def("set_draining", &ServeProxyHost::SetDraining, py::arg("draining"),
           "Draining: /-/healthz answers 503 (every other request is served).")
      .def("stop", &ServeProxyHost::Stop,
           "Stops serving (requests in flight are cancelled). Idempotent.");
  m.def("serve_proxy_start", &StartServeProxy, py::arg("node_id"), py::arg("node_ip_address"),
        py::arg("host"), py::arg("port"), py::arg("request_timeout_s") = 0.0,
        py::arg("keep_alive_timeout_s") = 0.0,
        "Starts the HTTP proxy of node `node_id` in this process, bound to host:port (0: a free "
        "port), over the cluster tessera.init joined (in a worker: its node's). CoreError when "
        "it cannot bind.");
}

}  // namespace

void BindServeCalls(py::module_& m) {
  BindControllerCalls(m);
  BindRouter(m);
  BindProxy(m);
}

}  // namespace tessera::python

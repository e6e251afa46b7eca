// ProxyRuntime: how the serve controller reaches the HTTP proxies of the nodes (docs/serve.md,
// "Proxies"). Each is an actor of the cluster, one per node, named ProxyActorName(node) in the
// namespace kServeNamespace, pinned to its node (hard node affinity), detached, holding no
// resources, whose process runs a C++ ServeProxy (python/tessera/serve/proxy.py: ProxyActor,
// which starts it through tessera._core). The actor's methods: ready() (its HTTP address,
// "host:port"; it also ends a drain a previous controller began), check_health(),
// start_draining(), stop_draining() and is_drained() (no request in flight: "True"/"False").
// ActorReplicaRuntime (actor_replica_runtime.h) implements it over the C++ API; the proxy
// manager's tests implement it in memory.
//
// A proxy is found again by its name: a controller started after a head restart adopts the
// proxies a previous one made (StartProxy and FindProxy look the name up first).
//
// Threading: implementations are thread-safe. Callbacks run on the implementation's threads,
// never inside the call that was given them. Cost: one actor lookup or creation and one call
// per StartProxy; one call per CallProxy.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace tessera::serve {

// Ray's name of a node's proxy actor.
inline std::string ProxyActorName(const std::string& node_id) {
  return absl::StrCat("SERVE_PROXY_ACTOR-", node_id);
}

// What a node's proxy is made with.
struct ProxyLaunch {
  std::string node_id;
  // The host its node is reached at (its agent's): the address the proxy reports when it binds
  // every interface.
  std::string node_host;
  // HTTPOptions: where it binds (port 0: a free port, reported by ready()), its timeouts (0:
  // none; the keep-alive's 0: the server's default).
  std::string http_host;
  int http_port = 0;
  double request_timeout_s = 0;
  double keep_alive_timeout_s = 0;
  // Any actor of that name is killed first (a restart: the one there failed its checks).
  bool replace = false;
};

class ProxyRuntime {
 public:
  virtual ~ProxyRuntime() = default;

  // The proxy of launch.node_id: the one that lives (unless `replace`), else a new actor; then
  // its ready(). `done` gets its address, or why it could not start (a proxy whose HTTP server
  // cannot bind dies in its constructor: Unavailable with the constructor's error).
  virtual void StartProxy(const ProxyLaunch& launch,
                          std::function<void(absl::StatusOr<std::string> address)> done) = 0;

  // A proxy a previous controller made on `node_id`, found by name (none is made): its
  // address from ready(); NotFound when none lives.
  virtual void FindProxy(const std::string& node_id,
                         std::function<void(absl::StatusOr<std::string> address)> done) = 0;

  // Calls the proxy's method `method` (no argument) and gives its result as text (None "", a
  // bool "True"/"False", a str as it is), or the error: Unavailable when its actor died (or
  // none lives), DeadlineExceeded past `timeout`, Internal with the Python exception's text.
  virtual void CallProxy(const std::string& node_id, const std::string& method,
                         absl::Duration timeout,
                         std::function<void(absl::StatusOr<std::string>)> done) = 0;

  // Ends the proxy's actor (its process is killed). A node with none is ignored.
  virtual void KillProxy(const std::string& node_id) = 0;
};

}  // namespace tessera::serve

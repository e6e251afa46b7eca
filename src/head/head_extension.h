// HeadExtension: a service a layer above the head runs in the head's process (serving: the serve
// controller, which owns replicas through the C++ API, a layer the head cannot depend on). The
// program that starts the head (the CLI) names the extensions in HeadOptions::extensions; the
// head builds each after its own service (so the extension finds the restored StateStore),
// serves its gRPC services on its own server with the same token, starts it once the head's
// addresses are published (an extension may connect back to the head as a client), and shuts it
// down first, before its own parts.
//
// Threading: Start and Shutdown are called once each, from the head's starting and stopping
// thread; services() before Start. Cost: whatever the extension does.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/clock.h"
#include "head/state_store.h"
#include "metrics/http_server.h"
#include "metrics/metric_registry.h"

namespace grpc {
class Service;
}

namespace tessera {

class HeadService;

// What the head shares with an extension; every pointer outlives the extension.
struct HeadExtensionContext {
  std::string state_dir;
  StateStore* store = nullptr;  // the head's tables (Redis or memory): records survive a restart
  bool durable = false;         // whether `store` outlives this process (Redis)
  Clock* clock = nullptr;
  metrics::MetricRegistry* registry = nullptr;  // the head's /metrics
  HeadService* service = nullptr;  // the head's own parts, called in process as its fronts are
};

// Where the head is once it serves: what Start is told.
struct HeadEndpoints {
  std::string address;       // host:port of its gRPC server
  std::string token_file;    // the cluster token's file
  std::string http_address;  // "" without an HTTP endpoint
  // Adds a JSON route to the head's HTTP endpoint (the cluster token is asked as for /api/v1);
  // null without an HTTP endpoint.
  std::function<absl::Status(std::string path, metrics::HttpHandler handler)> add_http_route;
};

class HeadExtension {
 public:
  virtual ~HeadExtension() = default;
  // The gRPC services it serves on the head's server (owned by the extension).
  virtual std::vector<grpc::Service*> services() = 0;
  virtual absl::Status Start(const HeadEndpoints& endpoints) = 0;
  // Stops what it runs; the head's own parts are still up. Idempotent.
  virtual void Shutdown() = 0;
};

using HeadExtensionFactory =
    std::function<absl::StatusOr<std::unique_ptr<HeadExtension>>(const HeadExtensionContext&)>;

}  // namespace tessera

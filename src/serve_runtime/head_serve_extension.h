// The serve controller in the head's process (docs/serve.md): ServeHeadExtension() is the
// HeadExtension the CLI names in HeadOptions::extensions. It builds a ServeController over the
// head's StateStore and clock, serves HeadServe (ServeControllerService) on the head's server,
// adds /api/v1/serve (serve.status() as JSON, each deployment's replicas too) and
// /api/v1/serve/metrics (Serve's metric families as JSON, serve_metrics_json.h: the dashboard's
// Serve page) to the head's HTTP endpoint, reads back what a
// previous head left (ServeController::Recover: the replicas are re-adopted), and, while Serve
// is started with a proxy, runs the head's HTTP proxy (ServeProxy, node id "head") in this
// process. With proxy_location EveryNode the controller also runs a proxy on every node that has
// a replica (ProxyManager): actors of the head's driver (ProxyRuntime of the same
// ActorReplicaRuntime), on the nodes the head's table lists alive.
//
// Replicas are Python actors, so the head's process joins its own cluster as a driver (the C++
// API's process runtime, tessera::Init) the first time the controller needs a replica: its
// workers run the Python interpreter and sys.path the deploying client named
// (ServeStartOptions::python_executable, python_path). Until then the head runs no driver.
//
// Threading: as HeadExtension. Cost: nothing until Serve is started.
#pragma once

#include "head/head_extension.h"

namespace tessera::serve {

HeadExtensionFactory ServeHeadExtension();

}  // namespace tessera::serve

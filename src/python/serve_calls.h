// tessera._core's calls for tessera.serve (python/tessera/serve: api.py, handle.py): Serve's
// applications at the serve controller the head's process hosts (HeadServe of serve.proto, over
// the head connection of the cluster init joined: deploy, delete, shut down, status), and the
// request router each process keeps per deployment for its DeploymentHandles
// (serve::DeploymentRouter over the controller's replica sets, read through
// GrpcReplicaSetSource, probing replicas through ActorReplicaRuntime).
//
// Threading: call with the GIL held. Each call converts its arguments with the GIL, then runs
// without it; a route waits in slices of 100 ms and checks for signals between them, so Ctrl-C
// interrupts it. A router may be used from any number of Python threads at once. Cost: a
// controller call is one RPC (retried on UNAVAILABLE); a route is the router's (docs of
// serve/request_router.h) plus two thread hand-offs.
#pragma once

#include <pybind11/pybind11.h>

namespace tessera::python {

namespace py = pybind11;

void BindServeCalls(py::module_& m);

}  // namespace tessera::python

// tessera._core.run_actor_gang: the C++ actor-gang controller (include/tessera/gang.h,
// internal::RunActorGang) driven from Python, for tessera.train. The controller reserves the
// gang (whole slices or a placement group), sets each rank's torchrun environment and restarts
// the whole group when one rank fails; for each rank it calls the Python `start(options)`, which
// creates the rank's actor and starts its call, and then waits for that call without Python.
//
// Threading: run_actor_gang releases the GIL for the whole run (it blocks until the gang ends);
// the controller's threads take the GIL only inside `start`, never while holding a core lock.
// Waiting for and killing ranks touch no Python object. Cost: one controller per call.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

namespace tessera::python {

namespace py = pybind11;

void BindGangCalls(py::module_& m);

}  // namespace tessera::python

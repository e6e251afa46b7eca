// tessera._core's calls into the runtime for drivers (and for tasks inside workers, which own
// what they submit): init/shutdown, put/get/wait, tasks, actors, the runtime context and counts.
// Each converts its Python arguments to C++ values with the GIL held, then releases the GIL for
// the core call, and never touches a Python object while it is released. Waits (get, wait) run
// in slices of at most 100 ms and check for signals between them, so Ctrl-C interrupts them.
#pragma once

#include <pybind11/pybind11.h>

namespace tessera::python {

namespace py = pybind11;

void BindDriverCalls(py::module_& m);

}  // namespace tessera::python

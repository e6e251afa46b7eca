// tessera._core's worker side: a Python worker process (python -m tessera._private.worker_main)
// serves the runtime's Worker service from C++ and runs the pushed tasks on the interpreter's
// main thread. The gRPC thread that receives a task fetches its ObjectRef arguments (GIL
// released), queues it and waits; the main thread takes it with next_task(), runs it and answers
// with task_done(), which wakes the gRPC thread with the result. Calls of an actor that allows
// several at once arrive on several gRPC threads and may be answered in any order, from any
// Python thread.
#pragma once

#include <pybind11/pybind11.h>

namespace tessera::python {

namespace py = pybind11;

void BindWorkerLoop(py::module_& m);

}  // namespace tessera::python

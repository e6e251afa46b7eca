// tessera._core: the C++ runtime as the Python package (python/tessera) sees it. Everything the
// package does that touches the cluster goes through here; the Python side only turns values
// into bytes and back and gives the API Ray's names and checks.
#include <pybind11/pybind11.h>

#include "absl/synchronization/mutex.h"
#include "python/cluster_calls.h"
#include "python/core_error.h"
#include "python/driver_calls.h"
#include "python/gang_calls.h"
#include "python/object_ref.h"
#include "python/runtime_env_calls.h"
#include "python/serve_calls.h"
#include "python/worker_loop.h"

PYBIND11_MODULE(_core, m) {
  m.doc() = "The Tessera runtime (C++), bound for the tessera package.";
  // As the CLI does: Debian's Abseil checks every mutex acquisition against a global lock-order
  // graph by default, a measurable share of each task's cost (the C++ tests keep the check).
#ifdef NDEBUG
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
  tessera::python::BindCoreError(m);
  tessera::python::BindObjects(m);
  tessera::python::BindDriverCalls(m);
  tessera::python::BindGangCalls(m);
  tessera::python::BindWorkerLoop(m);
  tessera::python::BindClusterCalls(m);
  tessera::python::BindRuntimeEnvCalls(m);
  tessera::python::BindServeCalls(m);
}

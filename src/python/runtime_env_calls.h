// tessera._core's part of runtime environments (tessera/_private/runtime_env.py): folders and
// files packed into DirectoryArchives by the same code as `tessera job submit --working-dir`
// (node/working_dir.h, with its limits and refusals), and RuntimeEnvFiles, the shared, opaque
// value that the task and actor options carry (their "runtime_env_files"): the archives with
// their content ids, which the driver's lease source unpacks once per node through the node's
// agent (PrepareWorkingDir) before a worker starts there with them.
//
// Threading: plain functions; packing releases the GIL. Cost: one read of the files and one
// SHA-256 of each archive, once per runtime_env (never per call).
#pragma once

#include <pybind11/pybind11.h>

namespace tessera::python {

namespace py = pybind11;

void BindRuntimeEnvCalls(py::module_& m);

}  // namespace tessera::python

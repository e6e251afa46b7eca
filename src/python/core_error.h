// tessera._core.CoreError: how a failed runtime call reaches Python. Raised with the args
// (kind, message, exception, traceback): the error kind's word (src/api/error_payloads.h; derived
// from the status code when the failure site set none), the one-line message, and for a task
// error the serialized Python exception and remote traceback (None otherwise).
// tessera/exceptions.py turns it into the class a Ray user catches.
//
// Threading: call with the GIL held.
#pragma once

#include <pybind11/pybind11.h>

#include "absl/status/status.h"

namespace tessera::python {

namespace py = pybind11;

void BindCoreError(py::module_& m);
// Sets CoreError for `status` and throws py::error_already_set.
[[noreturn]] void ThrowStatus(const absl::Status& status);

}  // namespace tessera::python

#include "python/core_error.h"

#include <string>

#include "api/error_payloads.h"

namespace tessera::python {
namespace {

PyObject* core_error = nullptr;  // the type, made once at import

std::string KindOf(const absl::Status& status) {
  if (auto kind = api::ErrorKindOf(status); kind.has_value()) return *kind;
  switch (status.code()) {
    case absl::StatusCode::kDeadlineExceeded: return "GET_TIMEOUT";
    case absl::StatusCode::kInvalidArgument: return "INVALID";
    case absl::StatusCode::kCancelled: return "TASK_CANCELLED";
    case absl::StatusCode::kResourceExhausted: return "OBJECT_STORE_FULL";
    case absl::StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case absl::StatusCode::kNotFound: return "NOT_FOUND";
    default: return "SYSTEM";
  }
}

py::object BytesOrNone(const std::optional<std::string>& value) {
  if (!value.has_value()) return py::none();
  return py::bytes(*value);
}

}  // namespace

void BindCoreError(py::module_& m) {
  core_error = PyErr_NewExceptionWithDoc("tessera._core.CoreError",
                                         "A failed runtime call: args are (kind, message, "
                                         "exception bytes or None, traceback or None).",
                                         PyExc_Exception, nullptr);
  m.add_object("CoreError", py::handle(core_error));
}

void ThrowStatus(const absl::Status& status) {
  const std::optional<std::string> traceback = api::TracebackOf(status);
  py::tuple args = py::make_tuple(
      KindOf(status), std::string(status.message()), BytesOrNone(api::ExceptionOf(status)),
      traceback.has_value() ? py::object(py::str(*traceback)) : py::object(py::none()));
  PyErr_SetObject(core_error, args.ptr());
  throw py::error_already_set();
}

}  // namespace tessera::python

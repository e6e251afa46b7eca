// The Python faces of the runtime's values: ObjectRef (a reference to a value owned by this
// process or another, freed in the owner's table when the last one goes) and Buffer (the bytes
// of a value, read-only, exported through the buffer protocol: a pinned view of the node's
// shared-memory store for a large value, so pickle's out-of-band buffers and the NumPy arrays
// made from them alias the store's memory instead of copying it).
//
// Threading: call with the GIL held. An ObjectRef's last release runs without the GIL (the
// owner's table may delete a stored copy over the store's socket).
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <string_view>
#include <vector>

#include "tessera/object_ref.h"
#include "tessera/tessera.h"

namespace tessera::python {

namespace py = pybind11;

struct PyObjectRef {
  ObjectRefBase ref;
};

struct PyBuffer {
  internal::SerializedValue value;
};

// Read-only views of a list of Python buffer objects (bytes, memoryview, numpy arrays...), for
// handing a value's parts to the core. The views stay valid while this lives: make it before
// releasing the GIL and let it go after taking it back.
struct PartViews {
  explicit PartViews(const py::list& parts);
  std::vector<py::buffer_info> buffers;
  std::vector<std::string_view> views;
  size_t size = 0;  // of all the parts
};

void BindObjects(py::module_& m);

// The wrappers for values the core returned.
py::object WrapRef(ObjectRefBase ref);
py::object WrapBuffer(internal::SerializedValue value);
// The ObjectRef inside a Python ObjectRef; TypeError for anything else.
const ObjectRefBase& UnwrapRef(py::handle object);
// The data of each ObjectRef in `refs` (a value's contained refs); TypeError for anything else.
std::vector<ObjectRefData> RefDataOf(const py::list& refs);

// Set in a child after fork: the core's threads and locks did not come along, so every call
// raises instead of touching them.
bool Forked();
void CheckNotForked();

}  // namespace tessera::python

#include "python/object_ref.h"

#include <atomic>
#include <memory>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "python/core_error.h"
#include "tessera/serialization.h"

namespace tessera::python {
namespace {

std::atomic<bool> forked{false};

// Drops the runtime's reference without the GIL; leaks it when the interpreter is finalizing or
// in a forked child (the locks it would take may be held by threads that are gone).
struct ReleaseWithoutGil {
  void operator()(PyObjectRef* ref) const {
    if (ref == nullptr) return;
#if PY_VERSION_HEX >= 0x030D0000
    const bool finalizing = Py_IsFinalizing();
#else
    const bool finalizing = _Py_IsFinalizing();
#endif
    if (forked.load() || finalizing) {
      new ObjectRefBase(std::move(ref->ref));  // leaked on purpose
      delete ref;
      return;
    }
    py::gil_scoped_release release;
    delete ref;
  }
};

using RefHolder = std::unique_ptr<PyObjectRef, ReleaseWithoutGil>;

py::class_<PyObjectRef, RefHolder>* ref_class = nullptr;
py::class_<PyBuffer>* buffer_class = nullptr;

std::string OwnerText(const OwnerAddress& owner) {
  return absl::StrCat(owner.address, " (", owner.worker_id, ")");
}

}  // namespace

PartViews::PartViews(const py::list& parts) {
  buffers.reserve(parts.size());
  views.reserve(parts.size());
  for (py::handle part : parts) {
    buffers.push_back(py::buffer(py::reinterpret_borrow<py::object>(part)).request());
    const py::buffer_info& info = buffers.back();
    views.emplace_back(static_cast<const char*>(info.ptr),
                       static_cast<size_t>(info.size * info.itemsize));
    size += views.back().size();
  }
}

bool Forked() { return forked.load(); }

void CheckNotForked() {
  if (forked.load()) {
    throw std::runtime_error(
        "tessera cannot be used in a process forked from a tessera process (its threads did "
        "not come along); start it with the 'spawn' method instead");
  }
}

py::object WrapRef(ObjectRefBase ref) {
  return py::cast(RefHolder(new PyObjectRef{std::move(ref)}),
                  py::return_value_policy::take_ownership);
}

py::object WrapBuffer(internal::SerializedValue value) {
  return py::cast(new PyBuffer{std::move(value)}, py::return_value_policy::take_ownership);
}

const ObjectRefBase& UnwrapRef(py::handle object) {
  if (!py::isinstance<PyObjectRef>(object)) {
    throw py::type_error(absl::StrCat("expected an ObjectRef, got ",
                                      std::string(py::str(py::type::of(object).attr("__name__")))));
  }
  return object.cast<PyObjectRef&>().ref;
}

std::vector<ObjectRefData> RefDataOf(const py::list& refs) {
  std::vector<ObjectRefData> data;
  data.reserve(refs.size());
  for (py::handle ref : refs) data.push_back(UnwrapRef(ref).data());
  return data;
}

void BindObjects(py::module_& m) {
  ref_class = new py::class_<PyObjectRef, RefHolder>(m, "ObjectRef",
                                                     R"(A reference to a value in the cluster.

Made by tasks (`f.remote()`) and `tessera.put`; read with `tessera.get`.)");
  ref_class->def("binary", [](const PyObjectRef& r) { return py::bytes(r.ref.id().Binary()); })
      .def("hex", [](const PyObjectRef& r) { return r.ref.id().Hex(); })
      .def("owner_address", [](const PyObjectRef& r) { return r.ref.data().owner.address; })
      .def("_ext_payload",
           [](const PyObjectRef& r) { return py::bytes(EncodeObjectRefPayload(r.ref.data())); })
      .def_static(
          "_from_ext_payload",
          [](py::bytes payload) {
            auto data = DecodeObjectRefPayload(std::string(payload));
            if (!data.ok()) throw py::value_error(std::string(data.status().message()));
            // Held here: counted at its owner while this process holds a copy.
            return WrapRef(internal::HoldRef(*std::move(data)));
          },
          py::arg("payload"))
      .def("__eq__",
           [](const PyObjectRef& a, py::handle b) {
             return py::isinstance<PyObjectRef>(b) && a.ref.id() == b.cast<PyObjectRef&>().ref.id();
           })
      .def("__hash__",
           [](const PyObjectRef& r) { return py::hash(py::bytes(r.ref.id().Binary())); })
      .def("__repr__",
           [](const PyObjectRef& r) { return absl::StrCat("ObjectRef(", r.ref.id().Hex(), ")"); })
      .def("_owner", [](const PyObjectRef& r) { return OwnerText(r.ref.data().owner); });

  buffer_class = new py::class_<PyBuffer>(m, "Buffer", py::buffer_protocol(),
                                          R"(The bytes of a value, read-only.

A large value's buffer is a view of the node's shared-memory store, pinned while the buffer
(or anything made from it, such as a NumPy array) lives.)");
  buffer_class
      ->def_buffer([](PyBuffer& b) {
        const std::string_view view = b.value.view();
        return py::buffer_info(const_cast<char*>(view.data()), 1,
                               py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(view.size())}, {1}, /*readonly=*/true);
      })
      .def("__len__", [](const PyBuffer& b) { return b.value.view().size(); })
      .def_property_readonly("zero_copy", [](const PyBuffer& b) { return b.value.zero_copy(); })
      .def_property_readonly("_address", [](const PyBuffer& b) {
        return reinterpret_cast<uintptr_t>(b.value.view().data());
      });

  m.def(
      "_forked", [] { forked.store(true); },
      "Called in a forked child (os.register_at_fork): the core refuses every call after it.");
}

}  // namespace tessera::python

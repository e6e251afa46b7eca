// Ray's label selectors as Python gives them ({"key": "v" | "!v" | "in(a,b)" | ...}, one dict per
// selector), parsed once here into the selectors the C++ API takes. TypeError for what is not a
// list of dicts of str, ValueError naming the bad selector. Call with the GIL held.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "labels/label_selector.h"

namespace tessera::python {

namespace py = pybind11;

std::vector<LabelSelector> SelectorsFrom(py::handle dicts, const char* what);

}  // namespace tessera::python

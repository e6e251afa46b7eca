// Ray's label selectors as Python gives them ({"key": "v" | "!v" | "in(a,b)" | ...}, one dict per
// selector) in the form the C++ API takes (the CLI's text, ParseLabelSelector's input).
// ValueError naming the bad selector. Call with the GIL held.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

namespace tessera::python {

namespace py = pybind11;

std::vector<std::string> SelectorTexts(py::handle dicts, const char* what);

}  // namespace tessera::python

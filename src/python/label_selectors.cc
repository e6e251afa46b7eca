#include "python/label_selectors.h"

#include <pybind11/stl.h>

#include <map>

#include "absl/strings/str_cat.h"

namespace tessera::python {

std::vector<LabelSelector> SelectorsFrom(py::handle dicts, const char* what) {
  std::vector<LabelSelector> selectors;
  if (dicts.is_none()) return selectors;
  if (!py::isinstance<py::list>(dicts) && !py::isinstance<py::tuple>(dicts)) {
    throw py::type_error(absl::StrCat(what, " must be a list of dicts"));
  }
  for (py::handle item : dicts) {
    std::map<std::string, std::string> map;
    try {
      map = item.cast<std::map<std::string, std::string>>();
    } catch (const py::cast_error&) {
      throw py::type_error(absl::StrCat(what, " must be a list of dicts of str to str"));
    }
    auto selector = ParseLabelSelectorMap(map);
    if (!selector.ok()) {
      throw py::value_error(absl::StrCat(what, ": ", selector.status().message()));
    }
    selectors.push_back(*std::move(selector));
  }
  return selectors;
}

}  // namespace tessera::python

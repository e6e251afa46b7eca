#include "python/vocabulary_values.h"

#include <pybind11/stl.h>

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tessera::python {

ResourceSet ResourceSetFrom(py::handle amounts, const std::string& what) {
  std::map<std::string, double> map;
  try {
    map = amounts.cast<std::map<std::string, double>>();
  } catch (const py::cast_error&) {
    throw py::type_error(absl::StrCat(what, " must be a dict of str to numbers"));
  }
  auto resources = ResourceSet::FromAmounts(map);
  if (!resources.ok()) {
    throw py::value_error(absl::StrCat(what, ": ", resources.status().message()));
  }
  return *std::move(resources);
}

std::vector<ResourceSet> BundlesFrom(py::handle bundles, const std::string& what) {
  if (!py::isinstance<py::list>(bundles) && !py::isinstance<py::tuple>(bundles)) {
    throw py::type_error(absl::StrCat(what, " must be a list of dicts"));
  }
  std::vector<ResourceSet> out;
  for (py::handle bundle : bundles) {
    out.push_back(ResourceSetFrom(bundle, absl::StrCat(what, ": bundle ", out.size())));
  }
  return out;
}

PlacementStrategy PlacementStrategyFrom(py::handle word, const std::string& what) {
  if (!py::isinstance<py::str>(word)) throw py::type_error(absl::StrCat(what, " must be a str"));
  auto strategy = ParsePlacementStrategy(word.cast<std::string>());
  if (!strategy.ok()) {
    throw py::value_error(absl::StrCat(what, ": ", strategy.status().message()));
  }
  return *strategy;
}

}  // namespace tessera::python

// Ray's placement values as Python gives them, turned once here into the vocabulary's types that
// the C++ API takes (tessera/placement_group.h, tessera/gang.h): a dict of resource amounts
// ({"CPU": 1, "GPU": 0.5}, already at the core's 4 decimal places: options.py's
// rounded_resources), a list of them (a placement group's bundles), and a strategy word ("PACK",
// "SPREAD", "STRICT_PACK", "STRICT_SPREAD"). TypeError for a value of the wrong shape, ValueError
// naming `what` and the problem. Call with the GIL held.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "resources/resource_set.h"
#include "vocabulary/placement_strategy.h"

namespace tessera::python {

namespace py = pybind11;

// {name: amount} as a ResourceSet (zeros dropped): "<what>: resource \"x\": ..." on a bad one.
ResourceSet ResourceSetFrom(py::handle amounts, const std::string& what);
// A list of those, one per bundle: "<what>: bundle <i>: ..." on a bad one.
std::vector<ResourceSet> BundlesFrom(py::handle bundles, const std::string& what);
// The strategy a word names: "<what>: unknown placement strategy ..." otherwise.
PlacementStrategy PlacementStrategyFrom(py::handle word, const std::string& what);

}  // namespace tessera::python

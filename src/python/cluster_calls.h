// tessera._core's calls about the cluster rather than one's own work: its nodes and their
// resources (tessera.nodes, cluster_resources, available_resources), placement groups and whole
// slices (tessera.util.placement_group, tessera.util.tpu), and promises (objects whose value
// the package gives later: a placement group's ready()). They talk to the head of the cluster
// init connected to; each releases the GIL for its RPCs.
#pragma once

#include <pybind11/pybind11.h>

namespace tessera::python {

namespace py = pybind11;

void BindClusterCalls(py::module_& m);

}  // namespace tessera::python

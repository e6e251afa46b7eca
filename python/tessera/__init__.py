"""Tessera's Python API: tasks, actors and objects on a Tessera cluster, named as Ray names them
(renaming `ray` to `tessera` ports most programs).

    import tessera

    tessera.init()                      # joins the cluster of this machine, or starts one

    @tessera.remote
    def square(x):
        return x * x

    print(tessera.get([square.remote(i) for i in range(4)]))   # [0, 1, 4, 9]

The runtime is C++ (tessera._core); this package gives it Ray's names, checks and value
format (docs/python.md).
"""

from tessera import exceptions
from tessera._core import ObjectRef
from tessera._private.object_ref_generator import ObjectRefGenerator
from tessera._private.worker import (
    TesseraContext,
    cancel,
    get,
    init,
    is_initialized,
    put,
    shutdown,
    wait,
)
from tessera._private.state import available_resources, cluster_resources, nodes, timeline
from tessera.actor import ActorClass, ActorHandle, get_actor, kill, method
from tessera.remote_function import remote
from tessera.runtime_context import get_gpu_ids, get_runtime_context

__version__ = "0.1.0"

__all__ = [
    "ActorClass", "ActorHandle", "ObjectRef", "ObjectRefGenerator", "TesseraContext", "available_resources", "cancel",
    "cluster_resources", "exceptions", "get", "get_actor", "get_gpu_ids", "get_runtime_context",
    "init", "is_initialized", "kill", "method", "nodes", "put", "remote", "shutdown", "timeline",
    "wait",
]

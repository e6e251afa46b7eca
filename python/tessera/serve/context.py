"""Where Serve code runs: the replica context (which replica of which deployment of which
application, and the user's object) and the request context (the request being handled).

Both are contextvars, so in-process tests can run several replicas side by side. A replica sets
its context in each of its calls (each actor call runs in a task of its own), and also as the
process's replica (one replica per actor process), which code outside those tasks (a thread the
user starts) falls back on. The request context is set per request by the replica, and copied
into the threads that run sync user methods.

  get_replica_context()   the ReplicaContext; RayServeException outside a replica
  _get_replica_slice()    the TPU slice the serve controller reserved for this replica (a
                          deployment Serve LLM built for a TPU topology), None elsewhere: its
                          reservation's name, which places actors in its hosts' bundles as a
                          placement group of that name (bundle i: host i, TPU worker i), and
                          its number of hosts; the controller sets both in the replica's
                          environment (REPLICA_SLICE_ENV, REPLICA_SLICE_HOSTS_ENV)

Threading: contextvars are per thread and task; the process fallback is one reference,
swapped atomically. Cost: a contextvar read.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional

from tessera.serve._constants import (REPLICA_SLICE_ENV, REPLICA_SLICE_HOSTS_ENV,
                                      SERVE_DEFAULT_APP_NAME)
from tessera.serve.exceptions import RayServeException


@dataclass(frozen=True)
class DeploymentID:
    name: str
    app_name: str = SERVE_DEFAULT_APP_NAME

    def __str__(self) -> str:
        return f"Deployment(name='{self.name}', app='{self.app_name}')"


@dataclass(frozen=True)
class ReplicaID:
    unique_id: str
    deployment_id: DeploymentID

    def to_full_id_str(self) -> str:
        return f"{self.deployment_id.app_name}#{self.deployment_id.name}#{self.unique_id}"

    def __str__(self) -> str:
        return f"Replica(id='{self.unique_id}', deployment='{self.deployment_id.name}', " \
               f"app='{self.deployment_id.app_name}')"


@dataclass
class ReplicaContext:
    """The running replica: `replica_id`, `servable_object` (the user's instance, or function),
    and `app_name`, `deployment`, `replica_tag` (its unique id)."""

    replica_id: ReplicaID
    servable_object: Callable
    # The replica's @serve.multiplexed caches, so it can report the model ids it holds.
    _multiplexers: List[Any] = field(default_factory=list, repr=False, compare=False)

    @property
    def app_name(self) -> str:
        return self.replica_id.deployment_id.app_name

    @property
    def deployment(self) -> str:
        return self.replica_id.deployment_id.name

    @property
    def replica_tag(self) -> str:
        return self.replica_id.unique_id


@dataclass(frozen=True)
class RequestContext:
    """The request being handled: its route (the route prefix it came through, HTTP), id,
    application, multiplexed model id ("" none) and whether it came over HTTP."""

    route: str = ""
    request_id: str = ""
    app_name: str = ""
    multiplexed_model_id: str = ""
    is_http_request: bool = False


_EMPTY_REQUEST = RequestContext()
_replica_context: contextvars.ContextVar[Optional[ReplicaContext]] = contextvars.ContextVar(
    "tessera_serve_replica_context", default=None)
_request_context: contextvars.ContextVar[RequestContext] = contextvars.ContextVar(
    "tessera_serve_request_context", default=_EMPTY_REQUEST)
_process_replica: Optional[ReplicaContext] = None


def _get_internal_replica_context() -> Optional[ReplicaContext]:
    return _replica_context.get() or _process_replica


def _set_internal_replica_context(context: Optional[ReplicaContext],
                                  process_wide: bool = False) -> contextvars.Token:
    """Sets the replica context of the running task (and, process_wide, the process's)."""
    global _process_replica
    if process_wide:
        _process_replica = context
    return _replica_context.set(context)


def _clear_process_replica(context: ReplicaContext) -> None:
    """Forgets the process's replica if it is `context` (its replica shut down)."""
    global _process_replica
    if _process_replica is context:
        _process_replica = None


def _get_serve_request_context() -> RequestContext:
    return _request_context.get()


def _set_request_context(context: RequestContext) -> contextvars.Token:
    return _request_context.set(context)


def _reset_request_context(token: contextvars.Token) -> None:
    _request_context.reset(token)


def _unset_request_context() -> None:
    """Clears the request context of the running task (a background task started while
    handling one request must not carry that request's context)."""
    _request_context.set(_EMPTY_REQUEST)


@dataclass(frozen=True)
class ReplicaSlice:
    """The TPU slice a replica sits on: `name`, its reservation (a placement group of that name:
    bundle i is host i), and `num_hosts`. The replica actor is in bundle 0."""

    name: str
    num_hosts: int

    def placement_group(self, bundle: Any) -> Any:
        """The slice as a PlacementGroup to place actors with (PlacementGroupSchedulingStrategy),
        every host's bundle described as `bundle`."""
        from tessera.util.placement_group import PlacementGroup

        return PlacementGroup(self.name, [dict(bundle) for _ in range(self.num_hosts)], "SPREAD")


def _get_replica_slice() -> Optional[ReplicaSlice]:
    """This replica's slice, from the environment the controller started it with; None when it
    has none. ValueError when the environment names a slice without a host count."""
    import os

    name = os.environ.get(REPLICA_SLICE_ENV, "")
    if not name:
        return None
    hosts = os.environ.get(REPLICA_SLICE_HOSTS_ENV, "")
    if not hosts.isdigit() or int(hosts) < 1:
        raise ValueError(f"{REPLICA_SLICE_ENV}={name} comes with {REPLICA_SLICE_HOSTS_ENV}="
                         f"{hosts!r}, not a host count")
    return ReplicaSlice(name, int(hosts))


def get_replica_context() -> ReplicaContext:
    """The deployment and replica of the calling code, from within a replica at runtime.

    Raises RayServeException when not called from within a Serve deployment."""
    context = _get_internal_replica_context()
    if context is None:
        raise RayServeException("`serve.get_replica_context()` may only be called from within "
                                "a Ray Serve deployment.")
    return context


__all__ = ["DeploymentID", "ReplicaContext", "ReplicaID", "RequestContext",
           "get_replica_context"]

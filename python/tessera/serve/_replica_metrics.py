"""The metrics a replica's process exports through the serve controller: code running in a
replica (Serve LLM's LLMServer) adds a source, a callable that renders its metrics as Prometheus
text; ReplicaActor.get_metrics_text renders every live source when the controller asks (every
10 s), and the controller relays them on the head's /metrics, each series tagged ReplicaId
(src/serve_runtime/replica_metrics_collector.h).

    add_source(server.metrics_text)   # a bound method is held weakly: gone with its object
    text = render()                   # "" with no source

Sources must not render the same family twice between them (a replica runs one LLMServer): the
controller refuses text that names a family twice, and the replica then has no series.

Threading: thread-safe (one lock around the list). Cost: render is each source's.
"""

from __future__ import annotations

import inspect
import logging
import threading
import weakref
from typing import Callable, List, Union

from tessera.serve._constants import SERVE_LOGGER_NAME

logger = logging.getLogger(SERVE_LOGGER_NAME)

_Source = Union[Callable[[], str], "weakref.WeakMethod"]

_lock = threading.Lock()
_sources: List[_Source] = []  # guarded by _lock


def add_source(render_text: Callable[[], str]) -> None:
    """Adds a source of metrics text; a bound method is held weakly, so it leaves with its
    object."""
    if not callable(render_text):
        raise TypeError(f"a metrics source must be callable, got {render_text!r}")
    source: _Source = (weakref.WeakMethod(render_text) if inspect.ismethod(render_text)
                       else render_text)
    with _lock:
        _sources.append(source)


def remove_source(render_text: Callable[[], str]) -> None:
    """Removes a source added before (nothing when it is not there)."""
    with _lock:
        _sources[:] = [s for s in _sources if _resolve(s) not in (None, render_text)]


def _resolve(source: _Source):
    return source() if isinstance(source, weakref.WeakMethod) else source


def render() -> str:
    """Every live source's text, one after the other; a source that raises is logged and left
    out."""
    with _lock:
        live = [f for f in (_resolve(s) for s in _sources) if f is not None]
        _sources[:] = [s for s in _sources if _resolve(s) is not None]
    parts = []
    for source in live:
        try:
            text = source()
        except Exception:
            logger.exception("A replica metrics source failed to render")
            continue
        if text:
            parts.append(text if text.endswith("\n") else text + "\n")
    return "".join(parts)

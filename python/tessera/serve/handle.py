"""DeploymentHandle, DeploymentResponse and DeploymentResponseGenerator: calling a deployment
from Python (a driver, or another deployment's replica), as Ray Serve's handles.

    handle = serve.run(app)                     # or serve.get_app_handle("default")
    handle.remote(1).result()                   # __call__
    await handle.other_method.remote(x)         # inside a deployment
    for chunk in handle.options(stream=True).tokens.remote("hi"): ...

A handle carries only its application's and deployment's names and its options: it pickles as
that (a handle bound into another deployment, or passed to a task, works in the other process),
and each process makes its request router the first time one of its handles sends a request
(tessera._core.serve_router: the C++ DeploymentRouter over the controller's replica sets, one
per deployment per process, shared by every handle to that deployment there).

Sending a request: the router finds a replica (requests wait at this caller, in the router's
FIFO queue; over the deployment's max_queued_requests the call fails with BackPressureError),
the replica's actor (an ActorHandle for its id and owner address, cached per replica) gets
`handle_request(method_name, args, kwargs, metadata)` (stream=True:
`handle_request_streaming(...)`, a streaming generator call). A replica at its
max_ongoing_requests answers with its rejection marker (ReplicaRejection; a stream as its first
item) and the request is routed again, after a short backoff; a replica whose actor died is
routed around the same way (the router drops it then, until the controller's next replica set
names it again), up to _MAX_DEAD_REPLICA_RETRIES times. When the request ends, however it ends,
the router is told (`finished`), so its queue-length cache counts it out.

`.remote()` returns at once: routing and waiting run on this module's threads (daemon threads,
so a request waiting for a replica never holds the interpreter's exit), and the response is a
future over them. `response.result(timeout_s)` waits for it (a RuntimeError inside a running
asyncio loop, as Ray's), `await response` waits on the loop. A DeploymentResponse passed as a
top-level argument of another handle call is resolved to its value first (Serve awaits it);
nested inside a container it travels as the ObjectRef of its result. `response.cancel()` asks
the replica to cancel the request (its coroutine gets CancelledError at its next await) and
fails the response with RequestCancelledError.

Threading: handles, responses and generators may be used from any thread. Cost per request: a
hand-off to a pool thread, the router's decision (serve/request_router.h), one actor call and
one read of its result.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import queue
import threading
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, Optional, Tuple

from tessera.serve._constants import SERVE_LOGGER_NAME
from tessera.serve.exceptions import BackPressureError, RayServeException, RequestCancelledError

logger = logging.getLogger(SERVE_LOGGER_NAME)

# A request is sent this many times at most to replicas whose actors died (the router drops each
# as it is found dead; Ray's backoff between tries).
_MAX_DEAD_REPLICA_RETRIES = 30
_INITIAL_BACKOFF_S = 0.025
_MAX_BACKOFF_S = 0.5
# At most this many requests of this process are routed and waited for at once; more wait for a
# thread (the pool grows to it as requests come).
_MAX_THREADS = 1000

_IN_LOOP_ERROR = ("Sync methods should not be called from within an `asyncio` event loop. Use "
                  "`await response` instead.")


def _backoff(attempt: int) -> float:
    """Ray's router backoff: 0, then 0.025 * 2^k s, at most 0.5 s."""
    if attempt == 0:
        return 0.0
    return min(_INITIAL_BACKOFF_S * 2 ** (attempt - 1), _MAX_BACKOFF_S)


def _in_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _settle(future: concurrent.futures.Future, value: Any = None,
            error: Optional[BaseException] = None) -> None:
    """Completes `future` unless it is complete already (cancelled by its awaiter, or failed by
    cancel())."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)
    except concurrent.futures.InvalidStateError:
        pass


class _Pool:
    """Daemon threads that run requests: one per request in flight (up to a limit), started as
    needed and kept for the next requests. Not concurrent.futures' pool, whose threads the
    interpreter joins at exit: a request still waiting for a replica would hold the exit."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._tasks: "queue.SimpleQueue[Tuple[Callable, tuple]]" = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._queued = 0

    def run(self, function: Callable, *args: Any) -> None:
        with self._lock:
            self._queued += 1
            start = self._queued > self._idle and self._threads < self._limit
            if start:
                self._threads += 1
        if start:
            threading.Thread(target=self._work, name="tessera-serve-handle", daemon=True).start()
        self._tasks.put((function, args))

    def submit(self, function: Callable, *args: Any) -> concurrent.futures.Future:
        """`function(*args)` on a pool thread; the future of its outcome."""
        future: concurrent.futures.Future = concurrent.futures.Future()

        def call() -> None:
            try:
                result = function(*args)
            except BaseException as e:  # noqa: B902 - handed to the future's reader
                _settle(future, error=e)
            else:
                _settle(future, result)

        self.run(call)
        return future

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            function, args = self._tasks.get()
            with self._lock:
                self._idle -= 1
                self._queued -= 1
            try:
                function(*args)
            except BaseException:  # noqa: B902 - a request's own errors go to its future
                logger.exception("A Serve handle request failed outside its response.")


_POOL = _Pool(_MAX_THREADS)


# ---------------------------------------------------------------------------------------------
# Routers: one per deployment per process (per connection).


class _Router:
    """The C++ router of one deployment, and the ActorHandles of its replicas."""

    def __init__(self, app_name: str, deployment_name: str,
                 prefer_local_routing: bool = False) -> None:
        from tessera import _core
        from tessera._private import worker

        try:
            self._core = _core.serve_router(app_name, deployment_name, prefer_local_routing)
        except _core.CoreError as e:
            worker.raise_core_error(e)
        self.app_name = app_name
        self.deployment_name = deployment_name
        self._lock = threading.Lock()
        self._actors: Dict[str, Any] = {}  # replica id -> (actor id, ActorHandle)

    def assign(self, model_id: str) -> Tuple[str, Any]:
        """Waits for a replica to take one request: (its replica id, its actor's handle)."""
        from tessera import _core
        from tessera._private import worker

        try:
            replica_id, actor_id, owner_address = self._core.route(model_id, None)
        except _core.ServeBackPressure as e:
            raise _back_pressure_error(str(e.args[0] if e.args else e)) from None
        except _core.CoreError as e:
            kind, message = e.args[0], e.args[1]
            if kind == "NOT_FOUND":
                raise RayServeException(message) from None
            worker.raise_core_error(e)
        return replica_id, self._actor(replica_id, actor_id, owner_address)

    def _actor(self, replica_id: str, actor_id: str, owner_address: str) -> Any:
        from tessera.actor import ActorHandle

        with self._lock:
            known = self._actors.get(replica_id)
            if known is None or known[0] != actor_id:
                # Methods unknown here (None): any name is taken for one of ReplicaActor's.
                known = (actor_id, ActorHandle(actor_id, "ReplicaActor", None,
                                               owner_address=owner_address))
                self._actors[replica_id] = known
            return known[1]

    def finished(self, replica_id: str) -> None:
        self._core.finished(replica_id)

    def forget(self, replica_id: str) -> None:
        """The replica's actor died: its handle is not kept, and the router routes around it
        until the controller's next replica set names it again."""
        with self._lock:
            self._actors.pop(replica_id, None)
        self._core.died(replica_id)

    def stop(self) -> None:
        self._core.stop()


def _back_pressure_error(message: str) -> BackPressureError:
    """BackPressureError with the router's message (Ray's text, whose numbers it carries)."""
    import re

    match = re.search(r"num_queued_requests=(-?\d+), max_queued_requests=(-?\d+)", message)
    if match:
        return BackPressureError(int(match.group(1)), int(match.group(2)))
    error = BackPressureError(-1, -1)
    error._message = message
    return error


_routers_lock = threading.Lock()
# By (application, deployment, prefer_local_routing).
_routers: Dict[Tuple[str, str, bool], _Router] = {}
_routers_session: Optional[int] = None


def _router(app_name: str, deployment_name: str, prefer_local_routing: bool = False) -> _Router:
    """This process's router of the deployment, made at its first request (again after an
    init to another cluster: the old ones are stopped); handles with _prefer_local_routing
    share one of their own, which tries the replicas of this process's node first."""
    from tessera._private import worker

    worker.auto_init()
    session = worker.session()
    global _routers_session
    stale = []
    with _routers_lock:
        if _routers_session != session:
            stale = list(_routers.values())
            _routers.clear()
            _routers_session = session
        key = (app_name, deployment_name, prefer_local_routing)
        router = _routers.get(key)
        if router is None:
            router = _Router(app_name, deployment_name, prefer_local_routing)
            _routers[key] = router
    for old in stale:
        old.stop()
    return router


def stop_routers(app_name: Optional[str] = None) -> None:
    """Stops this process's routers of `app_name` (None: all): serve.delete and shutdown, and
    the interpreter's exit (before tessera disconnects)."""
    with _routers_lock:
        keys = [key for key in _routers if app_name is None or key[0] == app_name]
        stopped = [_routers.pop(key) for key in keys]
    for router in stopped:
        try:
            router.stop()
        except Exception:  # noqa: BLE001 - at exit the runtime may be gone already
            logger.debug("Could not stop the router of %s.", router.deployment_name,
                         exc_info=True)


# Registered after tessera's own shutdown (imported first), so it runs before it.
atexit.register(stop_routers)


# ---------------------------------------------------------------------------------------------
# Requests.


@dataclass(frozen=True)
class _HandleOptions:
    method_name: str = "__call__"
    multiplexed_model_id: str = ""
    stream: bool = False
    # Ray's private option: replicas on the caller's node are tried first.
    prefer_local_routing: bool = False


@dataclass
class _Outcome:
    """What a unary request gave: the ObjectRef of its result (None when it never reached a
    replica), and its value."""

    ref: Any
    value: Any = None
    error: Optional[BaseException] = None


class _Request:
    """One request's state, shared by its response and the pool thread that sends it."""

    def __init__(self, handle: "DeploymentHandle", args: tuple, kwargs: dict) -> None:
        self.app_name = handle.app_name
        self.deployment_name = handle.deployment_name
        self.options = handle._options
        self.args = args
        self.kwargs = kwargs
        self.request_id = uuid.uuid4().hex
        self.future: concurrent.futures.Future = concurrent.futures.Future()
        self._lock = threading.Lock()
        self._cancelled = False
        self._actor: Any = None  # the replica's actor while the request is there

    @property
    def metadata(self) -> Dict[str, Any]:
        return {"request_id": self.request_id,
                "multiplexed_model_id": self.options.multiplexed_model_id, "route": ""}

    def cancelled(self) -> bool:
        with self._lock:
            return self._cancelled

    def at_replica(self, actor: Any) -> None:
        """The request was sent to `actor` (None: it left it); a cancel raced with the sending
        reaches the replica now."""
        with self._lock:
            self._actor = actor
            cancelled = self._cancelled
        if cancelled and actor is not None:
            self._cancel_at(actor)

    def cancel(self) -> None:
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            actor = self._actor
        if actor is not None:
            self._cancel_at(actor)
        _settle(self.future, error=RequestCancelledError(self.request_id))

    def _cancel_at(self, actor: Any) -> None:
        try:
            actor.cancel_request.remote(self.request_id)
        except Exception:  # noqa: BLE001 - the replica is gone: nothing runs to cancel
            logger.debug("Could not cancel request %s.", self.request_id, exc_info=True)

    def check_cancelled(self) -> None:
        if self.cancelled():
            raise RequestCancelledError(self.request_id)


def _resolve_arguments(args: tuple, kwargs: dict) -> Tuple[tuple, dict]:
    """Top-level DeploymentResponses become their values (Serve awaits them); generators
    cannot be passed."""

    def resolve(value: Any) -> Any:
        if isinstance(value, DeploymentResponseGenerator):
            raise TypeError("Passing a `DeploymentResponseGenerator` to another "
                            "`DeploymentHandle` call is not supported.")
        if isinstance(value, DeploymentResponse):
            return value._outcome().value
        return value

    return tuple(resolve(a) for a in args), {k: resolve(v) for k, v in kwargs.items()}


def _dead_replica_errors() -> tuple:
    from tessera.exceptions import ActorDiedError, ActorUnavailableError

    return (ActorDiedError, ActorUnavailableError)


def _send_until_taken(request: _Request,
                      send: Callable[[Any], Tuple[Any, bool]]) -> Tuple[str, _Router, Any]:
    """Routes the request and calls `send(actor)` until a replica takes it: send returns (what
    the request gave, whether the replica rejected it) and may raise. Returns (the replica's id,
    the router, what send gave); the router is told of each replica that did not take it (the
    caller tells it when the request ends at the one that did)."""
    router = _router(request.app_name, request.deployment_name,
                     request.options.prefer_local_routing)
    dead = _dead_replica_errors()
    rejected = died = 0
    while True:
        request.check_cancelled()
        replica_id, actor = router.assign(request.options.multiplexed_model_id)
        if request.cancelled():  # while it waited for a replica: it is not sent
            router.finished(replica_id)
            raise RequestCancelledError(request.request_id)
        request.at_replica(actor)
        try:
            result, was_rejected = send(actor)
        except dead:
            request.at_replica(None)
            router.finished(replica_id)
            router.forget(replica_id)
            died += 1
            if died > _MAX_DEAD_REPLICA_RETRIES:
                raise
            time.sleep(_backoff(died))
            continue
        except BaseException:
            request.at_replica(None)
            router.finished(replica_id)
            raise
        if not was_rejected:
            return replica_id, router, result
        request.at_replica(None)
        router.finished(replica_id)
        rejected += 1
        time.sleep(_backoff(rejected))


def _run_unary(request: _Request) -> None:
    """The pool thread's part of a unary request: its outcome into request.future."""
    from tessera._private import worker
    from tessera.serve.replica import ReplicaRejection

    def send(actor: Any) -> Tuple[_Outcome, bool]:
        ref = actor.handle_request.remote(request.options.method_name, args, kwargs,
                                          request.metadata)
        try:
            value = worker.get(ref)
        except _dead_replica_errors():
            raise
        except BaseException as e:  # noqa: B902 - the callee's exception, for the caller
            return _Outcome(ref, error=e), False
        return _Outcome(ref, value), isinstance(value, ReplicaRejection)

    try:
        args, kwargs = _resolve_arguments(request.args, request.kwargs)
        replica_id, router, outcome = _send_until_taken(request, send)
        router.finished(replica_id)
    except BaseException as e:  # noqa: B902 - handed to the response's reader
        _settle(request.future, error=e)
        return
    _settle(request.future, outcome)


class _StreamStart:
    """A stream a replica took: its generator of value refs, its first value's ref (None when
    the stream was empty), and whom to tell when it ends."""

    def __init__(self, replica_id: str, router: _Router, refs: Any, first: Any) -> None:
        self.replica_id = replica_id
        self.router = router
        self.refs = refs
        self.first = first


def _run_streaming(request: _Request) -> None:
    """The pool thread's part of a streaming request: the stream a replica took, into
    request.future."""
    from tessera._private import worker
    from tessera.serve.replica import ReplicaRejection

    def send(actor: Any) -> Tuple[Tuple[Any, Any], bool]:
        refs = actor.handle_request_streaming.options(num_returns="streaming").remote(
            request.options.method_name, args, kwargs, request.metadata)
        first = next(refs, None)
        if first is None:
            return (refs, None), False
        try:
            value = worker.get(first)
        except _dead_replica_errors():
            raise
        except BaseException:  # noqa: B902 - the stream's own failure: its reader raises it
            return (refs, first), False
        return (refs, first), isinstance(value, ReplicaRejection)

    try:
        args, kwargs = _resolve_arguments(request.args, request.kwargs)
        replica_id, router, (refs, first) = _send_until_taken(request, send)
    except BaseException as e:  # noqa: B902 - handed to the generator's reader
        _settle(request.future, error=e)
        return
    _settle(request.future, _StreamStart(replica_id, router, refs, first))


# ---------------------------------------------------------------------------------------------
# The public classes.


class DeploymentResponse:
    """The future result of a handle call: `result()`, `await`, `cancel()`."""

    def __init__(self, request: _Request) -> None:
        self._request = request

    @property
    def request_id(self) -> str:
        return self._request.request_id

    def _outcome(self, timeout_s: Optional[float] = None) -> _Outcome:
        try:
            outcome = self._request.future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"Timed out waiting for the result of request "
                               f"{self.request_id} after {timeout_s}s.") from None
        except concurrent.futures.CancelledError:
            raise RequestCancelledError(self.request_id) from None
        if outcome.error is not None:
            raise outcome.error
        return outcome

    def result(self, timeout_s: Optional[float] = None, *,
               _skip_asyncio_check: bool = False) -> Any:
        """The call's value, waiting up to `timeout_s` (None: as long as it takes); the
        callee's exception re-raised. RuntimeError inside a running asyncio loop (use
        `await response` there)."""
        if not _skip_asyncio_check and _in_running_loop():
            raise RuntimeError(_IN_LOOP_ERROR)
        return self._outcome(timeout_s).value

    def __await__(self):
        return self._await_outcome().__await__()

    async def _await_outcome(self) -> Any:
        future = self._request.future
        try:
            await asyncio.shield(asyncio.wrap_future(future))
        except asyncio.CancelledError:
            self.cancel()  # the awaiting task was cancelled: so is the request
            raise
        except BaseException:  # noqa: B902 - read again below, as result() raises it
            pass
        return self._outcome(0).value

    def cancel(self) -> None:
        """Cancels the request: the replica's coroutine gets CancelledError at its next await;
        the response raises RequestCancelledError. Nothing happens once it is done."""
        if not self._request.future.done():
            self._request.cancel()

    def cancelled(self) -> bool:
        return self._request.cancelled()

    async def _to_object_ref(self) -> Any:
        """The ObjectRef of the call's result (developer API), once a replica answered."""
        future = self._request.future
        await asyncio.shield(asyncio.wrap_future(future))
        return self._ref()

    def _to_object_ref_sync(self, _skip_asyncio_check: bool = False) -> Any:
        """_to_object_ref, blocking (a RuntimeError inside a running asyncio loop)."""
        if not _skip_asyncio_check and _in_running_loop():
            raise RuntimeError(_IN_LOOP_ERROR)
        self._request.future.exception()  # waits; its error is the ref's to raise at get
        return self._ref()

    def _ref(self) -> Any:
        try:
            outcome = self._request.future.result(0)
        except concurrent.futures.CancelledError:
            raise RequestCancelledError(self.request_id) from None
        if outcome.ref is None:
            raise outcome.error
        return outcome.ref

    def __reduce__(self):
        # Nested inside another call's arguments: the ObjectRef of the result, as Ray passes it.
        return (_identity, (self._to_object_ref_sync(_skip_asyncio_check=True),))

    def __repr__(self) -> str:
        return (f"DeploymentResponse(deployment={self._request.deployment_name!r}, "
                f"app={self._request.app_name!r}, request_id={self.request_id!r})")


def _identity(value: Any) -> Any:
    return value


class DeploymentResponseGenerator:
    """The values of a `stream=True` handle call, as the replica yields them: iterate it
    (`for`, or `async for` in a deployment). It cannot be passed to another handle call."""

    def __init__(self, request: _Request) -> None:
        self._request = request
        self._lock = threading.Lock()
        self._first_taken = False
        self._done = False

    @property
    def request_id(self) -> str:
        return self._request.request_id

    def _start(self, timeout_s: Optional[float] = None) -> _StreamStart:
        try:
            return self._request.future.result(timeout_s)
        except concurrent.futures.CancelledError:
            raise RequestCancelledError(self.request_id) from None

    def _next_value(self) -> Any:
        """The next value; StopIteration at the end. The router is told once, at the end or the
        first failure. One reader at a time."""
        from tessera._private import worker

        start = self._start()
        with self._lock:
            if self._done:
                raise StopIteration
            first = not self._first_taken
            self._first_taken = True
        try:
            ref = start.first if first else next(start.refs, None)
            if ref is None:
                raise StopIteration
            return worker.get(ref)
        except BaseException:
            self._end(start)
            raise

    def _end(self, start: _StreamStart) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        start.router.finished(start.replica_id)

    def __iter__(self) -> "DeploymentResponseGenerator":
        return self

    def __next__(self) -> Any:
        if _in_running_loop():
            raise RuntimeError(_IN_LOOP_ERROR)
        return self._next_value()

    def __aiter__(self) -> "DeploymentResponseGenerator":
        return self

    async def __anext__(self) -> Any:
        future = _POOL.submit(self._next_or_end)
        try:
            value = await asyncio.shield(asyncio.wrap_future(future))
        except asyncio.CancelledError:
            self.cancel()
            raise
        if value is _END:
            raise StopAsyncIteration
        return value

    def _next_or_end(self) -> Any:
        try:
            return self._next_value()
        except StopIteration:
            return _END

    def cancel(self) -> None:
        """Cancels the stream at the replica; iterating raises RequestCancelledError."""
        self._request.cancel()

    def __del__(self) -> None:
        request = getattr(self, "_request", None)
        if request is None or not request.future.done() or request.future.cancelled():
            return
        try:
            start = request.future.result(0)
        except BaseException:  # noqa: B902 - it never reached a replica: nothing to release
            return
        try:
            self._end(start)
        except Exception:  # noqa: BLE001 - at exit the router may be gone already
            pass

    def __reduce__(self):
        raise RayServeException("Passing a `DeploymentResponseGenerator` to another "
                                "`DeploymentHandle` call or task is not supported.")

    def __repr__(self) -> str:
        return (f"DeploymentResponseGenerator(deployment={self._request.deployment_name!r}, "
                f"app={self._request.app_name!r}, request_id={self.request_id!r})")


class _End:
    def __repr__(self) -> str:
        return "_END"


_END: Any = _End()

_OPTION_NAMES = ("method_name", "multiplexed_model_id", "stream")
# Ray's options that change nothing here.
_ACCEPTED_OPTIONS = ("use_new_handle_api",)


class DeploymentHandle:
    """A handle to a deployment of an application: `.remote(...)` calls it (its `__call__`, or
    `handle.method.remote(...)`). Made by serve.run, serve.get_app_handle,
    serve.get_deployment_handle, or given to a deployment for one it was bound with."""

    def __init__(self, deployment_name: str, app_name: str, *,
                 _options: Optional[_HandleOptions] = None) -> None:
        if not isinstance(deployment_name, str) or not deployment_name:
            raise TypeError("A DeploymentHandle needs a deployment name (a non-empty str).")
        if not isinstance(app_name, str) or not app_name:
            raise TypeError("A DeploymentHandle needs an application name (a non-empty str).")
        self._deployment_name = deployment_name
        self._app_name = app_name
        self._options = _options or _HandleOptions()

    @property
    def deployment_name(self) -> str:
        return self._deployment_name

    @property
    def app_name(self) -> str:
        return self._app_name

    def options(self, *, method_name: Any = None, multiplexed_model_id: Any = None,
                stream: Any = None, _prefer_local_routing: Any = None,
                **others: Any) -> "DeploymentHandle":
        """A handle with these options over this one's: method_name (the method `.remote()`
        calls), multiplexed_model_id (routes to replicas holding that model), stream (the call
        returns a DeploymentResponseGenerator), _prefer_local_routing (Ray's private option:
        replicas on this process's node first). Make it once, not per request."""
        for name in others:
            if name not in _ACCEPTED_OPTIONS:
                raise TypeError(f"options() got an unexpected keyword argument '{name}'")
        changes = {}
        if _prefer_local_routing is not None:
            if not isinstance(_prefer_local_routing, bool):
                raise TypeError("_prefer_local_routing must be a bool.")
            changes["prefer_local_routing"] = _prefer_local_routing
        if method_name is not None:
            if not isinstance(method_name, str) or not method_name:
                raise TypeError("method_name must be a non-empty str.")
            changes["method_name"] = method_name
        if multiplexed_model_id is not None:
            if not isinstance(multiplexed_model_id, str):
                raise TypeError("multiplexed_model_id must be a str.")
            changes["multiplexed_model_id"] = multiplexed_model_id
        if stream is not None:
            if not isinstance(stream, bool):
                raise TypeError("stream must be a bool.")
            changes["stream"] = stream
        return DeploymentHandle(self._deployment_name, self._app_name,
                                _options=replace(self._options, **changes))

    def __getattr__(self, name: str) -> "DeploymentHandle":
        if name.startswith("__") or name.startswith("_"):
            raise AttributeError(name)
        return self.options(method_name=name)

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        """Sends the request: a DeploymentResponse (with stream=True a
        DeploymentResponseGenerator), returned at once."""
        request = _Request(self, args, kwargs)
        if self._options.stream:
            _POOL.run(_run_streaming, request)
            return DeploymentResponseGenerator(request)
        _POOL.run(_run_unary, request)
        return DeploymentResponse(request)

    def __reduce__(self):
        return (_rebuild_handle, (self._deployment_name, self._app_name, self._options))

    def __repr__(self) -> str:
        return (f"DeploymentHandle(deployment='{self._deployment_name}', "
                f"app='{self._app_name}')")


def _rebuild_handle(deployment_name: str, app_name: str,
                    options: _HandleOptions) -> DeploymentHandle:
    return DeploymentHandle(deployment_name, app_name, _options=options)


__all__ = ["DeploymentHandle", "DeploymentResponse", "DeploymentResponseGenerator"]

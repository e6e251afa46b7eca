"""ReplicaActor: the actor that runs one replica of a deployment (an async actor: every call runs
on its event loop).

The controller creates it as `ReplicaActor(spec_bytes)`, spec_bytes a cloudpickled dict
(build.replica_spec makes one): app_name, deployment_name, replica_id, callable (the class or
function), init_args, init_kwargs, user_config, max_ongoing_requests,
graceful_shutdown_wait_loop_s (optional, 2 s), ingress (whether it takes HTTP) and
make_handle(app_name, deployment_name) -> DeploymentHandle (None when nothing is bound: each
HandlePlaceholder in the init args' lists, tuples, dicts and sets becomes its result). The code
and args may come still serialized instead, as build's BuiltDeployment holds them
(serialized_callable; serialized_init_args, the pickled (args, kwargs)): the replica loads them.

  initialize()             constructs the user's object (on the loop: its __init__ may use
                           asyncio), starts an @serve.ingress app's lifespan, then runs
                           reconfigure(user_config) when user_config is set; answers the
                           process id (the controller shows it). Idempotent; every other call
                           awaits it first, and a failed start fails them all. The replica is
                           ready once this and a first check_health() succeed.
  reconfigure(user_config, max_ongoing_requests=, graceful_shutdown_wait_loop_s=)
                           applies new options without a restart; the user's reconfigure runs
                           when user_config changed (reconfigure_json: the same as the JSON
                           text {"user_config": ..., option: value}, from the controller)
  check_health()           the user's check_health (raises: unhealthy); else nothing
  get_num_ongoing_requests()  the router's probe: requests being handled now
  handle_request(method_name, args, kwargs, metadata)  a handle call; metadata: request_id,
                           multiplexed_model_id, route. At max_ongoing_requests it returns a
                           ReplicaRejection (the router retries elsewhere), else the result
  handle_request_streaming(...)  the same for stream=True: an async generator of the method's
                           values (first item a ReplicaRejection when rejected)
  handle_http_first(frame)  one HTTP request of the proxy's frame protocol (_http.py): the
                           first item of its response (the whole of a plain one) as the call's
                           result; at max_ongoing_requests a 503 with
                           x-tessera-serve-rejected: 1. A response that streams ("more" in its
                           head) keeps the rest under the key its head names ("rest") for
                           handle_http_rest(rest), an async generator of the items after the
                           first (dropped, and the request cancelled, when nobody asks within
                           HTTP_REST_WAIT_S). Most responses are one item: one plain call, no
                           stream, carries them.
  handle_http(frame)       both as one async generator (in-process callers)
  cancel_request(request_id)  cancels a running request: its user coroutine gets CancelledError
                           at its next await (tessera cannot cancel a running actor call, so
                           the proxy or handle asks for it by id); the call raises
                           RequestCancelledError
  get_multiplexed_model_ids()  the model ids its @serve.multiplexed caches hold
  get_metrics_text()       the metrics the code it runs renders (_replica_metrics: Serve LLM's
                           engine metrics), Prometheus text, "" for none; the controller asks
                           every 10 s and relays them on the head's /metrics
  prepare_for_shutdown()   graceful: sleeps graceful_shutdown_wait_loop_s, then again until no
                           request is ongoing (skipped if it never started), ends the ASGI
                           lifespan, unloads multiplexed models, calls the user's __del__

Sync user methods (def, not async def) run in a thread pool, so the loop stays free for other
requests and for the probes: Ray's RAY_SERVE_RUN_SYNC_IN_THREADPOOL=1 behaviour, the default
here (Ray defaults to 0 but runs all user code on a separate thread and loop, which Tessera's
one-loop actor does not have); RAY_SERVE_RUN_SYNC_IN_THREADPOOL=0 runs them on the loop.
Cancelling a request cannot stop sync code: it runs to completion and its result is dropped.
Create the actor with max_concurrency above max_ongoing_requests, so probes and health checks
are never queued behind requests.

HTTP: a deployment with an @serve.ingress app serves it; a plain one gets
`__call__(starlette.requests.Request)` (or the function is called with it), and a Starlette
Response it returns is run as an ASGI app, anything else becomes JSON/text (_http.py). A user
exception before the response started is a 500 ("Internal Server Error"), its traceback
logged. The response carries X-Request-ID (the frame's request id, else the x-request-id
header, else a new one). Once the response is complete the stream ends, while the app may go
on (background tasks); the request counts as ongoing until the app returns.

Threading: every method runs on the actor's event loop; sync user code on the pool's threads.
Cost per request: a context copy and a task (streams: a task per value).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import itertools
import json
import logging
import os
import uuid
from typing import Any, AsyncGenerator, Callable, Dict, NamedTuple, Optional, Tuple

from tessera.serve import _http, _pickle, _replica_metrics
from tessera.serve import context as serve_context
from tessera.serve._constants import (DEFAULT_GRACEFUL_SHUTDOWN_WAIT_LOOP_S,
                                      DEFAULT_MAX_ONGOING_REQUESTS, SERVE_LOGGER_NAME,
                                      SERVE_MULTIPLEXED_MODEL_ID, env_bool)
from tessera.serve.build import HandlePlaceholder
from tessera.serve.exceptions import RayServeException, RequestCancelledError
from tessera.serve.ingress import ASGIAppReplicaWrapper

logger = logging.getLogger(SERVE_LOGGER_NAME)

_REQUIRED_SPEC_KEYS = ("app_name", "deployment_name", "replica_id")
_RECONFIGURABLE = ("max_ongoing_requests", "graceful_shutdown_wait_loop_s")


class ReplicaRejection:
    """What a replica answers a handle call it has no room for (at max_ongoing_requests): the
    router tries another replica."""

    def __init__(self, num_ongoing_requests: int) -> None:
        self.num_ongoing_requests = num_ongoing_requests

    def __reduce__(self) -> tuple:
        return (ReplicaRejection, (self.num_ongoing_requests,))

    def __repr__(self) -> str:
        return f"ReplicaRejection(num_ongoing_requests={self.num_ongoing_requests})"


def _load_spec(spec_bytes: Any) -> Dict[str, Any]:
    spec = dict(spec_bytes) if isinstance(spec_bytes, dict) else _pickle.loads(bytes(spec_bytes))
    missing = [key for key in _REQUIRED_SPEC_KEYS if key not in spec]
    if "callable" not in spec and "serialized_callable" not in spec:
        missing.append("callable")
    if missing:
        raise ValueError(f"A replica spec needs {[*_REQUIRED_SPEC_KEYS, 'callable']}; missing "
                         f"{missing}")
    if "callable" not in spec:
        spec["callable"] = _pickle.loads(spec["serialized_callable"])
    if "serialized_init_args" in spec:
        spec["init_args"], spec["init_kwargs"] = _pickle.loads(spec["serialized_init_args"])
    return spec


class ReplicaActor:
    """One replica of a deployment (see the module doc)."""

    def __init__(self, spec_bytes: bytes) -> None:
        spec = _load_spec(spec_bytes)
        self._app_name: str = spec["app_name"]
        self._deployment_name: str = spec["deployment_name"]
        self._definition: Callable = spec["callable"]
        self._init_args = tuple(spec.get("init_args") or ())
        self._init_kwargs = dict(spec.get("init_kwargs") or {})
        self._user_config = spec.get("user_config")
        self._max_ongoing = int(spec.get("max_ongoing_requests") or DEFAULT_MAX_ONGOING_REQUESTS)
        self._wait_loop_s = float(spec.get("graceful_shutdown_wait_loop_s",
                                           DEFAULT_GRACEFUL_SHUTDOWN_WAIT_LOOP_S))
        self._ingress = bool(spec.get("ingress", False))
        self._make_handle = spec.get("make_handle")
        replica_id = serve_context.ReplicaID(
            spec["replica_id"], serve_context.DeploymentID(self._deployment_name, self._app_name))
        self._context = serve_context.ReplicaContext(replica_id, servable_object=None)
        self._sync_in_threadpool = env_bool("RAY_SERVE_RUN_SYNC_IN_THREADPOOL", True)
        self._executor: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self._init_future: Optional[asyncio.Future] = None
        self._shutdown_future: Optional[asyncio.Future] = None
        self._initialized = False
        self._ongoing = 0
        self._running: Dict[str, asyncio.Task] = {}  # request id -> the task to cancel
        self._cancelled: set = set()
        # request id -> a streamed HTTP response whose first item went out (handle_http_first)
        self._parked_http: Dict[str, _ParkedResponse] = {}

    # --- start and configuration -----------------------------------------------------------
    async def initialize(self, replica_id: Optional[str] = None) -> int:
        """Constructs the user's object and runs its first reconfigure (once; see the module
        doc). `replica_id` is the id the controller named the replica's actor with (the spec,
        shared by every replica of the deployment, carries none)."""
        if replica_id and not self._context.replica_id.unique_id:
            self._context = serve_context.ReplicaContext(
                # "<app>#<deployment>#<unique>": Ray's ReplicaID keeps the unique part.
                serve_context.ReplicaID(replica_id.rsplit("#", 1)[-1],
                                        self._context.replica_id.deployment_id),
                servable_object=None)
        if self._init_future is None:
            self._init_future = asyncio.ensure_future(self._initialize())
        await asyncio.shield(self._init_future)
        return os.getpid()

    async def _initialize(self) -> None:
        serve_context._set_internal_replica_context(self._context, process_wide=True)
        args = self._with_handles(self._init_args)
        kwargs = self._with_handles(self._init_kwargs)
        if inspect.isclass(self._definition):
            servable = self._definition(*args, **kwargs)
        else:
            servable = self._definition
        self._context.servable_object = servable
        if isinstance(servable, ASGIAppReplicaWrapper):
            await servable._serve_asgi_startup()
        await self._call_user_reconfigure(self._user_config)
        self._initialized = True

    async def _ready(self) -> None:
        if not self._initialized:
            await self.initialize()
        serve_context._set_internal_replica_context(self._context)

    def _with_handles(self, value: Any) -> Any:
        """`value` with each HandlePlaceholder in its lists, tuples, dicts and sets replaced by
        make_handle's DeploymentHandle."""
        if isinstance(value, HandlePlaceholder):
            if self._make_handle is None:
                raise ValueError(f"Deployment '{self._deployment_name}' binds deployment "
                                 f"'{value.deployment_name}', but its replica spec has no "
                                 "make_handle to make that DeploymentHandle")
            return self._make_handle(value.app_name, value.deployment_name)
        if isinstance(value, dict):
            return {key: self._with_handles(item) for key, item in value.items()}
        if isinstance(value, tuple):
            items = [self._with_handles(item) for item in value]
            return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
        if isinstance(value, (list, set, frozenset)):
            return type(value)(self._with_handles(item) for item in value)
        return value

    async def _call_user_reconfigure(self, user_config: Any) -> None:
        if user_config is None:
            return
        servable = self._context.servable_object
        if inspect.isfunction(servable):
            raise ValueError("deployment_def must be a class to use user_config")
        method = getattr(servable, "reconfigure", None)
        if method is None:
            raise RayServeException(
                f"user_config specified but deployment {self._deployment_name} missing "
                "reconfigure method")
        await self._call_user(method, (user_config,), {})

    async def reconfigure(self, user_config: Any, **options: Any) -> None:
        """New options for the running replica (no restart). The user's reconfigure runs when
        user_config changed; max_ongoing_requests and graceful_shutdown_wait_loop_s apply to
        the next requests and the next shutdown."""
        await self._ready()
        for key in options:
            if key not in _RECONFIGURABLE:
                raise ValueError(f"A replica reconfigures {list(_RECONFIGURABLE)} and "
                                 f"user_config; got '{key}'")
        if "max_ongoing_requests" in options:
            self._max_ongoing = int(options["max_ongoing_requests"])
        if "graceful_shutdown_wait_loop_s" in options:
            self._wait_loop_s = float(options["graceful_shutdown_wait_loop_s"])
        if user_config != self._user_config:
            await self._call_user_reconfigure(user_config)
            self._user_config = user_config

    async def reconfigure_json(self, config_json: str) -> None:
        """reconfigure with the replica config as JSON text: how the controller (C++, which
        never unpickles user values) passes a change: {"user_config": ..., and the options of
        _RECONFIGURABLE}."""
        config = json.loads(config_json)
        if not isinstance(config, dict) or "user_config" not in config:
            raise ValueError(f"reconfigure_json takes {{'user_config': ..., option: value}}, "
                             f"got {config_json[:200]!r}")
        user_config = config.pop("user_config")
        await self.reconfigure(user_config, **config)

    async def check_health(self) -> None:
        """The user's check_health, if it has one; its exception means unhealthy."""
        await self._ready()
        method = getattr(self._context.servable_object, "check_health", None)
        if method is not None:
            await self._call_user(method, (), {})

    async def get_num_ongoing_requests(self) -> int:
        return self._ongoing

    async def get_multiplexed_model_ids(self) -> list:
        ids = set()
        for cache in self._context._multiplexers:
            ids.update(cache.model_ids())
        return sorted(ids)

    async def get_metrics_text(self) -> str:
        if not self._initialized:
            return ""
        return _replica_metrics.render()

    # --- calling user code -----------------------------------------------------------------
    def _pool(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max(8, min(self._max_ongoing + 2, 256)),
                thread_name_prefix=f"serve-{self._deployment_name}")
        return self._executor

    async def _call_user(self, method: Callable, args: tuple, kwargs: dict) -> Any:
        """Calls a user method: a coroutine function awaited on the loop; a sync one in the pool
        (with the caller's contextvars), unless RAY_SERVE_RUN_SYNC_IN_THREADPOOL=0."""
        if (inspect.iscoroutinefunction(method) or inspect.isasyncgenfunction(method)
                or not self._sync_in_threadpool):
            result = method(*args, **kwargs)
        else:
            call = functools.partial(contextvars.copy_context().run, method, *args, **kwargs)
            result = await asyncio.get_running_loop().run_in_executor(self._pool(), call)
        if inspect.isawaitable(result):
            result = await result
        return result

    def _user_method(self, method_name: str) -> Callable:
        servable = self._context.servable_object
        if inspect.isfunction(servable):
            if method_name == "__call__":
                return servable
            methods: list = []
        else:
            method = getattr(servable, method_name, None)
            if method is not None and callable(method):
                return method
            methods = [name for name in dir(servable) if not name.startswith("__")
                       and callable(getattr(servable, name, None))]
        raise RayServeException(f"Tried to call a method '{method_name}' that does not exist. "
                                f"Available methods: {methods}.")

    def _request_context(self, metadata: Dict[str, Any], http: bool = False
                         ) -> serve_context.RequestContext:
        return serve_context.RequestContext(
            route=metadata.get("route") or "",
            request_id=metadata.get("request_id") or uuid.uuid4().hex,
            app_name=self._app_name,
            multiplexed_model_id=metadata.get("multiplexed_model_id") or "",
            is_http_request=http)

    def _task_context(self, request: serve_context.RequestContext) -> contextvars.Context:
        """A context for a request's tasks: this replica's and the request's contexts set."""
        context = contextvars.copy_context()
        context.run(serve_context._set_internal_replica_context, self._context)
        context.run(serve_context._set_request_context, request)
        return context

    def _start_request(self, request_id: str, task: asyncio.Task) -> None:
        self._ongoing += 1
        self._running[request_id] = task

    def _end_request(self, request_id: str) -> None:
        self._ongoing -= 1
        self._running.pop(request_id, None)
        self._cancelled.discard(request_id)

    def _cancel_error(self, request_id: str) -> Optional[RequestCancelledError]:
        return RequestCancelledError(request_id) if request_id in self._cancelled else None

    async def cancel_request(self, request_id: str) -> bool:
        """Cancels the running request `request_id`; False when none runs here."""
        task = self._running.get(request_id)
        if task is None or task.done():
            return False
        self._cancelled.add(request_id)
        task.cancel()
        return True

    # --- handle calls ----------------------------------------------------------------------
    async def handle_request(self, method_name: str, args: tuple, kwargs: dict,
                             metadata: Optional[Dict[str, Any]] = None) -> Any:
        """A handle call of `method_name` (see the module doc)."""
        await self._ready()
        if self._ongoing >= self._max_ongoing:
            return ReplicaRejection(self._ongoing)
        request = self._request_context(metadata or {})
        method_name = method_name or "__call__"
        task = asyncio.get_running_loop().create_task(
            self._call_unary(method_name, tuple(args or ()), dict(kwargs or {})),
            context=self._task_context(request))
        self._start_request(request.request_id, task)
        try:
            return await task
        except asyncio.CancelledError:
            error = self._cancel_error(request.request_id)
            if error is None:
                raise
            raise error from None
        finally:
            self._end_request(request.request_id)

    async def _call_unary(self, method_name: str, args: tuple, kwargs: dict) -> Any:
        result = await self._call_user(self._user_method(method_name), args, kwargs)
        if inspect.isgenerator(result) or inspect.isasyncgen(result):
            _close_quietly(result)
            raise TypeError(f"Method '{method_name}' returned a generator. You must use "
                            "`handle.options(stream=True)` to call generators on a deployment.")
        return result

    async def handle_request_streaming(self, method_name: str, args: tuple, kwargs: dict,
                                       metadata: Optional[Dict[str, Any]] = None
                                       ) -> AsyncGenerator[Any, None]:
        """A stream=True handle call: the method's values as they come."""
        await self._ready()
        if self._ongoing >= self._max_ongoing:
            yield ReplicaRejection(self._ongoing)
            return
        request = self._request_context(metadata or {})
        context = self._task_context(request)
        loop = asyncio.get_running_loop()
        method_name = method_name or "__call__"
        call = loop.create_task(self._call_user(self._user_method(method_name), tuple(args or ()),
                                                dict(kwargs or {})), context=context)
        self._start_request(request.request_id, call)
        generator: Any = None
        try:
            result = await call
            if not (inspect.isasyncgen(result) or inspect.isgenerator(result)):
                raise TypeError(f"Called a deployment with `stream=True` but method "
                                f"'{method_name}' did not return a generator.")
            generator = result
            while True:
                step = loop.create_task(_next_of(generator, self._pool()), context=context)
                self._running[request.request_id] = step
                item = await step
                if item is _END:
                    return
                yield item
        except asyncio.CancelledError:
            error = self._cancel_error(request.request_id)
            if error is None:
                raise
            raise error from None
        finally:
            if generator is not None:
                await _close_generator(generator, context)
            self._end_request(request.request_id)

    # --- HTTP ------------------------------------------------------------------------------
    async def handle_http_first(self, frame: bytes) -> bytes:
        """One HTTP request of the proxy's frame protocol (see the module doc): its first item,
        as this call's result; the rest of a streamed response waits for handle_http_rest."""
        item, _ = await self._http_first(frame)
        return item

    async def handle_http_rest(self, rest: str) -> AsyncGenerator[bytes, None]:
        """The items after the first of the streamed response whose first item's head named
        `rest`."""
        parked = self._parked_http.pop(rest, None)
        if parked is None:
            raise RayServeException(f"No streamed response {rest!r} is waiting on replica "
                                    f"{self._context.replica_id}.")
        parked.timer.cancel()
        try:
            while not parked.reader.complete:
                item = await parked.reader.next_item()
                if item is None:
                    return
                yield item
        finally:
            if not parked.reader.complete:  # the reader is gone (or the app failed mid-stream)
                await _abandon_http(parked.exchange, parked.app)

    async def handle_http(self, frame: bytes) -> AsyncGenerator[bytes, None]:
        """handle_http_first's item, then handle_http_rest's: the whole response as one stream."""
        item, parked = await self._http_first(frame)
        if parked is None:
            yield item
            return
        rest = self.handle_http_rest(parked)
        try:
            yield item
            async for more in rest:
                yield more
        finally:
            await rest.aclose()
            # Closed after the first item: the rest was never asked for.
            leftover = self._parked_http.pop(parked, None)
            if leftover is not None:
                leftover.timer.cancel()
                await _abandon_http(leftover.exchange, leftover.app)

    async def _http_first(self, frame: bytes) -> Tuple[bytes, Optional[str]]:
        """The first item of the request's response, and the key its other items wait under
        when there are more (parked for handle_http_rest, dropped after HTTP_REST_WAIT_S
        without it; the key is new for each response, as the request id may be the client's)."""
        head, body = _http.decode_frame(frame)
        if not self._ingress:
            raise RayServeException(f"Deployment '{self._deployment_name}' is not the ingress of "
                                    f"application '{self._app_name}': it takes no HTTP requests.")
        await self._ready()
        if self._ongoing >= self._max_ongoing:
            return _http.rejection(), None
        request_id = (head.get("request_id") or _http.header(head, "x-request-id")
                      or uuid.uuid4().hex)
        request = self._request_context({
            "route": head.get("route_prefix") or "/", "request_id": request_id,
            "multiplexed_model_id": (head.get("multiplexed_model_id")
                                     or _http.header(head, SERVE_MULTIPLEXED_MODEL_ID))},
            http=True)
        exchange = _http.Exchange(body)
        scope = _http.build_scope(head, self._asgi_state())
        loop = asyncio.get_running_loop()
        app = loop.create_task(self._run_http(scope, exchange),
                               context=self._task_context(request))
        self._start_request(request_id, app)
        app.add_done_callback(lambda _: self._end_request(request_id))
        reader = _ResponseReader(exchange, request_id)
        try:
            item = await reader.next_item()
        except BaseException:
            await _abandon_http(exchange, app)
            raise
        if item is None:  # cancelled before its response started
            await _abandon_http(exchange, app)
            raise RequestCancelledError(request_id)
        if reader.complete:
            return item, None
        timer = loop.call_later(HTTP_REST_WAIT_S, self._drop_parked_http, reader.rest_key)
        self._parked_http[reader.rest_key] = _ParkedResponse(exchange, app, reader, timer)
        return item, reader.rest_key

    def _drop_parked_http(self, rest: str) -> None:
        """Nobody came for the rest of a streamed response (its proxy is gone): it ends."""
        parked = self._parked_http.pop(rest, None)
        if parked is not None:
            parked.exchange.disconnect()
            parked.app.cancel()

    def _asgi_state(self) -> dict:
        servable = self._context.servable_object
        if isinstance(servable, ASGIAppReplicaWrapper):
            return servable._serve_asgi_lifespan.state
        return {}

    async def _run_http(self, scope: Dict[str, Any], exchange: _http.Exchange) -> None:
        """Runs the request through the ASGI app, or the plain deployment's __call__."""
        try:
            servable = self._context.servable_object
            if isinstance(servable, ASGIAppReplicaWrapper):
                await servable._serve_asgi_app(scope, exchange.receive, exchange.send)
            else:
                await self._run_plain_http(scope, exchange)
        except asyncio.CancelledError:
            exchange.cancelled = True
            raise
        except Exception:
            exchange.failed = True
            logger.exception("Request %s to deployment %s failed.",
                             serve_context._get_serve_request_context().request_id,
                             self._deployment_name)
        finally:
            exchange.end()

    async def _run_plain_http(self, scope: Dict[str, Any], exchange: _http.Exchange) -> None:
        from starlette.requests import Request
        from starlette.responses import Response

        request = Request(scope, exchange.receive)
        result = await self._call_user(self._user_method("__call__"), (request,), {})
        if inspect.isgenerator(result) or inspect.isasyncgen(result):
            _close_quietly(result)
            raise TypeError("Method '__call__' returned a generator; to stream over HTTP "
                            "return a starlette StreamingResponse over it.")
        if isinstance(result, Response):
            await result(scope, exchange.receive, exchange.send)
            return
        for message in _http.to_asgi_messages(result):
            await exchange.send(message)

    # --- shutdown --------------------------------------------------------------------------
    async def prepare_for_shutdown(self) -> None:
        """Graceful shutdown (see the module doc); once, whoever asks again waits for it."""
        if self._shutdown_future is None:
            self._shutdown_future = asyncio.ensure_future(self._shutdown())
        await asyncio.shield(self._shutdown_future)

    async def _shutdown(self) -> None:
        serve_context._set_internal_replica_context(self._context)
        if self._initialized:
            while True:
                await asyncio.sleep(self._wait_loop_s)
                if self._ongoing == 0:
                    break
                logger.info("Waiting for an additional %ss to shut down because there are %d "
                            "ongoing requests.", self._wait_loop_s, self._ongoing)
            await self._release_user_object()
        serve_context._clear_process_replica(self._context)
        if self._executor is not None:
            self._executor.shutdown(wait=False)

    async def _release_user_object(self) -> None:
        servable = self._context.servable_object
        steps = []
        if isinstance(servable, ASGIAppReplicaWrapper):
            steps.append((servable._serve_asgi_shutdown, "the ASGI lifespan shutdown"))
        steps += [(cache.shutdown, "unloading multiplexed models")
                  for cache in self._context._multiplexers]
        destructor = getattr(servable, "__del__", None)
        if destructor is not None and not inspect.isfunction(servable):
            steps.append((functools.partial(self._call_user, destructor, (), {}), "__del__"))
        for step, what in steps:
            try:
                await step()
            except Exception:
                logger.exception("Exception during graceful shutdown of replica (%s).", what)


class _End:
    def __repr__(self) -> str:
        return "_END"


_END: Any = _End()


def _next_sync(generator: Any) -> Any:
    try:
        return next(generator)
    except StopIteration:
        return _END


async def _next_of(generator: Any, pool: concurrent.futures.Executor) -> Any:
    """The generator's next value, or _END: an async generator's on the loop, a sync one's in
    the pool (with the caller's contextvars)."""
    if inspect.isasyncgen(generator):
        try:
            return await generator.__anext__()
        except StopAsyncIteration:
            return _END
    call = functools.partial(contextvars.copy_context().run, _next_sync, generator)
    return await asyncio.get_running_loop().run_in_executor(pool, call)


async def _close_generator(generator: Any, context: contextvars.Context) -> None:
    """Closes a user generator the stream no longer reads (GeneratorExit at its yield)."""
    try:
        if inspect.isasyncgen(generator):
            await asyncio.get_running_loop().create_task(_aclose(generator), context=context)
        else:
            context.run(generator.close)
    except (RuntimeError, ValueError):
        pass  # still running in a cancelled step (a sync one in the pool): it ends on its own


async def _aclose(generator: Any) -> None:
    await generator.aclose()


def _close_quietly(generator: Any) -> None:
    if inspect.isasyncgen(generator):
        asyncio.ensure_future(_aclose(generator))
    else:
        generator.close()


# How long the rest of a streamed response waits for its handle_http_rest call: the proxy asks
# at once, so it only never comes when the proxy died.
HTTP_REST_WAIT_S = 60.0
_REST_KEYS = itertools.count(1)


class _ParkedResponse(NamedTuple):
    exchange: _http.Exchange
    app: asyncio.Task
    reader: "_ResponseReader"
    timer: asyncio.TimerHandle


async def _abandon_http(exchange: _http.Exchange, app: asyncio.Task) -> None:
    """The response's reader is gone: the app is told (disconnect) and cancelled."""
    exchange.disconnect()
    app.cancel()
    await asyncio.gather(app, return_exceptions=True)


class _ResponseReader:
    """Turns what the app sends into the frame protocol's items: the first with the response
    head, then raw body chunks. `complete` once the response's last body part is out."""

    def __init__(self, exchange: _http.Exchange, request_id: str) -> None:
        self._exchange = exchange
        self._request_id = request_id
        self._start: Optional[Dict[str, Any]] = None
        self._sent_head = False
        self.complete = False
        # What a streamed response's first item names as where the rest waits: unique in this
        # process (a counter: uuid4 costs more than the rest of a small request's path here).
        self.rest_key = ""

    async def next_item(self) -> Optional[bytes]:
        """The next item to send; None when there is nothing more (the response is complete,
        the app was cancelled, or it failed after its response started)."""
        while True:
            message = await self._exchange.next_message()
            if message is None:
                return self._after_end()
            if message["type"] == "http.response.start" and self._start is None:
                self._start = message
            elif message["type"] == "http.response.body" and self._start is not None:
                item = self._body_item(message)
                if item is not None or self.complete:
                    return item

    def _body_item(self, message: Dict[str, Any]) -> Optional[bytes]:
        body = bytes(message.get("body") or b"")
        more = bool(message.get("more_body", False))
        self.complete = not more
        if not self._sent_head:
            self._sent_head = True
            if more:
                self.rest_key = f"rest-{next(_REST_KEYS)}"
            return _head_item(self._start, self._request_id, more, body, self.rest_key)
        return body or None

    def _after_end(self) -> Optional[bytes]:
        """The app ended: a response it started without a body ends empty; none at all (it
        failed, or returned without one) is a 500, unless it was cancelled."""
        if self._sent_head or self._exchange.cancelled:
            return None
        self.complete = True
        self._sent_head = True
        if self._start is not None and not self._exchange.failed:
            return _head_item(self._start, self._request_id, False, b"")
        start, body = _http.INTERNAL_ERROR_MESSAGES
        return _head_item(start, self._request_id, False, body["body"])


def _head_item(start: Dict[str, Any], request_id: str, more: bool, body: bytes,
               rest: str = "") -> bytes:
    return _http.response_first(int(start.get("status", 200)),
                                _http.response_headers(start, request_id), more, body, rest)


__all__ = ["ReplicaActor", "ReplicaRejection"]

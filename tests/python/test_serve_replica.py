"""The replica actor (tessera.serve.replica.ReplicaActor) driven directly, in this process: its
async methods are called on an event loop, as the actor's loop would call them. No cluster.

Covers HTTP through the proxy's frame protocol (a plain deployment and a FastAPI ingress: GET,
POST with a body, server-sent events, a 404 inside FastAPI, an exception as a 500,
X-Request-ID), handle calls (sync and async methods, streams), rejection at
max_ongoing_requests, reconfigure without a restart, health checks, graceful shutdown,
cancellation reaching the user's coroutine, and the replica and request contexts.

Nothing here needs tessera's extension; see test_serve_api.py for how to run it from a source
tree (`--noconftest`).
"""
import asyncio
import importlib
import importlib.util
import json
import pickle
import sys
import textwrap
import threading

import pytest

try:
    import tessera  # noqa: F401 - the built package (ctest puts build/python on PYTHONPATH)
except ImportError:
    _spec = importlib.util.find_spec("tessera")
    sys.modules["tessera"] = importlib.util.module_from_spec(_spec)

from tessera import serve  # noqa: E402
from tessera.serve import _http, build, context  # noqa: E402
from tessera.serve.exceptions import RayServeException, RequestCancelledError  # noqa: E402
from tessera.serve.replica import ReplicaActor, ReplicaRejection  # noqa: E402

fastapi = pytest.importorskip("fastapi")
from starlette.requests import Request  # noqa: E402
from starlette.responses import PlainTextResponse, StreamingResponse  # noqa: E402


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 60))


def make_replica(deployment, *args, make_handle=None, route_prefix="/", pickled=False,
                 **kwargs):
    """A ReplicaActor of `deployment` bound with args, from the spec build_application and
    replica_spec make. Unless `pickled`, the spec keeps this process's class and make_handle
    (a replica elsewhere gets copies), so tests can watch what the replica does to them."""
    built = build.build_application(deployment.bind(*args, **kwargs), "app", route_prefix)
    spec = build.replica_spec(built.deployment(built.ingress_deployment_name), "replica-1",
                              make_handle)
    if pickled:
        return ReplicaActor(spec)
    spec = pickle.loads(spec)
    del spec["serialized_callable"]
    spec.update(callable=deployment.func_or_class, make_handle=make_handle)
    return ReplicaActor(spec)


def frame(method="GET", path="/", body=b"", query="", headers=(), route_prefix="/",
          request_id="req-1", model_id=""):
    return _http.encode_frame({
        "method": method, "path": path, "raw_path": path, "query_string": query,
        "headers": [list(h) for h in headers], "http_version": "1.1",
        "route_prefix": route_prefix, "request_id": request_id, "client": ["127.0.0.1", 5555],
        "multiplexed_model_id": model_id}, body)


class Response:
    def __init__(self, items):
        first = items[0]
        length = int.from_bytes(first[:4], "big")
        head = json.loads(first[4:4 + length])
        self.items = items
        self.status = head["status"]
        self.headers = {name: value for name, value in head["headers"]}
        self.more = head["more"]
        self.rest = head.get("rest")
        self.body = first[4 + length:] + b"".join(items[1:])

    def json(self):
        return json.loads(self.body)


async def http(replica, *args, **kwargs):
    return Response([item async for item in replica.handle_http(frame(*args, **kwargs))])


async def settle(turns=50):
    """Lets every ready task run a few steps (no time passes)."""
    for _ in range(turns):
        await asyncio.sleep(0)


# ---------------------------------------------------------------------------------------------
# HTTP: a plain deployment.


@serve.deployment
class Plain:
    def __init__(self, greeting="hello"):
        self.greeting = greeting

    async def __call__(self, request: Request):
        if request.url.path.endswith("/text"):
            return f"{self.greeting} {request.query_params.get('name', '')}"
        if request.url.path.endswith("/custom"):
            return PlainTextResponse("teapot", status_code=418, headers={"x-kind": "custom"})
        if request.url.path.endswith("/fail"):
            raise ValueError("user code failed")
        body = await request.json() if request.method == "POST" else None
        return {"path": request.url.path, "root_path": request.scope["root_path"],
                "body": body, "request_id": context._get_serve_request_context().request_id}


@serve.deployment
def plain_function(request: Request):
    return b"raw bytes"


def test_plain_deployment_over_http():
    async def scenario():
        replica = make_replica(Plain, "hi", route_prefix="/p")
        text = await http(replica, path="/p/text", query="name=bob", route_prefix="/p")
        posted = await http(replica, "POST", "/p/post", body=b'{"a": [1, 2]}',
                            headers=[("content-type", "application/json")], route_prefix="/p")
        custom = await http(replica, path="/p/custom", route_prefix="/p")
        return text, posted, custom

    text, posted, custom = run(scenario())
    assert (text.status, text.body, text.more) == (200, b"hi bob", False)
    assert text.headers["content-type"] == "text/plain; charset=utf-8"
    assert posted.status == 200 and posted.headers["content-type"] == "application/json"
    assert posted.json()["body"] == {"a": [1, 2]}
    assert posted.json()["root_path"] == "/p"
    assert posted.json()["request_id"] == "req-1"
    assert (custom.status, custom.body, custom.headers["x-kind"]) == (418, b"teapot", "custom")


def test_function_deployment_over_http_from_a_pickled_spec():
    response = run(http(make_replica(plain_function, pickled=True)))
    assert (response.status, response.body) == (200, b"raw bytes")
    assert response.headers["content-type"] == "text/plain"


def test_a_user_exception_is_a_500_with_its_traceback_logged(caplog):
    response = run(http(make_replica(Plain), path="/fail"))
    assert (response.status, response.body) == (500, b"Internal Server Error")
    assert "ValueError: user code failed" in caplog.text


def test_x_request_id_is_echoed():
    async def scenario():
        replica = make_replica(Plain)
        given = await http(replica, path="/text", request_id="abc")
        from_header = await http(replica, path="/text", request_id="",
                                 headers=[("x-request-id", "from-header")])
        generated = await http(replica, path="/text", request_id="")
        return given, from_header, generated

    given, from_header, generated = run(scenario())
    assert given.headers["x-request-id"] == "abc"
    assert from_header.headers["x-request-id"] == "from-header"
    assert len(generated.headers["x-request-id"]) == 32


# ---------------------------------------------------------------------------------------------
# HTTP: a FastAPI ingress.


def make_api_deployment():
    api = fastapi.FastAPI()  # the deployment serves a copy: its events go to the copy's state

    @api.on_event("startup")
    async def started():
        api.state.events = ["startup"]

    @api.on_event("shutdown")
    async def stopped():
        api.state.events.append("shutdown")

    @api.get("/events-seen")
    def events_seen():
        return api.state.events

    @serve.deployment
    @serve.ingress(api)
    class Api:
        def __init__(self, prefix):
            self.prefix = prefix
            self.calls = 0

        @api.get("/hello")
        def hello(self, name: str = "world"):
            self.calls += 1
            return {"message": f"{self.prefix} {name}", "calls": self.calls,
                    "model": serve.get_multiplexed_model_id()}

        @api.post("/items")
        async def create(self, item: dict):
            return {"created": item}

        @api.get("/events")
        def stream(self):
            async def events_of():
                for i in range(3):
                    yield f"data: {i}\n\n"

            return StreamingResponse(events_of(), media_type="text/event-stream")

        @api.get("/boom")
        def boom(self):
            raise RuntimeError("kaboom")

    @api.get("/late")  # added after decoration: the deployment's app is a frozen copy
    def late():
        return "late"

    return Api


def test_fastapi_ingress_routes_under_the_route_prefix():
    async def scenario():
        replica = make_replica(make_api_deployment(), "hey", route_prefix="/api")
        await replica.initialize()
        responses = {
            "started": await http(replica, path="/api/events-seen", route_prefix="/api"),
            "get": await http(replica, path="/api/hello", query="name=ann", route_prefix="/api",
                              headers=[("serve_multiplexed_model_id", "m3")]),
            "again": await http(replica, path="/api/hello", route_prefix="/api"),
            "post": await http(replica, "POST", "/api/items", body=b'{"id": 7}',
                               headers=[("content-type", "application/json")],
                               route_prefix="/api"),
            "sse": await http(replica, path="/api/events", route_prefix="/api"),
            "missing": await http(replica, path="/api/nowhere", route_prefix="/api"),
            "late": await http(replica, path="/api/late", route_prefix="/api"),
            "boom": await http(replica, path="/api/boom", route_prefix="/api"),
        }
        await replica.reconfigure(None, graceful_shutdown_wait_loop_s=0)
        await replica.prepare_for_shutdown()
        responses["stopped"] = await http(replica, path="/api/events-seen", route_prefix="/api")
        return responses

    responses = run(scenario())
    assert responses["get"].status == 200
    assert responses["get"].json() == {"message": "hey ann", "calls": 1, "model": "m3"}
    assert responses["again"].json()["calls"] == 2  # one instance serves every request
    assert (responses["post"].status, responses["post"].json()) == (200, {"created": {"id": 7}})
    sse = responses["sse"]
    assert sse.status == 200 and sse.more is True and len(sse.items) > 1
    assert sse.headers["content-type"].startswith("text/event-stream")
    assert sse.body == b"data: 0\n\ndata: 1\n\ndata: 2\n\n"
    assert (responses["missing"].status, responses["missing"].json()) == (
        404, {"detail": "Not Found"})
    assert responses["late"].status == 404
    assert (responses["boom"].status, responses["boom"].body) == (500, b"Internal Server Error")
    assert responses["started"].json() == ["startup"]
    assert responses["stopped"].json() == ["startup", "shutdown"]


def test_an_ingress_builder_runs_on_the_replica():
    def build_app():
        app = fastapi.FastAPI()

        @app.get("/")
        def root():
            return {"built": True}

        return app

    deployment = serve.deployment(serve.ingress(build_app)())
    response = run(http(make_replica(deployment)))
    assert (response.status, response.json()) == (200, {"built": True})


def test_ingress_methods_see_module_globals_defined_after_the_class(tmp_path, monkeypatch):
    (tmp_path / "ingress_after_module.py").write_text(textwrap.dedent("""\
        from fastapi import FastAPI
        from tessera import serve

        app = FastAPI()

        @serve.deployment
        @serve.ingress(app)
        class Api:
            @app.get("/")
            def root(self):
                return helper()

        def helper():
            return "helped"
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("ingress_after_module")
    try:
        response = run(http(make_replica(module.Api, pickled=True)))
    finally:
        sys.modules.pop("ingress_after_module", None)
    assert (response.status, response.json()) == (200, "helped")


# ---------------------------------------------------------------------------------------------
# Handle calls.


@serve.deployment
class Calls:
    def __init__(self):
        self.loop_thread = None

    async def where_async(self):
        return threading.get_ident(), serve.get_multiplexed_model_id()

    def where_sync(self):
        return threading.get_ident(), serve.get_multiplexed_model_id()

    async def add(self, a, b=0):
        return a + b

    def count(self, n):
        for i in range(n):
            yield i

    async def count_async(self, n):
        for i in range(n):
            yield i

    def context_of(self):
        replica = serve.get_replica_context()
        return (replica.app_name, replica.deployment, replica.replica_tag,
                replica.servable_object is self)


def test_handle_calls_of_async_and_sync_methods():
    async def scenario():
        replica = make_replica(Calls)
        loop_thread = threading.get_ident()
        meta = {"request_id": "r", "multiplexed_model_id": "m9"}
        async_where = await replica.handle_request("where_async", (), {}, meta)
        sync_where = await replica.handle_request("where_sync", (), {}, meta)
        added = await replica.handle_request("add", (1,), {"b": 2}, {})
        ctx = await replica.handle_request("context_of", (), {}, {})
        return loop_thread, async_where, sync_where, added, ctx

    loop_thread, async_where, sync_where, added, ctx = run(scenario())
    assert async_where == (loop_thread, "m9")
    assert sync_where[0] != loop_thread and sync_where[1] == "m9"  # in the pool, with context
    assert added == 3
    assert ctx == ("app", "Calls", "replica-1", True)


def test_sync_methods_on_the_loop_when_the_threadpool_is_off(monkeypatch):
    monkeypatch.setenv("RAY_SERVE_RUN_SYNC_IN_THREADPOOL", "0")

    async def scenario():
        replica = make_replica(Calls)
        return threading.get_ident(), await replica.handle_request("where_sync", (), {}, {})

    loop_thread, (thread, _) = run(scenario())
    assert thread == loop_thread


def test_streams_and_the_wrong_kind_of_call():
    async def scenario():
        replica = make_replica(Calls)
        sync_items = [i async for i in replica.handle_request_streaming("count", (3,), {}, {})]
        async_items = [i async for i in replica.handle_request_streaming("count_async", (2,),
                                                                         {}, {})]
        errors = []
        for call in (replica.handle_request("count", (2,), {}, {}),
                     _drain(replica.handle_request_streaming("add", (1,), {}, {})),
                     replica.handle_request("missing", (), {}, {})):
            try:
                await call
            except (TypeError, RayServeException) as e:
                errors.append(str(e))
        return sync_items, async_items, errors, await replica.get_num_ongoing_requests()

    sync_items, async_items, errors, ongoing = run(scenario())
    assert sync_items == [0, 1, 2] and async_items == [0, 1]
    assert errors[0] == ("Method 'count' returned a generator. You must use "
                         "`handle.options(stream=True)` to call generators on a deployment.")
    assert errors[1] == ("Called a deployment with `stream=True` but method 'add' did not "
                         "return a generator.")
    assert errors[2].startswith("Tried to call a method 'missing' that does not exist. "
                                "Available methods: [")
    assert "'add'" in errors[2]
    assert ongoing == 0


async def _drain(generator):
    return [item async for item in generator]


# ---------------------------------------------------------------------------------------------
# Rejection at max_ongoing_requests.


@serve.deployment(max_ongoing_requests=2)
class Gate:
    def __init__(self):
        self.release = asyncio.Event()
        self.entered = 0

    async def __call__(self, request=None):
        self.entered += 1
        await self.release.wait()
        return "done"

    async def open(self):
        self.release.set()


def test_rejection_at_max_ongoing_requests():
    async def scenario():
        replica = make_replica(Gate)
        await replica.initialize()
        gate = serve.get_replica_context().servable_object
        held = [asyncio.ensure_future(replica.handle_request("__call__", (), {}, {})),
                asyncio.ensure_future(http(replica))]
        await settle()
        ongoing = await replica.get_num_ongoing_requests()
        rejected = await replica.handle_request("__call__", (), {}, {})
        rejected_http = await http(replica)
        rejected_stream = await _drain(replica.handle_request_streaming("__call__", (), {}, {}))
        gate.release.set()
        results = await asyncio.gather(*held)
        return (gate.entered, ongoing, rejected, rejected_http, rejected_stream, results,
                await replica.get_num_ongoing_requests())

    entered, ongoing, rejected, rejected_http, rejected_stream, results, after = run(scenario())
    assert entered == 2 and ongoing == 2
    assert isinstance(rejected, ReplicaRejection) and rejected.num_ongoing_requests == 2
    assert rejected_http.status == 503
    assert rejected_http.headers == {"x-tessera-serve-rejected": "1"}
    assert len(rejected_stream) == 1 and isinstance(rejected_stream[0], ReplicaRejection)
    assert results[0] == "done" and results[1].body == b"done"
    assert after == 0


# ---------------------------------------------------------------------------------------------
# Start, reconfigure, health.


@serve.deployment(user_config={"threshold": 1})
class Configured:
    constructed = 0

    def __init__(self):
        Configured.constructed += 1
        self.configs = []
        self.healthy = True

    def reconfigure(self, config):
        self.configs.append(config)

    async def check_health(self):
        if not self.healthy:
            raise RuntimeError("unhealthy")

    def get(self):
        return self.configs

    def break_it(self):
        self.healthy = False


@serve.deployment(user_config={"a": 1})
class AsyncConfigured:
    def __init__(self):
        self.configs = []

    async def reconfigure(self, config):
        await asyncio.sleep(0)
        self.configs.append(config)

    def get(self):
        return self.configs


def test_reconfigure_without_restart():
    Configured.constructed = 0

    async def scenario():
        replica = make_replica(Configured)
        await replica.initialize()
        await replica.reconfigure({"threshold": 2})
        await replica.reconfigure({"threshold": 2})  # unchanged: not called again
        configs = await replica.handle_request("get", (), {}, {})
        async_replica = make_replica(AsyncConfigured)
        await async_replica.reconfigure({"a": 2})
        async_configs = await async_replica.handle_request("get", (), {}, {})
        return configs, async_configs

    configs, async_configs = run(scenario())
    assert configs == [{"threshold": 1}, {"threshold": 2}]
    assert Configured.constructed == 1
    assert async_configs == [{"a": 1}, {"a": 2}]


def test_reconfigure_changes_max_ongoing_requests():
    async def scenario():
        replica = make_replica(Gate)
        await replica.reconfigure(None, max_ongoing_requests=1)
        held = asyncio.ensure_future(replica.handle_request("__call__", (), {}, {}))
        await settle()
        rejected = await replica.handle_request("__call__", (), {}, {})
        await replica.handle_request("open", (), {}, {})  # over the limit: rejected too
        serve.get_replica_context().servable_object.release.set()
        await held
        with pytest.raises(ValueError, match="A replica reconfigures"):
            await replica.reconfigure(None, num_replicas=3)
        return rejected

    assert isinstance(run(scenario()), ReplicaRejection)


def test_the_controller_s_reconfigure_json_carries_the_options_too():
    async def scenario():
        replica = make_replica(Configured)
        await replica.initialize()
        await replica.reconfigure_json(
            '{"user_config": {"threshold": 3}, "max_ongoing_requests": 7, '
            '"graceful_shutdown_wait_loop_s": 0.5}')
        configs = await replica.handle_request("get", (), {}, {})
        with pytest.raises(ValueError, match="reconfigure_json takes"):
            await replica.reconfigure_json('{"threshold": 4}')
        return configs, replica._max_ongoing, replica._wait_loop_s

    configs, max_ongoing, wait_loop_s = run(scenario())
    assert configs == [{"threshold": 1}, {"threshold": 3}]
    assert (max_ongoing, wait_loop_s) == (7, 0.5)


def test_user_config_needs_a_reconfigure_method():
    with pytest.raises(RayServeException, match="user_config specified but deployment Calls "
                                                "missing reconfigure method"):
        run(make_replica(Calls.options(user_config={"x": 1})).initialize())
    with pytest.raises(ValueError, match="deployment_def must be a class to use user_config"):
        run(make_replica(plain_function.options(user_config={"x": 1})).initialize())


def test_check_health():
    async def scenario():
        replica = make_replica(Configured)
        await replica.check_health()
        await replica.handle_request("break_it", (), {}, {})
        with pytest.raises(RuntimeError, match="unhealthy"):
            await replica.check_health()
        await make_replica(Calls).check_health()  # no check_health: healthy

    run(scenario())


def test_a_failed_constructor_fails_every_call():
    @serve.deployment
    class Broken:
        def __init__(self):
            raise KeyError("no model file")

        def __call__(self):
            return 1

    async def scenario():
        replica = make_replica(Broken)
        errors = []
        for call in (replica.initialize(), replica.handle_request("__call__", (), {}, {}),
                     replica.check_health()):
            try:
                await call
            except KeyError as e:
                errors.append(str(e))
        return errors

    assert run(scenario()) == ["'no model file'"] * 3


# ---------------------------------------------------------------------------------------------
# Graceful shutdown.


@serve.deployment(graceful_shutdown_wait_loop_s=0)
class Draining:
    def __init__(self):
        self.release = asyncio.Event()
        self.log = []

    async def __call__(self):
        await self.release.wait()
        self.log.append("request done")
        return "ok"

    def __del__(self):
        self.log.append("__del__")


def test_graceful_shutdown_waits_for_ongoing_requests():
    async def scenario():
        replica = make_replica(Draining)
        await replica.initialize()
        servable = serve.get_replica_context().servable_object
        request = asyncio.ensure_future(replica.handle_request("__call__", (), {}, {}))
        await settle()
        shutdown = asyncio.ensure_future(replica.prepare_for_shutdown())
        await settle()
        waiting = not shutdown.done()
        servable.release.set()
        await shutdown
        return waiting, await request, list(servable.log)

    waiting, result, log = run(scenario())
    assert waiting and result == "ok"
    assert log[:2] == ["request done", "__del__"]


def test_shutdown_of_a_replica_that_never_started_calls_nothing():
    Configured.constructed = 0
    run(make_replica(Configured).prepare_for_shutdown())
    assert Configured.constructed == 0


# ---------------------------------------------------------------------------------------------
# Cancellation.


@serve.deployment
class Slow:
    def __init__(self):
        self.seen = []

    async def __call__(self):
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.seen.append("cancelled")
            raise

    async def tokens(self):
        try:
            yield "first"
            await asyncio.Event().wait()
            yield "never"
        except asyncio.CancelledError:
            self.seen.append("stream cancelled")
            raise
        finally:
            self.seen.append("stream closed")

    def seen_so_far(self):
        return list(self.seen)


def test_cancel_request_reaches_the_user_coroutine():
    async def scenario():
        replica = make_replica(Slow)
        call = asyncio.ensure_future(replica.handle_request("__call__", (), {},
                                                            {"request_id": "slow-1"}))
        await settle()
        assert await replica.cancel_request("slow-1") is True
        assert await replica.cancel_request("unknown") is False
        with pytest.raises(RequestCancelledError, match="Request slow-1 was cancelled."):
            await call
        outer = asyncio.ensure_future(replica.handle_request("__call__", (), {}, {}))
        await settle()
        outer.cancel()  # the actor call's own task cancelled
        with pytest.raises(asyncio.CancelledError):
            await outer
        return (await replica.handle_request("seen_so_far", (), {}, {}),
                await replica.get_num_ongoing_requests())

    seen, ongoing = run(scenario())
    assert seen == ["cancelled", "cancelled"] and ongoing == 0


def test_closing_a_stream_cancels_or_closes_the_user_generator():
    async def scenario():
        replica = make_replica(Slow)
        stream = replica.handle_request_streaming("tokens", (), {}, {"request_id": "s1"})
        assert await stream.__anext__() == "first"
        await stream.aclose()  # closed between values: GeneratorExit at its yield
        closed = await replica.handle_request("seen_so_far", (), {}, {})
        stream = replica.handle_request_streaming("tokens", (), {}, {"request_id": "s2"})
        assert await stream.__anext__() == "first"
        pending = asyncio.ensure_future(stream.__anext__())
        await settle()
        await replica.cancel_request("s2")  # while it awaits: CancelledError there
        with pytest.raises(RequestCancelledError):
            await pending
        return closed, await replica.handle_request("seen_so_far", (), {}, {})

    closed, seen = run(scenario())
    assert closed == ["stream closed"]
    assert seen == ["stream closed", "stream cancelled", "stream closed"]


def test_a_client_gone_mid_stream_cancels_the_streaming_response():
    api = fastapi.FastAPI()

    @serve.deployment
    @serve.ingress(api)
    class Streamer:
        def __init__(self):
            self.seen = []

        @api.get("/sse")
        def sse(self):
            async def events():
                try:
                    yield "data: hello\n\n"
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    self.seen.append("cancelled")
                    raise

            return StreamingResponse(events(), media_type="text/event-stream")

    async def scenario():
        replica = make_replica(Streamer)
        stream = replica.handle_http(frame(path="/sse"))
        first = Response([await stream.__anext__()])
        second = asyncio.ensure_future(stream.__anext__())
        await settle()
        second.cancel()  # the proxy stopped reading: the actor call is cancelled
        with pytest.raises(asyncio.CancelledError):
            await second
        await stream.aclose()
        await settle()
        seen = serve.get_replica_context().servable_object.seen
        return first, await replica.get_num_ongoing_requests(), seen

    first, ongoing, seen = run(scenario())
    assert (first.status, first.more, first.body) == (200, True, b"data: hello\n\n")
    assert seen == ["cancelled"] and ongoing == 0


def test_a_plain_response_is_the_first_call_s_whole_result():
    @serve.deployment
    class Plain:
        async def __call__(self, request):
            return "ok"

    async def scenario():
        replica = make_replica(Plain)
        item = await replica.handle_http_first(frame(request_id="plain-1"))
        return Response([item]), dict(replica._parked_http)

    response, parked = run(scenario())
    assert (response.status, response.more, response.body) == (200, False, b"ok")
    assert parked == {}


def _chunks_app(seen, chunks=3, then_wait=False):
    api = fastapi.FastAPI()

    @serve.deployment
    @serve.ingress(api)
    class Chunks:
        @api.get("/chunks")
        def chunks(self):
            async def parts():
                try:
                    for i in range(chunks):
                        yield f"part {i};"
                        await asyncio.sleep(0)
                    if then_wait:
                        await asyncio.Event().wait()
                except asyncio.CancelledError:
                    seen.append("cancelled")
                    raise

            return StreamingResponse(parts(), media_type="text/plain")

    return Chunks


def test_a_streamed_response_s_rest_comes_from_handle_http_rest():
    seen = []

    async def scenario():
        replica = make_replica(_chunks_app(seen))
        first = Response([await replica.handle_http_first(frame(path="/chunks"))])
        rest = [item async for item in replica.handle_http_rest(first.rest)]
        with pytest.raises(RayServeException, match="No streamed response .* is waiting"):
            await replica.handle_http_rest(first.rest).__anext__()
        await settle()
        return Response(first.items + rest), await replica.get_num_ongoing_requests()

    response, ongoing = run(scenario())
    assert (response.status, response.more) == (200, True)
    assert response.body == b"part 0;part 1;part 2;"
    assert ongoing == 0 and seen == []


def test_two_streams_with_the_client_s_same_request_id_keep_their_own_rest():
    api = fastapi.FastAPI()

    @serve.deployment
    @serve.ingress(api)
    class Echo:
        @api.get("/say/{word}")
        def say(self, word: str):
            async def parts():
                yield f"{word}:"
                yield word

            return StreamingResponse(parts(), media_type="text/plain")

    async def scenario():
        replica = make_replica(Echo)
        firsts = [Response([await replica.handle_http_first(frame(path=f"/say/{w}",
                                                                 request_id="same"))])
                  for w in ("red", "blue")]
        return [Response(f.items + [i async for i in replica.handle_http_rest(f.rest)])
                for f in firsts]

    red, blue = run(scenario())
    assert red.rest != blue.rest
    assert (red.body, blue.body) == (b"red:red", b"blue:blue")


def test_a_rest_nobody_asks_for_is_dropped_and_its_request_cancelled(monkeypatch):
    from tessera.serve import replica as replica_module
    monkeypatch.setattr(replica_module, "HTTP_REST_WAIT_S", 0.05)
    seen = []

    async def scenario():
        replica = make_replica(_chunks_app(seen, chunks=1, then_wait=True))
        first = await replica.handle_http_first(frame(path="/chunks"))
        for _ in range(200):
            if not replica._parked_http and await replica.get_num_ongoing_requests() == 0:
                break
            await asyncio.sleep(0.01)
        return Response([first]), dict(replica._parked_http), \
            await replica.get_num_ongoing_requests()

    first, parked, ongoing = run(scenario())
    assert (first.status, first.more) == (200, True)
    assert parked == {} and ongoing == 0 and seen == ["cancelled"]


# ---------------------------------------------------------------------------------------------
# Handles in init args, multiplexed ids.


@serve.deployment
class Downstream:
    pass


@serve.deployment
class Upstream:
    def __init__(self, direct, nested):
        self.direct = direct
        self.nested = nested

    def handles(self):
        return self.direct, self.nested


def test_only_the_ingress_takes_http():
    built = build.build_application(Upstream.bind(Downstream.bind(), None), "app")
    spec = build.replica_spec(built.deployment("Downstream"), "r", lambda app, name: None)
    with pytest.raises(RayServeException, match="Deployment 'Downstream' is not the ingress of "
                                                "application 'app'"):
        run(http(ReplicaActor(spec)))


def test_bound_deployments_become_handles_through_make_handle():
    made = []

    def make_handle(app_name, deployment_name):
        made.append((app_name, deployment_name))
        return f"handle:{deployment_name}"

    async def scenario():
        replica = make_replica(Upstream, Downstream.bind(), {"list": [Downstream.bind()]},
                               make_handle=make_handle)
        return await replica.handle_request("handles", (), {}, {})

    assert run(scenario()) == ("handle:Downstream", {"list": ["handle:Downstream_1"]})
    assert made == [("app", "Downstream"), ("app", "Downstream_1")]
    with pytest.raises(ValueError, match="binds deployment 'Downstream', but its replica spec "
                                         "has no make_handle"):
        run(make_replica(Upstream, Downstream.bind(), None).initialize())


@serve.deployment
class Multi:
    @serve.multiplexed(max_num_models_per_replica=2)
    async def get_model(self, model_id):
        return {"id": model_id}

    async def __call__(self, request=None):
        return await self.get_model(serve.get_multiplexed_model_id())


def test_multiplexed_model_ids_are_reported():
    async def scenario():
        replica = make_replica(Multi)
        results = [await replica.handle_request("__call__", (), {},
                                                {"multiplexed_model_id": model_id})
                   for model_id in ("a", "b", "c")]
        by_http = await http(replica, model_id="d")
        return results, by_http, await replica.get_multiplexed_model_ids()

    results, by_http, ids = run(scenario())
    assert results == [{"id": "a"}, {"id": "b"}, {"id": "c"}]
    assert by_http.json() == {"id": "d"}
    assert ids == ["c", "d"]  # two models per replica: the least recently used went


def test_the_metrics_its_code_adds_are_rendered_until_the_code_goes():
    from tessera.serve import _replica_metrics

    @serve.deployment
    class Exporting:
        def __init__(self, value):
            self.value = value
            _replica_metrics.add_source(self.metrics_text)

        def metrics_text(self):
            return f"# TYPE demo_gauge gauge\ndemo_gauge {self.value}"

        def drop(self):
            _replica_metrics.remove_source(self.metrics_text)

    async def scenario():
        replica = make_replica(Exporting, 3)
        before = await replica.get_metrics_text()  # not yet initialized: nothing
        await replica.initialize()
        rendered = await replica.get_metrics_text()
        await replica.handle_request("drop", (), {}, {})
        return before, rendered, await replica.get_metrics_text()

    before, rendered, after = run(scenario())
    assert before == ""
    assert rendered == "# TYPE demo_gauge gauge\ndemo_gauge 3\n"
    assert after == ""


def test_a_metrics_source_is_held_weakly_and_one_that_raises_is_left_out(caplog):
    from tessera.serve import _replica_metrics

    class Source:
        def text(self):
            return "# TYPE kept gauge\nkept 1\n"

    def broken():
        raise RuntimeError("no figures")

    kept, gone = Source(), Source()
    _replica_metrics.add_source(kept.text)
    _replica_metrics.add_source(gone.text)
    _replica_metrics.add_source(broken)
    try:
        del gone
        assert _replica_metrics.render() == "# TYPE kept gauge\nkept 1\n"
        assert "A replica metrics source failed to render" in caplog.text
    finally:
        _replica_metrics.remove_source(kept.text)
        _replica_metrics.remove_source(broken)
    assert _replica_metrics.render() == ""
    with pytest.raises(TypeError, match="must be callable"):
        _replica_metrics.add_source("text")


def test_initialize_answers_the_process_id_the_controller_shows():
    import os

    assert run(make_replica(Calls).initialize()) == os.getpid()

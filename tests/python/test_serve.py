"""tessera.serve end to end on a local cluster (two_nodes.yaml): serve.run of function and class
deployments and the handles they return (results, methods, exceptions, composition through a
bound handle, a DeploymentResponse passed to another call by value and inside a list by
reference, sync calls refused inside an event loop, streaming calls, cancel), user_config
reconfiguring a replica without a restart, serve.status's shapes, delete, back pressure at
max_queued_requests, HTTP through the proxy (a plain __call__ taking a starlette Request, a
FastAPI ingress with two routes, a StreamingResponse read chunk by chunk, 404 without a route,
/-/healthz and /-/routes) on the port the proxy picked (serve.start(http_options={"port": 0})),
a SIGKILLed replica replaced while requests succeed again, and the CLI (`tessera serve run`,
`status`, `shutdown`).

One cluster and one Serve for the file; tests that need an application of their own deploy it
under its own name and route prefix. The CLI's shutdown ends Serve, so it runs last.
Deployments are defined inside functions so that replicas get them by value (they need not
import this file). Waits poll for what a test needs, with generous bounds; nothing is timed.
"""
import asyncio
import json
import os
import signal
import textwrap
import urllib.error
import urllib.request

import pytest

import tessera
from conftest import start_serve, wait_for

serve = pytest.importorskip("tessera.serve")
fastapi = pytest.importorskip("fastapi")

RESULT_TIMEOUT_S = 60
SMALL = {"num_cpus": 0.1}  # replicas of 2 x 4 CPUs' worth of apps fit at once


@pytest.fixture(scope="module")
def serve_instance(cluster):
    """Serve started with its HTTP proxy on a free port: its base URL."""
    yield start_serve()
    serve.shutdown()


def get(url, timeout=60, **kwargs):
    with urllib.request.urlopen(urllib.request.Request(url, **kwargs), timeout=timeout) as r:
        return r.status, r.read()


# ---------------------------------------------------------------------------------------------
# What the package sends and keeps, without a cluster.


def test_a_handle_is_its_names_and_options_and_pickles_as_them():
    import pickle

    from tessera.serve.handle import _back_pressure_error

    handle = serve.DeploymentHandle("Model", "app")
    method = handle.predict
    assert method._options.method_name == "predict" and handle._options.method_name == "__call__"
    streaming = method.options(stream=True, multiplexed_model_id="m1")
    copy = pickle.loads(pickle.dumps(streaming))
    assert (copy.deployment_name, copy.app_name) == ("Model", "app")
    assert copy._options == streaming._options
    assert copy._options.stream and copy._options.multiplexed_model_id == "m1"
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        handle.options(bogus=1)
    error = _back_pressure_error("Request dropped due to backpressure (num_queued_requests=3, "
                                 "max_queued_requests=2).")
    assert isinstance(error, serve.BackPressureError)
    assert "num_queued_requests=3, max_queued_requests=2" in str(error)


def test_the_deploy_request_carries_each_deployments_options_and_resources():
    from tessera.serve import api, build

    @serve.deployment(num_replicas="auto", user_config={"a": 1}, max_queued_requests=3,
                      ray_actor_options={"num_cpus": 0.5, "resources": {"disk": 2},
                                         "runtime_env": {"env_vars": {"MODE": "1"}}})
    class Model:
        def __call__(self, request):
            return 1

    @serve.deployment
    class NoHttp:
        def __init__(self, model):
            self.model = model

        def hello(self):
            return 2

    target = NoHttp.bind(Model.bind())
    message = api._application_message(target, build.build_application(target, "a", None))
    assert message["ingress_deployment"] == "NoHttp" and "route_prefix" not in message
    assert message["ingress_takes_http"] is False
    model = {d["name"]: d for d in message["deployments"]}["Model"]
    assert model["resources"] == {"amounts": {"CPU": 0.5, "disk": 2.0},
                                  "env_vars": {"MODE": "1"}}
    assert model["user_config_json"] == '{"a": 1}' and model["max_queued_requests"] == 3
    assert model["autoscaling_config"]["max_replicas"] == 100
    json.dumps(message)  # what serve_deploy gets, as JSON

    with pytest.raises(serve.RayServeException, match=r"runtime_env \['pip'\]"):
        api._resources_message({"ray_actor_options": {"runtime_env": {"pip": ["x"]}}})
    fields = api._start_fields(None, {"port": 0})
    assert (fields["http_port"], fields["proxy_location"]) == (0, "EveryNode")
    assert api._start_fields(None, {"host": None})["proxy_location"] == "Disabled"
    proxy = api.ProxyStatusOverview("HEALTHY", "127.0.0.1:8000")
    assert proxy == "HEALTHY" and proxy == api.ProxyStatus.HEALTHY
    assert proxy.address == "127.0.0.1:8000"


def test_serve_build_writes_a_config_the_schema_reads(tmp_path):
    from tessera.serve import schema, scripts

    (tmp_path / "built_app.py").write_text(textwrap.dedent("""
        from tessera import serve

        @serve.deployment(num_replicas=2)
        class One:
            def __call__(self, request):
                return 1

        app = One.bind()
    """))
    out = tmp_path / "config.yaml"
    assert scripts.main(["build", "built_app:app", "built_app.app", "--app-dir", str(tmp_path),
                         "-o", str(out)]) == 0
    config = schema.load_config_file(str(out))
    assert [(a.name, a.route_prefix) for a in config.applications] == [("app1", "/app1"),
                                                                       ("app2", "/app2")]
    assert config.applications[0].deployments[0].num_replicas == 2


# ---------------------------------------------------------------------------------------------
# Handles.


def make_echo_app():
    @serve.deployment(ray_actor_options=SMALL)
    def echo(value):
        return {"echo": value}

    return echo.bind()


def make_counter():
    @serve.deployment(ray_actor_options=SMALL)
    class Counter:
        def __init__(self, start):
            self.count = start

        def __call__(self, step=1):
            self.count += step
            return self.count

        def pid(self):
            return os.getpid()

        def fail(self):
            raise ValueError("bad input from the caller")

        def count_up(self, n):
            for i in range(n):
                yield i

    return Counter


def test_a_function_deployment_answers_through_the_handle_run_returns(serve_instance):
    handle = serve.run(make_echo_app(), name="echo", route_prefix=None)
    assert isinstance(handle, serve.DeploymentHandle)
    assert handle.app_name == "echo" and handle.deployment_name == "echo"
    response = handle.remote("hi")
    assert isinstance(response, serve.DeploymentResponse)
    assert response.result(timeout_s=RESULT_TIMEOUT_S) == {"echo": "hi"}
    again = serve.get_app_handle("echo")
    assert again.remote(value=2).result(timeout_s=RESULT_TIMEOUT_S) == {"echo": 2}


@pytest.fixture(scope="module")
def counter(serve_instance):
    return serve.run(make_counter().bind(10), name="counter", route_prefix=None)


def test_a_class_deployment_keeps_state_and_its_methods_and_errors_reach_the_caller(counter):
    start = counter.remote(0).result(timeout_s=RESULT_TIMEOUT_S)
    assert counter.remote().result(timeout_s=RESULT_TIMEOUT_S) == start + 1
    assert counter.remote(5).result(timeout_s=RESULT_TIMEOUT_S) == start + 6
    assert counter.options(method_name="__call__").remote().result(
        timeout_s=RESULT_TIMEOUT_S) == start + 7
    assert isinstance(counter.pid.remote().result(timeout_s=RESULT_TIMEOUT_S), int)
    with pytest.raises(ValueError, match="bad input from the caller"):
        counter.fail.remote().result(timeout_s=RESULT_TIMEOUT_S)
    with pytest.raises(Exception, match="does not exist"):
        counter.no_such_method.remote().result(timeout_s=RESULT_TIMEOUT_S)


def test_streaming_calls_yield_values_as_the_replica_makes_them(counter):
    streaming = counter.options(stream=True)
    generator = streaming.count_up.remote(4)
    assert isinstance(generator, serve.DeploymentResponseGenerator)
    assert list(generator) == [0, 1, 2, 3]

    async def read_async():
        return [value async for value in streaming.count_up.remote(3)]

    assert asyncio.run(read_async()) == [0, 1, 2]
    with pytest.raises(TypeError, match="DeploymentResponseGenerator"):
        counter.remote(streaming.count_up.remote(1)).result(timeout_s=RESULT_TIMEOUT_S)


def make_composed_app():
    @serve.deployment(ray_actor_options=SMALL)
    class Doubler:
        def __call__(self, x):
            return 2 * x

    @serve.deployment(ray_actor_options=SMALL)
    class Adder:
        def __init__(self, doubler):
            self.doubler = doubler

        async def __call__(self, x):
            return await self.doubler.remote(x) + 1

        def sync_call(self, x):  # a sync method runs in a thread: .result() is allowed there
            return self.doubler.remote(x).result(timeout_s=60) + 100

        async def sync_in_loop(self):
            try:
                self.doubler.remote(1).result(timeout_s=60)
            except RuntimeError as e:
                return str(e)
            return "no error"

        def plus_one(self, value):
            return value + 1

        def total(self, refs):
            assert all(isinstance(ref, tessera.ObjectRef) for ref in refs), refs
            return sum(tessera.get(refs))

        def own_handle(self):
            handle = serve.get_deployment_handle("Doubler")
            return handle.app_name, handle.remote(21).result(timeout_s=60)

    return Adder.bind(Doubler.bind())


@pytest.fixture(scope="module")
def composed(serve_instance):
    return serve.run(make_composed_app(), name="composed", route_prefix=None)


def test_composition_passes_handles_and_responses(composed):
    adder = composed
    assert adder.remote(5).result(timeout_s=RESULT_TIMEOUT_S) == 11
    assert adder.sync_call.remote(5).result(timeout_s=RESULT_TIMEOUT_S) == 110
    assert "Use `await response` instead" in adder.sync_in_loop.remote().result(
        timeout_s=RESULT_TIMEOUT_S)
    assert adder.own_handle.remote().result(timeout_s=RESULT_TIMEOUT_S) == ("composed", 42)

    doubler = serve.get_deployment_handle("Doubler", "composed")
    # A response as an argument: its value; inside a list: the ObjectRef of its result.
    assert adder.plus_one.remote(doubler.remote(4)).result(timeout_s=RESULT_TIMEOUT_S) == 9
    refs = [doubler.remote(1), doubler.remote(2)]
    assert adder.total.remote(refs).result(timeout_s=RESULT_TIMEOUT_S) == 6

    async def awaited():
        return await adder.remote(1)

    assert asyncio.run(awaited()) == 3

    async def sync_result_in_loop():
        adder.remote(1).result()

    with pytest.raises(RuntimeError, match="Use `await response` instead"):
        asyncio.run(sync_result_in_loop())
    with pytest.raises(serve.RayServeException, match="application name"):
        serve.get_deployment_handle("Doubler")
    with pytest.raises(serve.RayServeException, match="Application 'nope' does not exist"):
        serve.get_app_handle("nope")


@serve.deployment(ray_actor_options=SMALL, user_config={"threshold": 1})
class Configured:
    def __init__(self):
        self.threshold = None

    def reconfigure(self, config):
        self.threshold = config["threshold"]

    def __call__(self):
        return self.threshold, os.getpid()


def test_user_config_reconfigures_the_running_replica(serve_instance):
    # One class, two user_configs: the code is the same, so the replica is reconfigured in place.
    handle = serve.run(Configured.bind(), name="configured", route_prefix=None)
    threshold, pid = handle.remote().result(timeout_s=RESULT_TIMEOUT_S)
    assert threshold == 1
    serve.run(Configured.options(user_config={"threshold": 2}).bind(), name="configured",
              route_prefix=None)
    wait_for(lambda: handle.remote().result(timeout_s=RESULT_TIMEOUT_S)[0] == 2, 60,
             "the new user_config")
    assert handle.remote().result(timeout_s=RESULT_TIMEOUT_S) == (2, pid)


def test_status_has_rays_shape(counter, composed):
    status = serve.status()
    assert isinstance(status, serve.api.ServeStatus)
    app = status.applications["counter"]
    assert app.status == "RUNNING"
    assert isinstance(app.message, str)
    assert app.last_deployed_time_s > 0
    deployment = app.deployments["Counter"]
    assert deployment.status == "HEALTHY"
    assert {state: n for state, n in deployment.replica_states.items() if n} == {"RUNNING": 1}
    assert isinstance(deployment.status_trigger, str)
    assert set(status.applications["composed"].deployments) == {"Adder", "Doubler"}
    # The head's proxy serves; the nodes' (one per node with a replica) may still be starting.
    assert status.proxies["head"] == "HEALTHY"
    assert all(p in ("STARTING", "HEALTHY", "DRAINING") for p in status.proxies.values())


def test_delete_removes_an_application(serve_instance):
    serve.run(make_echo_app(), name="short-lived", route_prefix=None)
    serve.delete("short-lived")
    assert "short-lived" not in serve.status().applications
    with pytest.raises(serve.RayServeException, match="does not exist"):
        serve.get_app_handle("short-lived")


@tessera.remote(num_cpus=0.1)
class GroupReporter:
    def group(self):
        from tessera.util import get_current_placement_group
        group = get_current_placement_group()
        return group.id.hex() if group is not None else None


def test_a_replica_with_bundles_is_in_bundle_0_of_its_own_group_and_captures_its_children(
        serve_instance):
    @serve.deployment(ray_actor_options=SMALL, num_replicas=2,
                      placement_group_bundles=[{"CPU": 0.1}, {"CPU": 0.1}])
    class Parent:
        def __init__(self):
            self.child = GroupReporter.remote()  # no strategy: into the replica's group

        def groups(self):
            from tessera.util import get_current_placement_group
            mine = get_current_placement_group()
            return mine.id.hex(), tessera.get(self.child.group.remote(), timeout=60)

    handle = serve.run(Parent.bind(), name="grouped", route_prefix=None)
    try:
        seen = {handle.groups.remote().result(timeout_s=60) for _ in range(8)}
    finally:
        serve.delete("grouped")
    assert {mine for mine, _ in seen} == {child for _, child in seen}
    assert all(mine and mine.startswith("serve:grouped#Parent#") for mine, _ in seen)


def make_gate():
    @serve.deployment(ray_actor_options=SMALL, max_ongoing_requests=1, max_queued_requests=1)
    class Gate:
        async def __call__(self, path):
            open(path + ".started", "w").close()
            while not os.path.exists(path):
                await asyncio.sleep(0.05)
            return "done"

    return Gate


def done(response):
    return response._request.future.done()


def test_requests_over_max_queued_requests_get_back_pressure(serve_instance, tmp_path):
    handle = serve.run(make_gate().bind(), name="gate", route_prefix=None)
    gate = str(tmp_path / "open")
    first = handle.remote(gate)
    wait_for(lambda: os.path.exists(gate + ".started"), 60, "the first request to run")
    # The replica is full: one of these waits in the router's queue, the other is refused.
    waiting = [handle.remote(gate), handle.remote(gate)]
    refused = wait_for(lambda: [r for r in waiting if done(r)], 60, "a refused request")
    with pytest.raises(serve.BackPressureError, match="max_queued_requests=1"):
        refused[0].result(timeout_s=RESULT_TIMEOUT_S)
    open(gate, "w").close()
    assert first.result(timeout_s=RESULT_TIMEOUT_S) == "done"
    queued = [r for r in waiting if r is not refused[0]]
    assert queued[0].result(timeout_s=RESULT_TIMEOUT_S) == "done"
    serve.delete("gate")


def test_a_cancelled_request_raises_and_frees_its_replica(serve_instance, tmp_path):
    handle = serve.run(make_gate().bind(), name="cancelled", route_prefix=None)
    never = str(tmp_path / "never")
    stuck = handle.remote(never)
    wait_for(lambda: os.path.exists(never + ".started"), 60, "the request to run")
    stuck.cancel()
    with pytest.raises(serve.RequestCancelledError):
        stuck.result(timeout_s=RESULT_TIMEOUT_S)
    # The replica (max_ongoing_requests=1) takes the next request: the cancelled one ended.
    opened = str(tmp_path / "opened")
    open(opened, "w").close()
    assert handle.remote(opened).result(timeout_s=RESULT_TIMEOUT_S) == "done"
    serve.delete("cancelled")


def test_a_killed_replica_is_replaced_and_requests_succeed_again(serve_instance):
    handle = serve.run(make_counter().bind(0), name="victim", route_prefix=None)
    pid = handle.pid.remote().result(timeout_s=RESULT_TIMEOUT_S)
    os.kill(pid, signal.SIGKILL)

    def answered_by_a_new_replica():
        try:
            return handle.pid.remote().result(timeout_s=RESULT_TIMEOUT_S) != pid
        except Exception:  # noqa: BLE001 - routed to the dead replica before it was dropped
            return False

    wait_for(answered_by_a_new_replica, 120, "a replacement replica")
    assert handle.remote().result(timeout_s=RESULT_TIMEOUT_S) == 1  # a fresh instance


# ---------------------------------------------------------------------------------------------
# HTTP through the proxy.


def make_plain_app():
    from starlette.requests import Request

    @serve.deployment(ray_actor_options=SMALL)
    class Plain:
        async def __call__(self, request: Request):
            body = await request.body()
            return {"method": request.method, "path": request.url.path,
                    "query": request.query_params.get("q"),
                    "body": json.loads(body) if body else None}

    return Plain.bind()


def make_fastapi_app():
    from starlette.responses import StreamingResponse

    api = fastapi.FastAPI()

    @serve.deployment(ray_actor_options=SMALL)
    @serve.ingress(api)
    class Api:
        @api.get("/hello")
        def hello(self, name: str = "world"):
            return {"message": f"hello {name}"}

        @api.post("/items/{item_id}")
        def create(self, item_id: int, item: dict):
            return {"id": item_id, "item": item}

        @api.get("/stream")
        def stream(self):
            async def chunks():
                for i in range(3):
                    yield f"chunk {i}\n"

            return StreamingResponse(chunks(), media_type="text/plain")

    return Api.bind()


def test_a_fresh_driver_sends_many_requests_at_once(serve_instance, cluster):
    # A process that has not reached the replicas yet, sending its first requests all at once
    # (they once waited forever: concurrent lookups of one replica's actor by name).
    @serve.deployment(ray_actor_options=SMALL)
    class Twice:
        async def __call__(self, x):
            return 2 * x

    serve.run(Twice.bind(), name="fresh", route_prefix=None)
    script = textwrap.dedent("""
        import tessera
        from tessera import serve
        tessera.init()
        handle = serve.get_app_handle("fresh")
        responses = [handle.remote(i) for i in range(16)]
        print(sum(r.result(timeout_s=60) for r in responses))
    """)
    result = cluster.python(script, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == str(2 * sum(range(16)))
    serve.delete("fresh")


def test_autoscaling_adds_replicas_under_load_and_removes_them_when_idle(serve_instance):
    # Ongoing requests per replica above target_ongoing_requests add replicas (no upscale delay);
    # idle, the deployment goes back to min_replicas after downscale_delay_s. The handle's
    # router reports its ongoing requests every 10 s (Ray's push interval).
    @serve.deployment(ray_actor_options=SMALL, max_ongoing_requests=10,
                      autoscaling_config={"min_replicas": 1, "max_replicas": 3,
                                          "target_ongoing_requests": 1,
                                          "look_back_period_s": 2, "upscale_delay_s": 0,
                                          "downscale_delay_s": 1})
    class Slow:
        async def __call__(self):
            await asyncio.sleep(0.5)
            return os.getpid()

    handle = serve.run(Slow.bind(), name="autoscaled", route_prefix=None)

    def replicas():
        deployment = serve.status().applications["autoscaled"].deployments["Slow"]
        return deployment.replica_states.get("RUNNING", 0)

    assert replicas() == 1
    pids = set()

    def loaded_and_scaled_up():
        responses = [handle.remote() for _ in range(12)]
        pids.update(r.result(timeout_s=RESULT_TIMEOUT_S) for r in responses)
        return replicas() >= 2

    wait_for(loaded_and_scaled_up, 90, "a second replica under load")
    wait_for(lambda: replicas() == 1, 90, "the deployment back at min_replicas when idle")
    serve.delete("autoscaled")


@pytest.fixture(scope="module")
def http_apps(serve_instance):
    serve.run(make_plain_app(), name="plain", route_prefix="/plain")
    serve.run(make_fastapi_app(), name="api", route_prefix="/api")
    return serve_instance


def test_http_reaches_a_plain_deployment_and_a_fastapi_ingress(http_apps):
    serve_instance = http_apps
    status, body = get(f"{serve_instance}/plain/x?q=7", data=b'{"a": 1}', method="POST",
                       headers={"content-type": "application/json"})
    assert status == 200
    assert json.loads(body) == {"method": "POST", "path": "/plain/x", "query": "7",
                                "body": {"a": 1}}
    assert json.loads(get(f"{serve_instance}/api/hello?name=ann")[1]) == {
        "message": "hello ann"}
    status, body = get(f"{serve_instance}/api/items/7", data=b'{"x": true}', method="POST",
                       headers={"content-type": "application/json"})
    assert (status, json.loads(body)) == (200, {"id": 7, "item": {"x": True}})

    with urllib.request.urlopen(f"{serve_instance}/api/stream", timeout=60) as response:
        lines = [response.readline() for _ in range(3)]
        assert response.read() == b""
    assert lines == [b"chunk 0\n", b"chunk 1\n", b"chunk 2\n"]


def test_http_has_no_route_where_no_application_is_and_health_and_route_endpoints(http_apps):
    serve_instance = http_apps
    with pytest.raises(urllib.error.HTTPError) as missing:
        get(f"{serve_instance}/nothing/here")
    assert missing.value.code == 404
    assert get(f"{serve_instance}/-/healthz") == (200, b"success")
    routes = json.loads(get(f"{serve_instance}/-/routes")[1])
    assert routes.get("/plain") == "plain" and routes.get("/api") == "api"


# ---------------------------------------------------------------------------------------------
# The CLI; its shutdown ends Serve for the rest of the file.


CLI_APP = textwrap.dedent("""
    from tessera import serve

    @serve.deployment(ray_actor_options={"num_cpus": 0.1})
    class Greeter:
        def __init__(self, greeting):
            self.greeting = greeting

        async def __call__(self, request):
            return self.greeting

    def app_builder(args):
        return Greeter.bind(args.get("greeting", "hi"))
""")


def test_the_cli_runs_reports_and_shuts_serve_down(serve_instance, cluster, tmp_path):
    (tmp_path / "cli_app.py").write_text(CLI_APP)
    run = cluster.cli("serve", "run", "cli_app:app_builder", "greeting=ahoy", "--app-dir",
                      str(tmp_path), "--name", "cli", "--route-prefix", "/cli",
                      "--non-blocking", timeout=240)
    assert run.returncode == 0, run.stderr
    assert "Deployed app 'cli' successfully." in run.stdout
    assert get(f"{serve_instance}/cli")[1] == b"ahoy"

    status = cluster.cli("serve", "status", timeout=120)
    assert status.returncode == 0, status.stderr
    assert "applications:" in status.stdout and "cli:" in status.stdout
    assert "RUNNING" in status.stdout
    one = cluster.cli("serve", "status", "-n", "cli", timeout=120)
    assert one.returncode == 0 and "status: RUNNING" in one.stdout
    bad = cluster.cli("serve", "run", "cli_app:app_builder", "not-a-pair", "--app-dir",
                      str(tmp_path), timeout=120)
    assert bad.returncode == 1 and "must be of the form 'key=val'" in bad.stderr

    down = cluster.cli("serve", "shutdown", "-y", timeout=240)
    assert down.returncode == 0, down.stderr
    assert serve.status().applications == {}
    serve.shutdown()  # nothing runs: a no-op

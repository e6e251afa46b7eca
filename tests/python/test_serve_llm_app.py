"""Serve LLM's application layer without a cluster: the OpenAI ingress (OpenAiIngress in a
ReplicaActor, driven through the proxy's frame protocol) over LLMServer instances in this
process, reached through stand-in handles with Ray's handle API; the builders' names, options
and placement; the demo model's cache; and the official OpenAI Node.js client against the same
app served by uvicorn (skipped without node and the pinned npm package of scripts/setup).

The model is a tiny random one (greedy decoding, ignore_eos, so every answer is max_tokens
long and repeats). Run from a source tree with
`PYTHONPATH=python python3 -m pytest --noconftest tests/python/test_serve_llm_app.py`.
"""
import asyncio
import contextvars
import importlib.util
import json
import os
import pickle
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

try:
    import tessera  # noqa: F401 - the built package (ctest puts build/python on PYTHONPATH)
except ImportError:
    _spec = importlib.util.find_spec("tessera")
    sys.modules["tessera"] = importlib.util.module_from_spec(_spec)

torch = pytest.importorskip("torch", reason="the built-in LLM engine needs python3-torch")
pytest.importorskip("fastapi")

from tessera.serve import _http, build, context  # noqa: E402
from tessera.serve.replica import ReplicaActor  # noqa: E402
from tessera.serve.llm import (LLMConfig, LLMServer, LLMServingArgs,  # noqa: E402
                               build_llm_deployment, build_openai_app, config as llm_config)
from tessera.serve.llm import make_demo_model, server as server_module  # noqa: E402
from tessera.serve.llm.builders import deployment_name  # noqa: E402
from tessera.serve.llm.async_engine import AsyncLLMEngine  # noqa: E402
from tessera.serve.llm.engine import EngineConfig, LLMEngine  # noqa: E402
from tessera.serve.llm.tiny_model import TinyConfig, random_model, save_model  # noqa: E402
from tessera.serve.llm.tokenizer import ByteTokenizer  # noqa: E402

HERE = Path(__file__).resolve().parent
TOKENIZER = ByteTokenizer()
SMALL = TinyConfig(vocab_size=TOKENIZER.vocab_size, d_model=32, n_layers=2, n_heads=2, d_ff=64,
                   max_position=128)
MESSAGES = [{"role": "user", "content": "Hello there"}]
GREEDY = {"temperature": 0, "ignore_eos": True}


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 60))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny")
    save_model(str(path), random_model(SMALL, seed=3), TOKENIZER)
    return str(path)


def tiny_config(model_dir, model_id="tiny", **fields):
    return LLMConfig(model_loading_config={"model_id": model_id, "model_source": model_dir},
                     llm_engine="tessera", **fields)


# ---- stand-ins for DeploymentHandles --------------------------------------------------------

class ResponseStream:
    """What `handle.options(stream=True).method.remote(...)` returns: an async iterator of the
    remote generator's items, produced by a task of its own (as a remote replica runs on its
    own), stopped by cancel()."""

    def __init__(self, generator):
        self._queue = asyncio.Queue()
        self.cancelled = False
        self._task = asyncio.ensure_future(self._pump(generator))

    async def _pump(self, generator):
        try:
            async for item in generator:
                self._queue.put_nowait(("item", item))
        except Exception as e:
            self._queue.put_nowait(("error", e))
            return
        self._queue.put_nowait(("end", None))

    def __aiter__(self):
        return self

    async def __anext__(self):
        kind, value = await self._queue.get()
        if kind == "end":
            raise StopAsyncIteration
        if kind == "error":
            raise value
        return value

    def cancel(self):
        self.cancelled = True
        self._task.cancel()


class Handle:
    """A DeploymentHandle stand-in over an object in this process: `options(...)` and
    `handle.method.remote(...)` as Ray's; records each call's options."""

    def __init__(self, target, method=None, options=None, calls=None):
        self.target, self.method = target, method
        self.handle_options = dict(options or {})
        self.calls = calls if calls is not None else []

    def options(self, **options):
        return Handle(self.target, self.method, {**self.handle_options, **options}, self.calls)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return Handle(self.target, name, self.handle_options, self.calls)

    def remote(self, *args, **kwargs):
        self.calls.append((self.method, self.handle_options, args))
        assert self.handle_options.get("stream") is True
        stream = ResponseStream(getattr(self.target, self.method)(*args, **kwargs))
        self.calls[-1] += (stream,)
        return stream


def ingress_replica(app, handles):
    """The ReplicaActor of an application's ingress, its code and args through pickling (as a
    replica elsewhere gets them), its bound deployments' handles from `handles` by name."""
    built = build.build_application(app, "llm", "/")
    spec = pickle.loads(build.replica_spec(built.deployment(built.ingress_deployment_name), "r1"))
    spec["make_handle"] = lambda app_name, name: handles[name]
    return ReplicaActor(spec)


class App:
    """An OpenAI app over LLMServers of `configs` (or given servers), reached over frames."""

    def __init__(self, configs, servers=None, handles=None):
        self.servers = ({c.model_id: LLMServer(c) for c in configs} if servers is None
                        else servers)
        names = {c.model_id: "LLMServer:" + deployment_name(c) for c in configs}
        self.handles = ({names[m]: Handle(s) for m, s in self.servers.items()}
                        if handles is None else handles)
        self.replica = ingress_replica(build_openai_app({"llm_configs": configs}), self.handles)

    def shutdown(self):
        for server in self.servers.values():
            server.shutdown()


def frame(method, path, body=b"", headers=()):
    return _http.encode_frame({
        "method": method, "path": path, "raw_path": path, "query_string": "",
        "headers": [["content-type", "application/json"], *headers], "http_version": "1.1",
        "route_prefix": "/", "request_id": "req-1", "client": ["127.0.0.1", 5555],
        "multiplexed_model_id": ""}, body)


class Response:
    def __init__(self, items):
        first = items[0]
        length = int.from_bytes(first[:4], "big")
        head = json.loads(first[4:4 + length])
        self.status = head["status"]
        self.headers = dict(head["headers"])
        self.body = first[4 + length:] + b"".join(items[1:])

    def json(self):
        return json.loads(self.body)

    def events(self):
        """The SSE events: parsed JSON, or the text "[DONE]"."""
        text = self.body.decode("utf-8")
        assert text.endswith("\n\n"), text[-200:]
        events = []
        for block in text.split("\n\n")[:-1]:
            assert block.startswith("data: "), block
            data = block[len("data: "):]
            events.append(data if data == "[DONE]" else json.loads(data))
        return events


async def request(app, method, path, body=None, raw=None):
    payload = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
    return Response([item async for item in app.replica.handle_http(frame(method, path,
                                                                            payload))])


async def wait_until(predicate, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


@pytest.fixture(scope="module")
def app(model_dir):
    served = App([tiny_config(model_dir)])
    yield served
    served.shutdown()


def chat_body(**fields):
    return {"model": "tiny", "messages": MESSAGES, "max_tokens": 6, **GREEDY, **fields}


# ---- routes ---------------------------------------------------------------------------------

def test_models_lists_the_served_model_and_finds_its_card(app):
    listing = run(request(app, "GET", "/v1/models"))
    assert listing.status == 200
    body = listing.json()
    assert body["object"] == "list" and [c["id"] for c in body["data"]] == ["tiny"]
    card = body["data"][0]
    assert list(card) == ["id", "object", "created", "owned_by"]
    assert card["object"] == "model" and isinstance(card["created"], int)
    one = run(request(app, "GET", "/v1/models/tiny"))
    assert (one.status, one.json()) == (200, card)
    missing = run(request(app, "GET", "/v1/models/other"))
    assert (missing.status, missing.json()) == (404, {"error": {
        "message": "Unable to find other. Please ensure that the model exists and you have "
                   "permission.", "type": "InvalidModel", "param": None, "code": 404}})


def test_a_chat_completion_stops_at_max_tokens_with_its_usage(app):
    response = run(request(app, "POST", "/v1/chat/completions", chat_body()))
    assert response.status == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert list(body) == ["id", "object", "created", "model", "choices", "usage"]
    assert body["id"].startswith("chatcmpl-") and body["object"] == "chat.completion"
    assert body["model"] == "tiny"
    [choice] = body["choices"]
    assert list(choice) == ["index", "message", "logprobs", "finish_reason", "stop_reason"]
    assert choice["index"] == 0 and choice["message"]["role"] == "assistant"
    assert (choice["finish_reason"], choice["stop_reason"]) == ("length", None)
    prompt_tokens = len(TOKENIZER.encode(TOKENIZER.apply_chat_template(MESSAGES)))
    assert body["usage"] == {"prompt_tokens": prompt_tokens, "completion_tokens": 6,
                             "total_tokens": prompt_tokens + 6}
    # No model named: the only one serves it.
    again = run(request(app, "POST", "/v1/chat/completions",
                        {k: v for k, v in chat_body().items() if k != "model"}))
    assert again.json()["choices"][0]["message"] == choice["message"]


def test_n_choices_each_have_an_index_and_count_in_the_usage(app):
    body = run(request(app, "POST", "/v1/chat/completions",
                       chat_body(n=2, temperature=1.0, seed=7))).json()
    assert [c["index"] for c in body["choices"]] == [0, 1]
    prompt_tokens = body["usage"]["prompt_tokens"]
    assert body["usage"] == {"prompt_tokens": prompt_tokens, "completion_tokens": 12,
                             "total_tokens": prompt_tokens + 12}


def test_a_streamed_chat_sends_the_role_then_deltas_then_usage_then_done_once(app):
    whole = run(request(app, "POST", "/v1/chat/completions", chat_body())).json()
    response = run(request(app, "POST", "/v1/chat/completions", chat_body(
        stream=True, stream_options={"include_usage": True})))
    assert response.status == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = response.events()
    assert events[-1] == "[DONE]" and events.count("[DONE]") == 1
    chunks = events[:-1]
    assert len({c["id"] for c in chunks}) == 1 and chunks[0]["id"].startswith("chatcmpl-")
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "tiny" for c in chunks)
    usage_chunk, deltas = chunks[-1], chunks[:-1]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"] == whole["usage"]
    assert all(c["usage"] is None for c in deltas)
    assert deltas[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [c["choices"][0]["finish_reason"] for c in deltas] == [None] * (len(deltas) - 1) + [
        "length"]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in deltas)
    assert text == whole["choices"][0]["message"]["content"]


def test_streamed_choices_open_with_a_role_each_and_count_usage_as_they_go(app):
    events = run(request(app, "POST", "/v1/chat/completions", chat_body(
        n=2, temperature=1.0, seed=3, stream=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True}))).events()
    chunks = events[:-1]
    prompt_tokens = chunks[-1]["usage"]["prompt_tokens"]
    assert [(c["choices"][0]["index"], c["choices"][0]["delta"]) for c in chunks[:2]] == [
        (0, {"role": "assistant", "content": ""}), (1, {"role": "assistant", "content": ""})]
    assert chunks[0]["usage"] == {"prompt_tokens": prompt_tokens, "completion_tokens": 0,
                                  "total_tokens": prompt_tokens}
    for index in (0, 1):
        mine = [c for c in chunks[2:-1] if c["choices"][0]["index"] == index]
        assert mine[-1]["choices"][0]["finish_reason"] == "length"
        assert mine[-1]["usage"]["completion_tokens"] == 6  # this choice's tokens so far
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 12


def test_a_streamed_completion_sends_text_pieces_and_done(app):
    body = {"model": "tiny", "prompt": "Once", "max_tokens": 5, **GREEDY}
    whole = run(request(app, "POST", "/v1/completions", body)).json()
    assert whole["object"] == "text_completion" and whole["id"].startswith("cmpl-")
    assert whole["usage"]["completion_tokens"] == 5
    assert list(whole["choices"][0]) == ["index", "text", "logprobs", "finish_reason",
                                         "stop_reason"]
    events = run(request(app, "POST", "/v1/completions", dict(body, stream=True))).events()
    assert events[-1] == "[DONE]" and events.count("[DONE]") == 1
    chunks = events[:-1]
    assert all(c["object"] == "text_completion" and "usage" not in c for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]
    # Two prompts: a choice each, each prompt's tokens counted once.
    two = run(request(app, "POST", "/v1/completions", dict(body, prompt=["a", "bc"]))).json()
    assert [c["index"] for c in two["choices"]] == [0, 1]
    assert two["usage"]["prompt_tokens"] == 2 + 3 and two["usage"]["completion_tokens"] == 10


def test_a_malformed_request_is_ray_s_400_and_reaches_no_model(app):
    calls = len(app.handles["LLMServer:tiny"].calls)
    response = run(request(app, "POST", "/v1/chat/completions", chat_body(temperature=3)))
    assert (response.status, response.json()) == (400, {"error": {
        "message": "Invalid request format: Input should be less than or equal to 2 at "
                   "('body', 'temperature')",
        "type": "less_than_equal", "param": 3, "code": "invalid_parameter"}})
    not_json = run(request(app, "POST", "/v1/completions", raw=b"{nope"))
    assert not_json.status == 400 and not_json.json()["error"]["type"] == "json_invalid"
    assert len(app.handles["LLMServer:tiny"].calls) == calls


def test_unknown_models_and_adapters_are_404(app):
    unknown = run(request(app, "POST", "/v1/completions", {"model": "big", "prompt": "x"}))
    assert (unknown.status, unknown.json()) == (404, {"error": {
        "message": 'Got request for model "big". Could not find base model with ID "big". '
                   "(Request ID: req-1)", "type": "HTTPException", "param": None, "code": 404}})
    adapter = run(request(app, "POST", "/v1/completions", {"model": "tiny:lora", "prompt": "x"}))
    assert (adapter.status, adapter.json()) == (404, {"error": {
        "message": "The model `tiny:lora` does not exist.", "type": "NotFoundError",
        "param": None, "code": 404}})
    method, options, _, _ = app.handles["LLMServer:tiny"].calls[-1]
    assert (method, options) == ("completions", {"stream": True,
                                                 "multiplexed_model_id": "tiny:lora"})


def test_a_prompt_the_engine_refuses_is_a_plain_400(app):
    response = run(request(app, "POST", "/v1/completions",
                           {"prompt": "x" * 200, "stream": True}))
    assert response.status == 400
    error = response.json()["error"]
    assert error["type"] == "BadRequestError" and "maximum model length" in error["message"]


def test_several_models_need_a_model_name(model_dir):
    served = App([tiny_config(model_dir, "a/b.c"), tiny_config(model_dir, "d")])
    try:
        missing = run(request(served, "POST", "/v1/completions", {"prompt": "x"}))
        assert missing.status == 400
        assert missing.json()["error"]["message"].startswith(
            "Model parameter is required when multiple models are configured. Available "
            "models: ['a/b.c', 'd']")
        assert [c["id"] for c in run(request(served, "GET", "/v1/models")).json()["data"]] == [
            "a/b.c", "d"]
        assert run(request(served, "GET", "/v1/models/a--b.c")).json()["id"] == "a/b.c"
        body = {"model": "a/b.c", "prompt": "x", "max_tokens": 2, **GREEDY}
        assert run(request(served, "POST", "/v1/completions", body)).json()["model"] == "a/b.c"
        assert served.handles["LLMServer:a--b_c"].calls and not served.handles[
            "LLMServer:d"].calls
    finally:
        served.shutdown()


# ---- failures, cancellation, timeouts -------------------------------------------------------

def gated_server(model_dir, **config_fields):
    """An LLMServer whose engine takes one permit per step."""
    permits = threading.Semaphore(0)
    engine = LLMEngine(model_dir, EngineConfig(model_name="tiny"))
    step = engine.step
    engine.step = lambda: (permits.acquire(), step())[1]
    return LLMServer(tiny_config(model_dir, **config_fields), engine=AsyncLLMEngine(engine)), \
        engine, permits


def test_a_client_that_goes_away_aborts_the_generation(model_dir):
    server, engine, permits = gated_server(
        model_dir, experimental_configs={"stream_batching_interval_ms": 0})
    served = App([tiny_config(model_dir)], servers={"tiny": server})

    async def main():
        permits.release(1)
        items = served.replica.handle_http(frame("POST", "/v1/chat/completions", json.dumps(
            chat_body(max_tokens=100, stream=True)).encode()))
        head = await items.__anext__()
        assert b'"status":200' in head and b'"role":"assistant"' in head
        await items.aclose()  # the proxy lost its client
        stream = served.handles["LLMServer:tiny"].calls[-1][-1]
        assert stream.cancelled
        permits.release(1000)
        await wait_until(lambda: engine.metrics.request_success.value(
            engine.metrics.finished_labels("abort")) == 1, "the abort")
        await wait_until(lambda: not engine.has_unfinished_requests(), "an idle engine")

    try:
        run(main())
    finally:
        permits.release(1000)
        served.shutdown()
    assert engine.allocator.usage() == 0.0


class Silent:
    """A model that never answers."""

    async def chat(self, body):
        await asyncio.Event().wait()
        yield {}


def test_no_first_item_within_the_router_timeout_is_408(model_dir, monkeypatch):
    monkeypatch.setenv("RAY_SERVE_LLM_ROUTER_HTTP_TIMEOUT", "0.05")
    handles = {"LLMServer:tiny": Handle(Silent())}
    served = App([tiny_config(model_dir)], servers={}, handles=handles)
    response = run(request(served, "POST", "/v1/chat/completions", chat_body()))
    assert (response.status, response.json()) == (408, {"error": {
        "message": "Request server side timeout (Request ID: req-1)",
        "type": "OpenAIHTTPException", "param": None, "code": 408}})
    assert handles["LLMServer:tiny"].calls[-1][-1].cancelled


def test_engine_failures_are_a_plain_error_first_and_in_band_later(model_dir):
    server, engine, permits = gated_server(
        model_dir, experimental_configs={"stream_batching_interval_ms": 0})
    served = App([tiny_config(model_dir)], servers={"tiny": server})
    step = engine.step
    steps = []

    def failing_step():
        steps.append(1)
        if len(steps) == 3:
            raise RuntimeError("the device fell over")
        return step()

    engine.step = failing_step
    permits.release(1000)
    try:
        response = run(request(served, "POST", "/v1/chat/completions",
                               chat_body(max_tokens=50, stream=True)))
        assert response.status == 200
        events = response.events()
        assert events[-1] == "[DONE]" and events.count("[DONE]") == 1
        error = events[-2]["error"]
        assert (error["code"], error["type"]) == (500, "EngineDeadError")
        assert events[0]["choices"][0]["delta"]["role"] == "assistant"
        with pytest.raises(RuntimeError, match="is not running"):
            run(server.check_health())
        # The engine is gone: the first item is the error, a plain JSON response.
        dead = run(request(served, "POST", "/v1/chat/completions", chat_body(stream=True)))
        assert dead.status == 500 and dead.json()["error"]["type"] == "EngineDeadError"
    finally:
        served.shutdown()


def test_stream_batching_sends_the_first_event_alone_then_what_gathered():
    from tessera.serve.llm._streams import batched

    async def main():
        more = asyncio.Event()

        async def source(fail):
            yield "a"
            await more.wait()
            yield "b"
            yield "c"
            if fail:
                raise ValueError("broken")

        items = []
        # A long interval: the batcher wakes when the source ends, not when it elapses.
        async for item in batched(source(False), interval_s=60):
            items.append(item)
            more.set()
        assert items == ["a", "bc"]
        more.clear()
        items = []
        with pytest.raises(ValueError, match="broken"):
            async for item in batched(source(True), interval_s=60):
                items.append(item)
                more.set()
        assert items == ["a", "bc"]
        assert [i async for i in batched(source(False), interval_s=0)] == ["a", "b", "c"]

    run(main())


# ---- the server's own surface ---------------------------------------------------------------

def test_metrics_text_is_ray_s_vllm_series_with_the_replica_id(model_dir):
    server = LLMServer(tiny_config(model_dir))
    quiet = LLMServer(tiny_config(model_dir, log_engine_metrics=False))
    try:
        async def main():
            return [item async for item in server.completions(
                {"prompt": "ab", "max_tokens": 4, **GREEDY})]
        [response] = run(main())
        assert response["usage"]["completion_tokens"] == 4
        replica = context.ReplicaContext(
            context.ReplicaID("x1", context.DeploymentID("LLMServer:tiny", "llm")), server)
        scoped = contextvars.copy_context()
        scoped.run(context._set_internal_replica_context, replica)
        text = scoped.run(server.metrics_text)
        assert ('ray_vllm_generation_tokens_total{ReplicaId="llm#LLMServer:tiny#x1",'
                'engine="0",model_name="tiny"} 4.0') in text
        assert "# TYPE ray_vllm_time_to_first_token_seconds histogram" in text
        assert quiet.metrics_text() == ""
        assert run(server.models())["data"][0]["id"] == "tiny"
        run(server.check_health())
    finally:
        server.shutdown()
        quiet.shutdown()


def test_the_demo_model_is_made_once_in_a_private_cache(tmp_path, monkeypatch):
    state = tmp_path / "state"
    monkeypatch.setenv("TESSERA_STATE_DIR", str(state))
    made = []

    def fake_training(out_dir, steps):  # the real one trains for a minute
        made.append(out_dir)
        save_model(out_dir, random_model(SMALL, seed=5), TOKENIZER)
    monkeypatch.setattr(make_demo_model, "make_demo_model", fake_training)
    config = LLMConfig(model_loading_config={"model_id": "demo", "model_source": "tessera-demo"},
                       llm_engine="tessera")
    for _ in range(2):
        LLMServer(config).shutdown()
    assert made == [str(state / "models" / "tessera-demo")]
    for folder in (state, state / "models"):
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    monkeypatch.delenv("TESSERA_STATE_DIR")
    assert server_module.model_cache_dir() == os.path.expanduser("~/.cache/tessera/models")
    with pytest.raises(ValueError, match="is not a model folder"):
        LLMServer(LLMConfig(model_loading_config={"model_id": "m",
                                                  "model_source": str(tmp_path)},
                            llm_engine="tessera"))


# ---- builders -------------------------------------------------------------------------------

def options_of(app):
    deployment = app._bound_deployment
    return deployment.name, deployment._options


def test_llm_deployments_are_named_after_the_model_with_serve_llm_defaults(monkeypatch):
    monkeypatch.setattr(llm_config, "vllm_available", lambda: True)
    gpu = LLMConfig(model_loading_config={"model_id": "Qwen/Qwen2.5-0.5B"},
                    accelerator_type="L4", engine_kwargs={"tensor_parallel_size": 2},
                    deployment_config={"max_ongoing_requests": 64},
                    runtime_env={"env_vars": {"A": "1"}})
    name, options = options_of(build_llm_deployment(gpu))
    assert name == "LLMServer:Qwen--Qwen2_5-0_5B"
    assert options["placement_group_bundles"] == [
        {"GPU": 1.0, "accelerator_type:L4": 0.001, "CPU": 1.0},
        {"GPU": 1.0, "accelerator_type:L4": 0.001}]
    assert options["placement_group_strategy"] == "PACK"
    assert options["max_ongoing_requests"] == 64  # the user's, over the default 1e9
    assert (options["health_check_period_s"], options["health_check_timeout_s"]) == (10, 10)
    assert options["autoscaling_config"].target_ongoing_requests == 1e9
    assert options["ray_actor_options"]["runtime_env"] == {"env_vars": {"A": "1"}}
    assert build_llm_deployment(gpu)._bound_deployment.init_kwargs == {"llm_config": gpu}

    name, options = options_of(build_llm_deployment(
        gpu, name_prefix="Pre:", override_serve_options={"num_replicas": 2}))
    assert (name, options["num_replicas"]) == ("Pre:Qwen--Qwen2_5-0_5B", 2)
    assert "autoscaling_config" not in options  # num_replicas drops the autoscaling default
    assert options_of(build_llm_deployment(gpu))[1]["max_ongoing_requests"] == 64

    tpu = LLMConfig(model_loading_config={"model_id": "llama"}, accelerator_type="TPU-V6E",
                    accelerator_config={"kind": "tpu", "topology": "4x4"},
                    engine_kwargs={"tensor_parallel_size": 16})
    name, options = options_of(build_llm_deployment(tpu))
    assert name == "LLMServer:llama" and options["max_ongoing_requests"] == int(1e9)
    # The slice is the replica's: one bundle per host, which the controller reserves whole when
    # it starts the replica (the replica actor in host 0's bundle); not a placement group.
    assert "placement_group_bundles" not in options
    assert llm_config.placement_bundles(tpu) == (
        [{"TPU": 4.0, "accelerator_type:TPU-V6E": 0.001}] * 4, "SPREAD")
    built = build.build_application(build_llm_deployment(tpu), "llm", "/")
    spec = built.deployment("LLMServer:llama").spec
    assert spec["replica_slice"] == {"accelerator_type": "TPU-V6E", "topology": "4x4",
                                     "sub_slice": False}
    # Another slice is another replica: the code version (a rolling update) changes with it.
    other = LLMConfig.parse(dict(tpu.to_dict(), accelerator_config={
        "kind": "tpu", "topology": "4x4", "sub_slice": True}))
    respec = build.build_application(build_llm_deployment(other), "llm", "/")
    assert respec.deployment("LLMServer:llama").spec["code_version"] != spec["code_version"]
    builtin = LLMConfig(model_loading_config={"model_id": "m"}, llm_engine="tessera")
    assert "placement_group_bundles" not in options_of(build_llm_deployment(builtin))[1]
    assert build_llm_deployment(builtin)._bound_deployment._replica_slice is None
    with pytest.raises(ValueError, match="cannot also have placement_group_bundles"):
        build.build_application(build_llm_deployment(
            tpu, override_serve_options={"placement_group_bundles": [{"CPU": 1}]}), "llm", "/")


def test_the_deploy_request_carries_the_slice_with_the_replica_s_resources_per_host(monkeypatch):
    from tessera import _core
    from tessera.serve import api as serve_api
    from tessera.serve.schema import DeploymentSchema

    asked = []

    def parsed(accelerator_type, topology, per_host, sub_slice):  # the binding's parse
        asked.append((accelerator_type, topology, per_host, sub_slice))
        return json.dumps({"shape": {"generation": "TPU_GENERATION_V6E", "dims": [4, 4]},
                           "per_host": per_host})

    monkeypatch.setattr(_core, "serve_replica_slice", parsed, raising=False)
    tpu = LLMConfig(model_loading_config={"model_id": "llama"}, accelerator_type="TPU-V6E",
                    accelerator_config={"kind": "tpu", "topology": "4x4"},
                    engine_kwargs={"tensor_parallel_size": 16})
    app = build_llm_deployment(tpu)
    # A config file's options over the code's: the slice stays, and carries their resources.
    built = build.build_application(app, "llm", "/", deployment_overrides=[DeploymentSchema(
        name="LLMServer:llama", ray_actor_options={"num_cpus": 2})])
    message = serve_api._deployment_message(built.deployment("LLMServer:llama"))
    assert asked == [("TPU-V6E", "4x4", {"CPU": 2.0}, False)]
    assert message["resources"]["slice"] == {
        "shape": {"generation": "TPU_GENERATION_V6E", "dims": [4, 4]}, "per_host": {"CPU": 2.0}}
    assert "placement_group_bundles" not in message["resources"]


def test_a_slice_model_outside_a_slice_replica_says_how_to_deploy_it(model_dir, monkeypatch):
    monkeypatch.delenv("TESSERA_SERVE_REPLICA_SLICE", raising=False)
    config = tiny_config(model_dir, accelerator_type="TPU-V6E",
                         accelerator_config={"kind": "tpu", "topology": "4x4"},
                         engine_kwargs={"tensor_parallel_size": 4, "pipeline_parallel_size": 4})
    with pytest.raises(ValueError, match="its replica was given none: deploy it with "
                                         "build_llm_deployment"):
        LLMServer(config)


def test_the_openai_app_binds_one_llm_deployment_per_model(tmp_path, model_dir):
    yaml_path = tmp_path / "model.yaml"
    yaml_path.write_text(json.dumps({"model_loading_config": {"model_id": "from-yaml"},
                                     "llm_engine": "tessera",
                                     "deployment_config": {"autoscaling_config": {
                                         "min_replicas": 0, "max_replicas": 2}}}))
    app = build_openai_app(LLMServingArgs(
        llm_configs=[str(yaml_path), {"model_loading_config": {"model_id": "b.1"},
                                      "deployment_config": {"autoscaling_config": {
                                          "min_replicas": 0}}}],
        ingress_deployment_config={"max_ongoing_requests": 100}))
    built = build.build_application(app, "llm", "/")
    assert [d.name for d in built.deployments] == ["LLMServer:from-yaml", "LLMServer:b_1",
                                                   "OpenAiIngress"]
    ingress = built.deployment("OpenAiIngress").spec
    assert ingress["is_asgi"] and ingress["handle_dependencies"] == ["LLMServer:from-yaml",
                                                                     "LLMServer:b_1"]
    options = ingress["options"]
    assert options["max_ongoing_requests"] == 100
    assert options["autoscaling_config"]["min_replicas"] == 0  # every model may scale to zero
    assert options["autoscaling_config"]["target_ongoing_requests"] == 1e9
    server = built.deployment("LLMServer:from-yaml").spec["options"]["autoscaling_config"]
    assert (server["min_replicas"], server["max_replicas"]) == (0, 2)
    bad = [
        ({"llm_configs": []}, "List of models is empty"),
        ({"llm_configs": [str(tmp_path / "missing.yaml")]}, "does not exist"),
        ({"llm_configs": [tiny_config(model_dir), tiny_config(model_dir)]}, "Duplicate models"),
        ({"llm_configs": [tiny_config(model_dir)], "colour": 1}, "unknown field"),
    ]
    for args, message in bad:
        with pytest.raises(ValueError, match=message):
            build_openai_app(args)


# ---- the official OpenAI client -------------------------------------------------------------

NPM_PREFIX = os.environ.get("TESSERA_NPM_PREFIX", "/usr/local/lib/tessera-npm")


def asgi_over(replica):
    """An ASGI app that sends each request to `replica` as the proxy does (frames)."""

    async def app(scope, receive, send):
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        items = replica.handle_http(_http.encode_frame({
            "method": scope["method"], "path": scope["path"],
            "raw_path": scope["raw_path"].decode("latin-1"),
            "query_string": scope["query_string"].decode("latin-1"),
            "headers": [[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]],
            "http_version": scope["http_version"], "route_prefix": "/", "request_id": "",
            "client": list(scope["client"]), "multiplexed_model_id": ""}, body))
        try:
            first = await items.__anext__()
            length = int.from_bytes(first[:4], "big")
            head = json.loads(first[4:4 + length])
            await send({"type": "http.response.start", "status": head["status"],
                        "headers": [(k.encode(), v.encode()) for k, v in head["headers"]]})
            await send({"type": "http.response.body", "body": first[4 + length:],
                        "more_body": head["more"]})
            if head["more"]:
                async for item in items:
                    await send({"type": "http.response.body", "body": item, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await items.aclose()

    return app


@pytest.mark.skipif(shutil.which("node") is None or not os.path.isdir(
    os.path.join(NPM_PREFIX, "node_modules", "openai")),
    reason="needs node and the openai npm package (scripts/setup installs it)")
def test_the_official_openai_client_agrees_with_the_routes(app):
    uvicorn = pytest.importorskip("uvicorn")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(asgi_over(app.replica), lifespan="off",
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
            time.sleep(0.02)
        port = listener.getsockname()[1]
        result = subprocess.run(["node", str(HERE / "openai_client.mjs"),
                                 f"http://127.0.0.1:{port}", "tiny"],
                                capture_output=True, text=True, timeout=120)
    finally:
        server.should_exit = True
        thread.join(20)
        listener.close()
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["ok"] and summary["models"] == ["tiny"]
    assert summary["chat"]["finish_reason"] == "length"
    assert summary["chat"]["usage"]["completion_tokens"] == 8
    assert summary["completion"]["usage"]["completion_tokens"] == 8

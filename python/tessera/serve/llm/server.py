"""`LLMServer`, the deployment class that serves one model (Ray Serve LLM's LLMServer): it starts
the built-in engine over the model of its LLMConfig and answers OpenAI chat and completion
requests from the ingress (tessera.serve.llm.ingress) or any DeploymentHandle.

    server = LLMServer(LLMConfig(model_loading_config={"model_id": "demo",
                                                      "model_source": "tessera-demo"}))
    async for item in server.chat({"messages": [{"role": "user", "content": "Hi"}]}):
        ...

`chat(body)` and `completions(body)` are async generators over the request's JSON body (a
dict): the first item is a dict when the request fails before any output (an OpenAI error body,
{"error": {"message", "type", "param", "code"}}, `code` its HTTP status) or when it does not
stream (the whole chat.completion / text_completion response); a streaming request yields
server-sent-event text: `data: <chunk json>\\n\\n` events, several per item (Ray's stream
batching: the first event as soon as it is ready, then every
RAYLLM_MODEL_RESPONSE_BATCH_TIMEOUT_MS, 50 ms, or experimental_configs'
stream_batching_interval_ms), ending with `data: [DONE]\\n\\n`. An error after the stream
started is an in-band error event before [DONE]. Closing or cancelling a generator aborts its
engine requests.

Models: model_source "tessera-demo" is the demo model, trained once per machine into
`model_cache_dir()` ($TESSERA_STATE_DIR/models, else ~/.cache/tessera/models, folders made
0700; a file lock makes one process train while the others wait); any other model_source is a
model folder made by `python3 -m tessera.serve.llm.make_demo_model DIR` (or
tiny_model.save_model). Only the built-in engine runs here: a config that selects vLLM fails
when the replica starts.

On a TPU slice (a config with a TPU topology, deployed by build_llm_deployment or
build_openai_app, whose deployment has the serve controller reserve a slice per replica and
place the replica in host 0's bundle): the server starts one engine worker actor per host of
its slice, in that host's bundle with its chips, and runs the model split across them, a
pipeline stage per host (pipeline.py; config.builtin_stages: pipeline_parallel_size = hosts,
tensor_parallel_size = chips per host). The replica keeps the scheduler and its block
accounting, and drives each step through the stages; the tokens are those of the engine in one
process. `engine_layout()` says where it all runs. A worker that dies fails the server's
check_health (the controller then replaces the replica, and the new one takes a slice again);
the workers end with the replica (shutdown ends them, and the slice's release would).

Deployment options (`get_deployment_options`, what build_llm_deployment uses): the config's
deployment_config, its runtime_env over ray_actor_options' one, and, when the engine needs
more than the replica's own resources, the placement group bundles of config.placement_bundles.
A TPU slice is not one of them: it is the deployment's replica slice (config.replica_slice),
which build_llm_deployment sets.

Threading: the methods run on the replica's event loop; the engine steps on its own thread.
Cost: per request, one engine request per choice; per streamed token one SSE event; on a slice,
per engine step one actor call per host.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import fcntl
import logging
import os
import time
from typing import Any, AsyncGenerator, Dict, List, Mapping, Optional, Union

from tessera.serve import _replica_metrics
from tessera.serve import context as serve_context
from tessera.serve._constants import SERVE_LOGGER_NAME
from tessera.serve.llm import _constants, _streams
from tessera.serve.llm import openai_protocol as proto
from tessera.serve.llm.config import (ENGINE_BUILTIN, LLMConfig, builtin_stages,
                                      placement_bundles, replica_actor_resources,
                                      tpu_slice_shape)

logger = logging.getLogger(SERVE_LOGGER_NAME)

SSE_DONE = proto.SSE_DONE.decode("ascii")
_LOCK_FILE = ".tessera-demo-model.lock"


# ---- where models are -----------------------------------------------------------------------

def model_cache_dir() -> str:
    """The folder of cached models: $TESSERA_STATE_DIR/models, else ~/.cache/tessera/models."""
    state = os.environ.get("TESSERA_STATE_DIR")
    if state:
        return os.path.join(state, "models")
    return os.path.join(os.path.expanduser("~"), ".cache", "tessera", "models")


def _make_private_dirs(path: str) -> None:
    """Makes `path` and any missing parent, each made 0700 (the model cache is the user's)."""
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent and parent != path:
        _make_private_dirs(parent)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass  # made by another process meanwhile


def demo_model_dir() -> str:
    """The demo model's folder in the cache, trained there first if it is not yet (one process
    trains; the others wait on a lock)."""
    from tessera.serve.llm.make_demo_model import ensure_demo_model

    cache = model_cache_dir()
    _make_private_dirs(cache)
    path = os.path.join(cache, _constants.DEMO_MODEL_SOURCE)
    with open(os.path.join(cache, _LOCK_FILE), "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        return ensure_demo_model(path)


def resolve_model_source(model_source: str) -> str:
    """The model folder the built-in engine loads for `model_source` (see the module doc)."""
    from tessera.serve.llm.tiny_model import is_model_dir

    if model_source == _constants.DEMO_MODEL_SOURCE:
        return demo_model_dir()
    if not is_model_dir(model_source):
        raise ValueError(f"model_source {model_source!r} is not a model folder of the built-in "
                         "engine (make one with `python3 -m tessera.serve.llm.make_demo_model "
                         f"DIR`), nor {_constants.DEMO_MODEL_SOURCE!r}")
    return model_source


# ---- the deployment -------------------------------------------------------------------------

@dataclasses.dataclass
class _Generation:
    """One request running in the engine: one stream per choice; choice i answers prompt
    prompt_of[i] (completions take several prompts, each with n choices)."""

    kind: str
    request: proto.ParsedRequest
    response_id: str
    created: int
    streams: List[Any]
    prompt_of: List[int]


def _serve_request_id() -> str:
    return serve_context._get_serve_request_context().request_id


class LLMServer:
    """Serves one model (see the module doc). `engine`: an AsyncLLMEngine to serve instead of
    starting one from the config (tests, embedding)."""

    def __init__(self, llm_config: Union[LLMConfig, Mapping[str, Any]], *,
                 engine: Any = None) -> None:
        self._llm_config = LLMConfig.parse(llm_config)
        self._engine = engine if engine is not None else self._start_engine()
        self._created = int(time.time())
        if serve_context._get_internal_replica_context() is not None:
            # The serve controller relays them on the head's /metrics (held weakly).
            _replica_metrics.add_source(self.metrics_text)
        interval_ms = self._llm_config.experimental_configs.get("stream_batching_interval_ms")
        if interval_ms is None:
            interval_ms = _constants.model_response_batch_timeout_ms()
        self._batch_interval_s = float(interval_ms) / 1000.0

    def _start_engine(self) -> Any:
        config = self._llm_config
        if config.engine() != ENGINE_BUILTIN:
            raise ValueError(f"Model {config.model_id!r} selects the vLLM engine, which this "
                             "LLMServer does not run; set llm_engine='tessera' for the built-in "
                             "engine")
        from tessera.serve.llm.async_engine import AsyncLLMEngine
        from tessera.serve.llm.engine import EngineConfig, LLMEngine

        engine_config, ignored = EngineConfig.from_engine_kwargs(config.engine_kwargs,
                                                                 config.model_id)
        if ignored:
            logger.warning("The built-in engine ignores engine_kwargs %s of model %r", ignored,
                           config.model_id)
        num_stages, chips_per_host = builtin_stages(config)
        model_dir = resolve_model_source(config.model_source)
        if chips_per_host == 0:
            return AsyncLLMEngine(LLMEngine(model_dir, engine_config))
        return AsyncLLMEngine(self._pipelined_engine(model_dir, engine_config, num_stages,
                                                     chips_per_host))

    def _pipelined_engine(self, model_dir: str, engine_config: Any, num_stages: int,
                          chips_per_host: int) -> Any:
        """The engine over one engine worker per host of this replica's slice (pipeline.py)."""
        from tessera.serve.llm.engine import LLMEngine
        from tessera.serve.llm.pipeline import ActorStages, start_engine_workers
        from tessera.serve.llm.tiny_model import load_model_config

        model_id = self._llm_config.model_id
        replica_slice = serve_context._get_replica_slice()
        if replica_slice is None:
            raise ValueError(f"Model {model_id!r} runs on a TPU slice, but its replica was "
                             "given none: deploy it with build_llm_deployment or "
                             "build_openai_app, whose deployment reserves one per replica")
        if replica_slice.num_hosts != num_stages:
            raise ValueError(f"Model {model_id!r} runs one pipeline stage per host on "
                             f"{num_stages} hosts, but its replica's slice {replica_slice.name} "
                             f"has {replica_slice.num_hosts}")
        shape, tokenizer, _ = load_model_config(model_dir)
        workers = start_engine_workers(replica_slice, chips_per_host, model_dir,
                                       engine_config.num_kv_blocks, engine_config.block_size)
        self._stages = ActorStages(workers)
        logger.info("Model %r runs in %d stages over slice %s", model_id, num_stages,
                    replica_slice.name)
        return LLMEngine(shape, engine_config, tokenizer, stages=self._stages)

    @property
    def model_id(self) -> str:
        return self._llm_config.model_id

    # ---- requests ------------------------------------------------------------------------

    async def chat(self, request: Mapping[str, Any]) -> AsyncGenerator[Union[dict, str], None]:
        """A /v1/chat/completions body's response items (see the module doc)."""
        async with contextlib.aclosing(self._respond(proto.CHAT, request)) as responses:
            async for item in responses:
                yield item

    async def completions(self, request: Mapping[str, Any]
                          ) -> AsyncGenerator[Union[dict, str], None]:
        """A /v1/completions body's response items (see the module doc)."""
        async with contextlib.aclosing(self._respond(proto.COMPLETION, request)) as responses:
            async for item in responses:
                yield item

    async def _respond(self, kind: str, body: Mapping[str, Any]
                       ) -> AsyncGenerator[Union[dict, str], None]:
        request_id = _serve_request_id()
        try:
            generation = self._start_generation(kind, body)
        except Exception as e:
            yield self._error(e, request_id).body()
            return
        try:
            if not generation.request.stream:
                try:
                    response = await self._collect(generation)
                except Exception as e:
                    response = self._error(e, request_id).body()
                yield response
                return
            started = False
            events = _streams.batched(self._events(generation), self._batch_interval_s)
            try:
                async with contextlib.aclosing(events):
                    async for text in events:
                        started = True
                        yield text
            except Exception as e:
                error = self._error(e, request_id)
                yield (proto.sse(error.body()).decode("utf-8") + SSE_DONE if started
                       else error.body())
        finally:
            for stream in generation.streams:  # those never read (or left early) abort
                await _streams.close_quietly(stream)

    def _start_generation(self, kind: str, body: Mapping[str, Any]) -> _Generation:
        """Checks a request and adds one engine request per choice (none when it fails)."""
        from tessera.serve.llm.sampling import SamplingParams

        parse = proto.parse_chat_request if kind == proto.CHAT else proto.parse_completion_request
        request = parse(body)
        self._check_model(request.model)
        engine = self._engine.engine
        if kind == proto.CHAT:
            prompts: List[Any] = [engine.tokenizer.apply_chat_template(request.messages)]
        else:
            prompts = list(request.prompts or [])
        limit = engine.config.max_num_seqs
        if len(prompts) * request.n > limit:
            raise proto.OpenAIError(400, f"The request asks for {len(prompts) * request.n} "
                                    f"choices (prompts x n), more than max_num_seqs ({limit}).",
                                    "BadRequestError")
        response_id = proto.new_request_id(kind)
        params = [SamplingParams(**proto.sampling_kwargs(request, i)) for i in range(request.n)]
        streams: List[Any] = []
        prompt_of: List[int] = []
        try:
            for index, prompt in enumerate(prompts):
                for choice in range(request.n):
                    streams.append(self._engine.generate(
                        prompt, copy.deepcopy(params[choice]), f"{response_id}-{len(streams)}"))
                    prompt_of.append(index)
        except BaseException:
            for stream in streams:
                self._engine.abort(stream.request_id)
            raise
        return _Generation(kind, request, response_id, int(time.time()), streams, prompt_of)

    def _check_model(self, requested: Optional[str]) -> None:
        """vLLM's answer to a model it does not serve (a LoRA adapter `base:adapter` included:
        the built-in engine loads none)."""
        if requested is not None and requested != self.model_id:
            raise proto.OpenAIError(404, f"The model `{requested}` does not exist.",
                                    "NotFoundError")

    async def _collect(self, generation: _Generation) -> Dict[str, Any]:
        """The whole response of a request that does not stream."""
        finals: Dict[int, Any] = {}
        async with contextlib.aclosing(_streams.merge(generation.streams)) as outputs:
            async for index, output in outputs:
                if output.finished:
                    finals[index] = output
        if len(finals) != len(generation.streams):
            raise RuntimeError(f"request {generation.response_id} ended without finishing "
                               f"{len(generation.streams) - len(finals)} of its choices")
        choices = [proto.Choice(i, out.text, out.finish_reason, out.stop_reason)
                   for i, out in sorted(finals.items())]
        build = (proto.chat_completion_response if generation.kind == proto.CHAT
                 else proto.completion_response)
        return build(generation.response_id, self.model_id, generation.created, choices,
                     self._usage(generation, finals))

    def _usage(self, generation: _Generation, outputs: Mapping[int, Any]) -> Dict[str, int]:
        """Usage over the choices' latest outputs: each prompt's tokens once, every choice's
        generated tokens."""
        prompt_tokens = {generation.prompt_of[i]: out.num_prompt_tokens
                         for i, out in outputs.items()}
        return proto.usage(sum(prompt_tokens.values()),
                           sum(out.num_output_tokens for out in outputs.values()))

    async def _events(self, generation: _Generation) -> AsyncGenerator[str, None]:
        """The SSE events of a streaming request: chat's role deltas first (one per choice,
        once the first token is out), a chunk per output that adds text or finishes a choice,
        the include_usage chunk, then [DONE]."""
        g = generation
        latest: Dict[int, Any] = {}
        async with contextlib.aclosing(_streams.merge(g.streams)) as outputs:
            async for index, out in outputs:
                if g.kind == proto.CHAT and not latest:
                    for choice in range(len(g.streams)):
                        yield _sse(self._role_chunk(g, choice, out))
                latest[index] = out
                # No text and not the end: the text is held back (it may start a stop string).
                if out.new_text or out.finished:
                    yield _sse(self._chunk(g, index, out))
        if g.request.include_usage:
            yield _sse(proto.usage_chunk(g.kind, g.response_id, self.model_id, g.created,
                                         self._usage(g, latest)))
        yield SSE_DONE

    def _role_chunk(self, g: _Generation, choice: int, first: Any) -> Dict[str, Any]:
        usage = (proto.usage(first.num_prompt_tokens, 0) if g.request.continuous_usage_stats
                 else None)
        return proto.chat_chunk(g.response_id, self.model_id, g.created, choice,
                                {"role": "assistant", "content": ""},
                                include_usage=g.request.include_usage, chunk_usage=usage)

    def _chunk(self, g: _Generation, index: int, out: Any) -> Dict[str, Any]:
        usage = (proto.usage(out.num_prompt_tokens, out.num_output_tokens)
                 if g.request.continuous_usage_stats else None)
        if g.kind == proto.CHAT:
            return proto.chat_chunk(g.response_id, self.model_id, g.created, index,
                                    {"content": out.new_text}, out.finish_reason,
                                    out.stop_reason, g.request.include_usage, usage)
        return proto.completion_chunk(g.response_id, self.model_id, g.created, index,
                                      out.new_text, out.finish_reason, out.stop_reason,
                                      g.request.include_usage, usage)

    def _error(self, error: Exception, request_id: str) -> proto.OpenAIError:
        """The OpenAI error a request failure answers with: its own, 400 for a request the
        engine refused (ValueError), else 500 (logged)."""
        if isinstance(error, proto.OpenAIError):
            return error
        from tessera.serve.llm.async_engine import EngineDeadError

        suffix = f" (Request ID: {request_id})" if request_id else ""
        if isinstance(error, EngineDeadError):
            logger.error("The engine of model %r cannot serve request %s: %s", self.model_id,
                         request_id, error)
            return proto.OpenAIError(500, f"{error}{suffix}", "EngineDeadError")
        if isinstance(error, ValueError):
            return proto.OpenAIError(400, str(error), "BadRequestError")
        logger.error("Request %s to model %r failed", request_id, self.model_id, exc_info=error)
        return proto.OpenAIError(500, f"Internal Server Error{suffix}", "InternalServerError")

    # ---- model, health, metrics ----------------------------------------------------------

    async def models(self) -> Dict[str, Any]:
        """The body of GET /v1/models for this model alone."""
        return proto.model_list([self.model_id], self._created)

    async def llm_config(self) -> LLMConfig:
        return self._llm_config

    async def check_health(self) -> None:
        """Raises when the engine cannot serve: its thread failed or was shut down, or an
        engine worker of its slice does not answer (one died)."""
        # AsyncLLMEngine has no public probe: its failure and its thread say it.
        dead = getattr(self._engine, "_dead", None)
        thread = getattr(self._engine, "_thread", None)
        if dead is not None or (thread is not None and not thread.is_alive()):
            why = f"it failed: {dead!r}" if dead is not None else "its thread ended"
            raise RuntimeError(f"The engine of model {self.model_id!r} is not running ({why})")
        stages = getattr(self, "_stages", None)
        if stages is not None:
            try:
                await asyncio.get_running_loop().run_in_executor(None, stages.check)
            except Exception as e:
                raise RuntimeError(f"An engine worker of model {self.model_id!r} does not "
                                   f"answer: {e}") from None

    def engine_layout(self) -> Dict[str, Any]:
        """Where the engine runs: the replica's slice ("slice": its name, None without one) and
        node ("node_id"), and each engine worker's node, chips, slice variables, stage and
        layers ("workers": pipeline.EngineWorker.describe, in stage order; [] when the engine
        runs in the replica)."""
        import tessera

        replica_slice = serve_context._get_replica_slice()
        stages = getattr(self, "_stages", None)
        return {"slice": replica_slice.name if replica_slice is not None else None,
                "node_id": tessera.get_runtime_context().get_node_id(),
                "workers": stages.describe() if stages is not None else []}

    def metrics_text(self) -> str:
        """The engine's metrics in Prometheus' text format as Ray exports vLLM's
        (ray_vllm_*, tagged ReplicaId inside a replica); "" with log_engine_metrics off."""
        from tessera.serve.llm.metrics import render_prometheus

        if not self._llm_config.log_engine_metrics:
            return ""
        replica = serve_context._get_internal_replica_context()
        replica_id = replica.replica_id.to_full_id_str() if replica is not None else None
        return render_prometheus(self._engine.engine.metrics.registry, prefix="ray_",
                                 replica_id=replica_id)

    def shutdown(self) -> None:
        """Stops the engine (unfinished requests fail), ends its engine workers and its metrics'
        export."""
        _replica_metrics.remove_source(self.metrics_text)
        engine = getattr(self, "_engine", None)
        if engine is not None:
            engine.shutdown()
        stages = getattr(self, "_stages", None)
        if stages is not None:
            stages.shutdown()

    def __del__(self) -> None:
        # Serve calls it at a graceful shutdown; a failed constructor leaves no engine.
        try:
            self.shutdown()
        except Exception:
            logger.exception("Shutting down the engine of an LLMServer failed")

    # ---- options -------------------------------------------------------------------------

    @classmethod
    def get_deployment_options(cls, llm_config: Union[LLMConfig, Mapping[str, Any]]
                               ) -> Dict[str, Any]:
        """The Serve options of a deployment of this class for `llm_config` (see the module
        doc), before Serve LLM's defaults."""
        config = LLMConfig.parse(llm_config)
        options = copy.deepcopy(config.deployment_config)
        bundles, strategy = placement_bundles(config)
        if tpu_slice_shape(config) is None and bundles != [replica_actor_resources(config)]:
            options["placement_group_bundles"] = bundles
            options["placement_group_strategy"] = strategy
        if config.runtime_env:
            actor_options = dict(options.get("ray_actor_options") or {})
            actor_options["runtime_env"] = {**(actor_options.get("runtime_env") or {}),
                                            **config.runtime_env}
            options["ray_actor_options"] = actor_options
        return options


def _sse(payload: Mapping[str, Any]) -> str:
    return proto.sse(payload).decode("utf-8")


__all__ = ["LLMServer", "demo_model_dir", "model_cache_dir", "resolve_model_source"]

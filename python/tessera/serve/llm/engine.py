"""The built-in LLM engine of tessera.serve.llm: continuous batching over a paged KV cache, in
pure Python over PyTorch on the CPU, with vLLM's shapes and names.

    engine = LLMEngine("/path/to/model_dir", EngineConfig(max_num_seqs=8))
    engine.add_request("r1", "Hello", SamplingParams(temperature=0, max_tokens=20))
    while engine.has_unfinished_requests():
        for out in engine.step():
            print(out.request_id, repr(out.new_text), out.finish_reason)

Each `step` re-forms the batch (iteration-level batching): the scheduler gives running requests
their next tokens, admits waiting ones, the model runner computes the scheduled tokens over the
paged cache, and every request whose tokens are all computed samples one token. A request added
between steps joins the next one; a finished one leaves at once and frees its blocks.

The model runs in this process, or split into pipeline stages across engine workers
(pipeline.py: one per host of a TPU slice, `LLMEngine(model_config, config, tokenizer,
stages=ActorStages(...))`): the scheduler, the block accounting and sampling stay here either
way, and the tokens are the same.

Metrics (`engine.metrics`, metrics.EngineMetrics) are kept as vLLM V1 keeps them: TTFT =
arrival to first token, ITL = each gap between a request's tokens, e2e = arrival to finish,
queue time = arrival to first scheduled, tokens counted as computed, success counted per
finish_reason, preemptions as they happen; gauges after every step.

Threading: one thread at a time (AsyncLLMEngine runs it on its own). Cost: see the scheduler and
the model runner; add_request O(prompt).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch

from tessera.serve.llm.kv_cache import DEFAULT_BLOCK_SIZE, BlockAllocator
from tessera.serve.llm.metrics import EngineMetrics
from tessera.serve.llm.model_runner import LocalStages, ModelRunner, StageRunner
from tessera.serve.llm.request import Request, RequestOutput
from tessera.serve.llm.sampling import SamplingParams, check_stop, sample_tokens
from tessera.serve.llm.scheduler import Scheduler
from tessera.serve.llm.tiny_model import TinyConfig, TinyTransformer, load_model
from tessera.serve.llm.tokenizer import ByteTokenizer

Prompt = Union[str, Sequence[int]]


@dataclasses.dataclass
class EngineConfig:
    """vLLM's scheduling knobs (OpenAI-server defaults 256 sequences, 2048 tokens a step), the
    size of the KV pool, and `max_model_len` (None: the model's positions, bounded by the pool so
    that one request alone always fits)."""

    max_num_seqs: int = 256
    max_num_batched_tokens: int = 2048
    num_kv_blocks: int = 512
    block_size: int = DEFAULT_BLOCK_SIZE
    max_model_len: Optional[int] = None
    seed: int = 0
    model_name: str = "tessera-tiny"

    def __post_init__(self) -> None:
        for name in ("max_num_seqs", "max_num_batched_tokens", "num_kv_blocks", "block_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"EngineConfig.{name} must be a positive int, got {value!r}")
        if self.max_model_len is not None and (not isinstance(self.max_model_len, int)
                                               or self.max_model_len < 2):
            raise ValueError(f"EngineConfig.max_model_len must be an int of at least 2, got "
                             f"{self.max_model_len!r}")

    # engine_kwargs names (vLLM's) -> EngineConfig fields.
    _KWARGS = {"max_num_seqs": "max_num_seqs", "max_num_batched_tokens": "max_num_batched_tokens",
               "num_gpu_blocks_override": "num_kv_blocks", "num_kv_blocks": "num_kv_blocks",
               "block_size": "block_size", "max_model_len": "max_model_len", "seed": "seed",
               "served_model_name": "model_name"}

    @classmethod
    def from_engine_kwargs(cls, engine_kwargs: Mapping[str, Any], model_name: str
                           ) -> Tuple["EngineConfig", List[str]]:
        """The config of LLMConfig.engine_kwargs for the built-in engine, and the vLLM-only
        keys it ignores (e.g. gpu_memory_utilization). The parallel sizes are not the engine's
        but its layout's (config.builtin_stages checks them: stages over a slice's hosts)."""
        fields: Dict[str, Any] = {"model_name": model_name}
        ignored = []
        for key, value in engine_kwargs.items():
            if key in cls._KWARGS:
                fields[cls._KWARGS[key]] = value
            elif key not in ("tensor_parallel_size", "pipeline_parallel_size",
                             "data_parallel_size"):
                ignored.append(key)
        return cls(**fields), sorted(ignored)


class LLMEngine:
    """Continuous batching of requests over one model (see the module's doc)."""

    def __init__(self, model: Union[str, TinyTransformer, TinyConfig],
                 config: Optional[EngineConfig] = None,
                 tokenizer: Optional[ByteTokenizer] = None,
                 clock: Callable[[], float] = time.monotonic,
                 stages: Optional[Any] = None) -> None:
        """`model`: a TinyTransformer, or a model folder (load_model), run in this process; or,
        with `stages` (pipeline.ActorStages: the model split across engine workers, which hold
        its weights and KV pools), the model's TinyConfig and the tokenizer."""
        self.config = config or EngineConfig()
        if stages is None:
            if isinstance(model, str):
                model, loaded_tokenizer, _ = load_model(model)
                tokenizer = tokenizer or loaded_tokenizer
            if not isinstance(model, TinyTransformer):
                raise TypeError(f"model must be a TinyTransformer or a model folder, got "
                                f"{type(model).__name__}")
            model = model.eval()
            stages = LocalStages([StageRunner(model, range(model.config.n_layers),
                                              self.config.num_kv_blocks, self.config.block_size,
                                              first=True, last=True)])
            model = model.config
        if not isinstance(model, TinyConfig):
            raise TypeError(f"an engine over stages takes the model's TinyConfig, got "
                            f"{type(model).__name__}")
        self.model_config: TinyConfig = model
        self.tokenizer = tokenizer or ByteTokenizer()
        self._clock = clock
        self.max_model_len = self._max_model_len()
        # The block accounting of every stage's KV pool (each holds the same blocks).
        self.allocator = BlockAllocator(self.config.num_kv_blocks, self.config.block_size)
        self.scheduler = Scheduler(self.allocator, self.config.max_num_seqs,
                                   self.config.max_num_batched_tokens)
        self.runner = ModelRunner(self.allocator, stages)
        self.metrics = EngineMetrics(self.config.model_name)
        # Unseeded requests share this generator: seeded from the config, so a run repeats.
        self._generator = torch.Generator().manual_seed(self.config.seed)
        self._requests: Dict[str, Request] = {}

    def check_stages(self) -> None:
        """Raises when a stage of the model cannot run (an engine worker died)."""
        self.runner.stages.check()

    def _max_model_len(self) -> int:
        capacity = self.config.num_kv_blocks * self.config.block_size
        limit = min(self.model_config.max_position, capacity)
        wanted = self.config.max_model_len
        if wanted is None:
            return limit
        if wanted > limit:
            raise ValueError(f"max_model_len {wanted} is more than the model's "
                             f"{self.model_config.max_position} positions or the KV cache's "
                             f"{capacity} token slots")
        return wanted

    # ---- requests ----------------------------------------------------------------------------

    def prompt_token_ids(self, prompt: Prompt) -> List[int]:
        """The token ids of a text prompt (BOS first) or a list of ids, checked against the
        vocabulary and max_model_len (ValueError); changes nothing."""
        if isinstance(prompt, str):
            ids = self.tokenizer.encode(prompt)
        elif isinstance(prompt, (list, tuple)) and all(
                isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            ids = list(prompt)
        else:
            raise TypeError(f"prompt must be a str or a list of token ids, got "
                            f"{type(prompt).__name__}")
        if not ids:
            raise ValueError("the prompt is empty")
        bad = [t for t in ids if not 0 <= t < self.tokenizer.vocab_size]
        if bad:
            raise ValueError(f"token id {bad[0]} is outside the vocabulary (0..."
                             f"{self.tokenizer.vocab_size - 1})")
        if len(ids) >= self.max_model_len:
            raise ValueError(f"The prompt (length {len(ids)}) is longer than the maximum model "
                             f"length of {self.max_model_len} less one generated token.")
        return ids

    def add_request(self, request_id: str, prompt: Prompt,
                    params: Optional[SamplingParams] = None,
                    arrival_time: Optional[float] = None) -> None:
        """Queues a request; it joins the next step. ValueError (nothing queued) for a bad
        prompt or a request id already in the engine."""
        if not isinstance(request_id, str) or not request_id:
            raise ValueError(f"request_id must be a non-empty str, got {request_id!r}")
        if request_id in self._requests:
            raise ValueError(f"request {request_id!r} is already in the engine")
        ids = self.prompt_token_ids(prompt)
        params = params or SamplingParams()
        now = self._clock() if arrival_time is None else arrival_time
        request = Request(request_id, ids, params, self.tokenizer, now)
        self._requests[request_id] = request
        self.scheduler.add(request)
        self._update_gauges()

    def abort_request(self, request_id: str) -> bool:
        """Drops an unfinished request and frees its blocks (it produces no more outputs);
        False for an id the engine does not hold."""
        request = self._requests.pop(request_id, None)
        if request is None:
            return False
        request.finish_reason = "abort"
        self.scheduler.finish(request)
        self.metrics.request_success.inc(labels=self.metrics.finished_labels("abort"))
        self._update_gauges()
        return True

    def has_unfinished_requests(self) -> bool:
        return bool(self._requests)

    def get_num_unfinished_requests(self) -> int:
        return len(self._requests)

    # ---- steps -------------------------------------------------------------------------------

    def step(self) -> List[RequestOutput]:
        """One iteration: schedule, compute, sample; the outputs of the requests that gained a
        token this step (none for one still in the middle of its prefill)."""
        plan = self.scheduler.schedule()
        if plan.preempted:
            self.metrics.num_preemptions.inc(len(plan.preempted), self.metrics.labels)
        if not plan.scheduled:
            self._update_gauges()
            return []
        now = self._clock()
        for request, _ in plan.scheduled:
            if request.first_scheduled_time is None:
                request.first_scheduled_time = now
        sampling, logits = self.runner.execute(plan.scheduled)
        self.scheduler.update(plan.scheduled)
        tokens = sample_tokens(logits, [r.params for r in sampling],
                               [r.generator or self._generator for r in sampling])
        now = self._clock()
        outputs = [self._append_token(request, token, now)
                   for request, token in zip(sampling, tokens)]
        self._update_gauges()
        return outputs

    def _append_token(self, request: Request, token: int, now: float) -> RequestOutput:
        request.output_token_ids.append(token)
        finish_reason, stop_reason = check_stop(
            token, request.params, self.tokenizer.eos_token_id, request.text,
            request.num_output_tokens, request.num_tokens, self.max_model_len)
        self._record_token(request, now)
        if finish_reason is not None:
            request.finish_reason, request.stop_reason = finish_reason, stop_reason
            request.text.finish(stopped_by_string=isinstance(stop_reason, str))
            self.scheduler.finish(request)
            del self._requests[request.request_id]
            self._record_finished(request, now)
        return RequestOutput.of(request, [token])

    def _record_token(self, request: Request, now: float) -> None:
        labels = self.metrics.labels
        self.metrics.generation_tokens.inc(1, labels)
        if request.first_token_time is None:
            request.first_token_time = now
            self.metrics.prompt_tokens.inc(request.num_prompt_tokens, labels)
            self.metrics.time_to_first_token.observe(now - request.arrival_time, labels)
        else:
            self.metrics.inter_token_latency.observe(now - request.last_token_time, labels)
        request.last_token_time = now

    def _record_finished(self, request: Request, now: float) -> None:
        labels = self.metrics.labels
        self.metrics.e2e_request_latency.observe(now - request.arrival_time, labels)
        self.metrics.request_queue_time.observe(request.first_scheduled_time - request.arrival_time,
                                                labels)
        self.metrics.request_success.inc(
            labels=self.metrics.finished_labels(request.finish_reason))

    def _update_gauges(self) -> None:
        labels = self.metrics.labels
        self.metrics.num_requests_running.set(len(self.scheduler.running), labels)
        self.metrics.num_requests_waiting.set(len(self.scheduler.waiting), labels)
        self.metrics.kv_cache_usage.set(self.allocator.usage(), labels)

    def generate(self, prompts: Sequence[Prompt], params: Optional[SamplingParams] = None
                 ) -> List[RequestOutput]:
        """Runs `prompts` to completion (the offline LLM.generate): one final output each, in
        order, whose text and token count are the whole generation."""
        ids = [f"generate-{i}-{id(prompts)}" for i in range(len(prompts))]
        for request_id, prompt in zip(ids, prompts):
            self.add_request(request_id, prompt, dataclasses.replace(params or SamplingParams()))
        last: Dict[str, RequestOutput] = {}
        tokens: Dict[str, List[int]] = {i: [] for i in ids}
        while any(i not in last for i in ids):
            for out in self.step():
                tokens[out.request_id].extend(out.new_token_ids)
                if out.finished:
                    last[out.request_id] = out
        return [dataclasses.replace(last[i], new_token_ids=tokens[i], new_text=last[i].text)
                for i in ids]

"""tessera.serve.llm without a cluster: the tokenizer, the paged KV cache, the scheduler, the
built-in engine (its paged decode against a plain full forward pass, continuous batching,
preemption, stop rules, seeded sampling, abort, the asyncio front), its metrics, the OpenAI
protocol's checks and shapes, LLMConfig's placement bundles, and the demo model's generator.

The engine tests use a tiny random model in float64, so that paged attention and the full
forward pass agree to the last greedy token."""
import asyncio
import dataclasses
import json
import os
import threading

import pytest

torch = pytest.importorskip("torch", reason="the built-in LLM engine needs python3-torch")

from tessera.serve.llm import config as llm_config  # noqa: E402 (after the torch check)
from tessera.serve.llm import make_demo_model, openai_protocol as proto, pipeline
from tessera.serve.llm.async_engine import AsyncLLMEngine, EngineDeadError
from tessera.serve.llm.config import LLMConfig, placement_bundles
from tessera.serve.llm.engine import EngineConfig, LLMEngine
from tessera.serve.llm.kv_cache import BlockAllocator, PagedKVCache
from tessera.serve.llm.metrics import render_prometheus
from tessera.serve.llm.request import Request
from tessera.serve.llm.sampling import OutputText, SamplingParams, check_stop
from tessera.serve.llm.scheduler import Scheduler
from tessera.serve.llm.tiny_model import TinyConfig, load_model, random_model
from tessera.serve.llm.tokenizer import ByteTokenizer, IncrementalDecoder

TOKENIZER = ByteTokenizer()
SMALL = TinyConfig(vocab_size=TOKENIZER.vocab_size, d_model=32, n_layers=2, n_heads=2, d_ff=64,
                   max_position=128)
GREEDY = dict(temperature=0.0, ignore_eos=True)


@pytest.fixture(scope="module")
def model():
    return random_model(SMALL, seed=1, dtype=torch.float64)


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def make_engine(model, clock=None, **config):
    config.setdefault("model_name", "tiny")
    return LLMEngine(model, EngineConfig(**config), clock=clock or FakeClock())


def prompt_ids(length, salt=0):
    """A prompt of `length` tokens: BOS, then printable bytes."""
    return [TOKENIZER.bos_token_id] + [32 + (7 * i + salt) % 90 for i in range(length - 1)]


def reference_greedy(model, ids, count):
    """Greedy tokens by full recomputation: the whole sequence through model.forward per token."""
    ids = list(ids)
    out = []
    with torch.no_grad():
        for _ in range(count):
            token = int(model(torch.tensor([ids]))[0, -1].argmax())
            ids.append(token)
            out.append(token)
    return out


def run_all(engine, steps=None):
    """Steps until every request finished; {request_id: (tokens, last output, text deltas)}."""
    tokens, last, text = {}, {}, {}
    while engine.has_unfinished_requests():
        for out in engine.step():
            tokens.setdefault(out.request_id, []).extend(out.new_token_ids)
            text[out.request_id] = text.get(out.request_id, "") + out.new_text
            last[out.request_id] = out
        if steps is not None:
            steps.append(engine)
    return {rid: (tokens[rid], last[rid], text[rid]) for rid in tokens}


# ---- tokenizer ---------------------------------------------------------------------------

def test_tokenizer_round_trips_text_and_reads_special_tokens():
    for text in ["", "hello world", "héllo wörld ✓ 日本語", "line\nbreak\ttab"]:
        ids = TOKENIZER.encode(text)
        assert ids[0] == TOKENIZER.bos_token_id
        assert TOKENIZER.decode(ids) == text
    assert TOKENIZER.encode("a<|user|>b", add_bos=False) == [97, TOKENIZER.token_to_id("<|user|>"),
                                                             98]
    ids = TOKENIZER.encode("x<|end|>")
    assert TOKENIZER.decode(ids, skip_special_tokens=False) == "<|bos|>x<|end|>"
    prompt = TOKENIZER.apply_chat_template([{"role": "system", "content": "Be brief."},
                                            {"role": "user", "content": [
                                                {"type": "text", "text": "Hi"}]}])
    assert prompt == "<|bos|><|system|>Be brief.<|end|>\n<|user|>Hi<|end|>\n<|assistant|>"
    assert TOKENIZER.encode(prompt)[-1] == TOKENIZER.token_to_id("<|assistant|>")
    with pytest.raises(ValueError, match="role"):
        TOKENIZER.apply_chat_template([{"role": "robot", "content": "x"}])
    assert ByteTokenizer.from_dict(TOKENIZER.to_dict()).vocab_size == TOKENIZER.vocab_size


def test_incremental_decoder_holds_a_split_character_until_it_is_whole():
    decoder = IncrementalDecoder(TOKENIZER)
    first, second = "é".encode("utf-8")
    assert decoder.feed(ord("a")) == "a"
    assert decoder.feed(first) == ""
    assert decoder.feed(second) == "é"
    assert decoder.feed(TOKENIZER.eos_token_id) == ""
    assert decoder.feed(first) == "" and decoder.flush() == "\ufffd"


# ---- KV cache ----------------------------------------------------------------------------

def test_block_allocator_accounts_blocks_across_a_boundary():
    allocator = BlockAllocator(num_blocks=4, block_size=16)
    assert allocator.allocate("a", 10) == [0]
    assert allocator.usage() == 0.25
    assert allocator.append("a", 6) == []            # 16 tokens still fit one block
    assert allocator.append("a", 1) == [1]           # the 17th opens a second
    assert allocator.block_table("a") == [0, 1] and allocator.num_tokens("a") == 17
    assert allocator.slots("a", 15, 17).tolist() == [15, 16]
    allocator.allocate("b", 20)                      # blocks 2 and 3
    assert allocator.slots("b", 15, 17).tolist() == [2 * 16 + 15, 3 * 16 + 0]
    assert allocator.usage() == 1.0
    assert not allocator.can_allocate("a", 33)
    with pytest.raises(MemoryError):
        allocator.append("a", 16)
    assert allocator.block_table("a") == [0, 1] and allocator.num_tokens("a") == 17
    with pytest.raises(IndexError):
        allocator.slots("a", 0, 18)
    assert allocator.free("a") == 2 and allocator.usage() == 0.5
    assert allocator.free("a") == 0
    assert allocator.allocate("c", 32) == [0, 1]


def test_paged_cache_gathers_what_was_written_at_each_slot():
    allocator = BlockAllocator(num_blocks=3, block_size=4)
    cache = PagedKVCache(num_layers=2, num_blocks=3, block_size=4, num_heads=1, head_dim=2)
    allocator.allocate("x", 4)
    allocator.allocate("y", 2)
    allocator.append("x", 2)                         # x: blocks 0 and 2, y: block 1
    slots = allocator.slots("x", 0, 6)
    keys = torch.arange(12.0).reshape(6, 1, 2)
    cache.write(1, slots, keys, -keys)
    gathered_k, gathered_v = cache.gather(1, slots)
    assert torch.equal(gathered_k, keys) and torch.equal(gathered_v, -keys)
    assert slots.tolist() == [0, 1, 2, 3, 8, 9]
    assert torch.count_nonzero(cache.keys[0]) == 0


# ---- scheduler ---------------------------------------------------------------------------

def make_request(request_id, length, salt=0):
    return Request(request_id, prompt_ids(length, salt), SamplingParams(), TOKENIZER, 0.0)


def decode_once(scheduler, plan):
    """What the engine does after a step: count the computed tokens, append a token to every
    request that computed all its tokens."""
    scheduler.update(plan.scheduled)
    for request, _ in plan.scheduled:
        if request.num_computed_tokens == request.num_tokens:
            request.output_token_ids.append(65)


def test_scheduler_keeps_max_num_seqs_and_puts_decodes_before_prefills():
    scheduler = Scheduler(BlockAllocator(64, 16), max_num_seqs=2, max_num_batched_tokens=100)
    for i in range(3):
        scheduler.add(make_request(f"r{i}", 10, i))
    plan = scheduler.schedule()
    assert [(r.request_id, n) for r, n in plan.scheduled] == [("r0", 10), ("r1", 10)]
    assert [r.request_id for r in scheduler.waiting] == ["r2"]
    decode_once(scheduler, plan)
    plan = scheduler.schedule()
    assert [(r.request_id, n) for r, n in plan.scheduled] == [("r0", 1), ("r1", 1)]
    decode_once(scheduler, plan)
    scheduler.finish(scheduler.running[0])
    plan = scheduler.schedule()                      # r1 decodes first, then r2 is admitted
    assert [(r.request_id, n) for r, n in plan.scheduled] == [("r1", 1), ("r2", 10)]


def test_scheduler_chunks_a_prefill_within_the_token_budget():
    scheduler = Scheduler(BlockAllocator(64, 16), max_num_seqs=8, max_num_batched_tokens=16)
    scheduler.add(make_request("long", 40))
    scheduler.add(make_request("short", 5))
    chunks = []
    for _ in range(3):
        plan = scheduler.schedule()
        chunks.append([(r.request_id, n) for r, n in plan.scheduled])
        assert plan.num_batched_tokens <= 16
        decode_once(scheduler, plan)
    assert chunks == [[("long", 16)], [("long", 16)], [("long", 8), ("short", 5)]]
    assert scheduler.running[0].num_output_tokens == 1


def test_scheduler_preempts_the_last_running_request_when_blocks_run_out():
    scheduler = Scheduler(BlockAllocator(3, 4), max_num_seqs=8, max_num_batched_tokens=100)
    first, second = make_request("first", 4), make_request("second", 4)
    scheduler.add(first)
    scheduler.add(second)
    decode_once(scheduler, scheduler.schedule())     # 2 blocks used, 1 free
    plan = scheduler.schedule()                      # both need a new block: second goes
    assert [(r.request_id, n) for r, n in plan.scheduled] == [("first", 1)]
    assert plan.preempted == [second] and scheduler.num_preemptions == 1
    assert list(scheduler.waiting) == [second] and second.num_computed_tokens == 0
    assert scheduler.allocator.block_table("second") == []


# ---- engine ------------------------------------------------------------------------------

@pytest.mark.parametrize("budget", [2048, 7])
def test_paged_decode_gives_the_full_recompute_greedy_tokens(model, budget):
    engine = make_engine(model, max_num_batched_tokens=budget, num_kv_blocks=32)
    prompts = {"a": prompt_ids(3), "b": prompt_ids(17, 1), "c": prompt_ids(33, 2)}
    for request_id, ids in prompts.items():
        engine.add_request(request_id, ids, SamplingParams(max_tokens=20, **GREEDY))
    results = run_all(engine)
    for request_id, ids in prompts.items():
        tokens, last, _ = results[request_id]
        assert tokens == reference_greedy(model, ids, 20), request_id
        assert last.finished and last.finish_reason == "length"
    assert engine.allocator.usage() == 0.0


def test_decode_steps_compute_one_token_per_request(model):
    engine = make_engine(model, num_kv_blocks=32)
    computed = []
    execute = engine.runner.execute
    engine.runner.execute = lambda scheduled: (computed.append(
        sorted((r.request_id, n) for r, n in scheduled)), execute(scheduled))[1]
    engine.add_request("a", prompt_ids(20), SamplingParams(max_tokens=4, **GREEDY))
    engine.add_request("b", prompt_ids(9, 1), SamplingParams(max_tokens=4, **GREEDY))
    run_all(engine)
    assert computed == [[("a", 20), ("b", 9)]] + [[("a", 1), ("b", 1)]] * 3


def test_preempted_requests_recompute_and_finish_with_the_same_tokens(model):
    engine = make_engine(model, num_kv_blocks=6, block_size=16, max_num_batched_tokens=64)
    prompts = {f"r{i}": prompt_ids(20, i) for i in range(3)}
    for request_id, ids in prompts.items():
        engine.add_request(request_id, ids, SamplingParams(max_tokens=40, **GREEDY))
    results = run_all(engine)
    assert engine.metrics.num_preemptions.value(engine.metrics.labels) > 0
    assert engine.scheduler.num_preemptions > 0
    for request_id, ids in prompts.items():
        assert results[request_id][0] == reference_greedy(model, ids, 40), request_id
        assert results[request_id][1].num_output_tokens == 40


def test_requests_join_and_leave_the_batch_between_steps(model):
    engine = make_engine(model, num_kv_blocks=32)
    engine.add_request("early", prompt_ids(10), SamplingParams(max_tokens=3, **GREEDY))
    assert [o.request_id for o in engine.step()] == ["early"]
    engine.add_request("late", prompt_ids(12, 1), SamplingParams(max_tokens=5, **GREEDY))
    assert sorted(o.request_id for o in engine.step()) == ["early", "late"]
    outputs = engine.step()
    assert {o.request_id: o.finished for o in outputs} == {"early": True, "late": False}
    assert [r.request_id for r in engine.scheduler.running] == ["late"]
    assert engine.allocator.block_table("early") == []
    assert [o.request_id for o in engine.step()] == ["late"]
    assert engine.get_num_unfinished_requests() == 1


def test_stop_strings_end_the_text_before_them_and_stream_nothing_of_them(model):
    ids = prompt_ids(6)
    engine = make_engine(model, num_kv_blocks=32)
    engine.add_request("free", ids, SamplingParams(max_tokens=40, **GREEDY))
    full = run_all(engine)["free"][1].text
    stop = full[12:14]
    cut = full.index(stop)
    for include, expected in ((False, full[:cut]), (True, full[:cut + len(stop)])):
        engine.add_request("stopped", ids, SamplingParams(
            max_tokens=40, stop=["never there", stop], include_stop_str_in_output=include,
            **GREEDY))
        tokens, last, streamed = run_all(engine)["stopped"]
        assert (last.finish_reason, last.stop_reason) == ("stop", stop)
        assert last.text == expected and streamed == expected
        assert len(tokens) < 40


def test_max_tokens_stop_tokens_and_model_length_finish_requests(model):
    engine = make_engine(model, num_kv_blocks=32, max_model_len=24)
    ids = prompt_ids(20)
    first = reference_greedy(model, ids, 1)[0]
    engine.add_request("max", ids, SamplingParams(max_tokens=2, **GREEDY))
    engine.add_request("token", ids, SamplingParams(max_tokens=2, stop_token_ids=[first],
                                                    **GREEDY))
    engine.add_request("model", ids, SamplingParams(max_tokens=None, **GREEDY))
    results = run_all(engine)
    assert (results["max"][1].finish_reason, results["max"][1].num_output_tokens) == ("length", 2)
    assert (results["token"][1].finish_reason, results["token"][1].stop_reason) == ("stop", first)
    assert results["token"][1].text == ""
    assert (results["model"][1].finish_reason, results["model"][1].num_output_tokens) == (
        "length", 4)
    with pytest.raises(ValueError, match="maximum model length"):
        engine.add_request("too long", prompt_ids(24), SamplingParams())
    assert not engine.has_unfinished_requests()


def test_eos_stops_unless_ignored():
    params = SamplingParams(max_tokens=5)
    eos = TOKENIZER.eos_token_id
    text = OutputText(TOKENIZER, params)
    assert check_stop(eos, params, eos, text, 1, 10, 100) == ("stop", None)
    ignoring = SamplingParams(max_tokens=5, ignore_eos=True)
    assert check_stop(eos, ignoring, eos, OutputText(TOKENIZER, ignoring), 1, 10, 100) == (
        None, None)
    assert text.text == ""


def test_seeded_sampling_repeats_whatever_runs_beside_it(model):
    params = dict(temperature=1.0, top_p=0.9, max_tokens=24, ignore_eos=True)

    def sample(seed, neighbours):
        engine = make_engine(model, num_kv_blocks=64)
        for i in range(neighbours):
            engine.add_request(f"n{i}", prompt_ids(8, i), SamplingParams(**params))
        engine.add_request("seeded", prompt_ids(8), SamplingParams(seed=seed, **params))
        return run_all(engine)["seeded"][0]

    alone = sample(7, 0)
    assert sample(7, 3) == alone
    assert sample(8, 0) != alone
    nucleus_of_one = SamplingParams(temperature=1.0, top_p=1e-9, max_tokens=10, ignore_eos=True,
                                    seed=3)
    engine = make_engine(model, num_kv_blocks=32)
    engine.add_request("narrow", prompt_ids(8), nucleus_of_one)
    assert run_all(engine)["narrow"][0] == reference_greedy(model, prompt_ids(8), 10)


def test_abort_drops_a_request_and_frees_its_blocks(model):
    engine = make_engine(model, num_kv_blocks=32)
    engine.add_request("kept", prompt_ids(10), SamplingParams(max_tokens=4, **GREEDY))
    engine.add_request("dropped", prompt_ids(40, 1), SamplingParams(max_tokens=4, **GREEDY))
    engine.step()
    used = engine.allocator.num_used_blocks
    assert engine.abort_request("dropped")
    assert engine.allocator.num_used_blocks == used - 3
    assert not engine.abort_request("dropped") and not engine.abort_request("unknown")
    assert set(run_all(engine)) == {"kept"}
    abort = engine.metrics.request_success.value(engine.metrics.finished_labels("abort"))
    assert abort == 1.0
    with pytest.raises(ValueError, match="already"):
        engine.add_request("x", [1, 2], SamplingParams())
        engine.add_request("x", [1, 2], SamplingParams())


def test_metrics_count_tokens_latencies_and_finishes(model):
    clock = FakeClock()
    engine = make_engine(model, clock=clock, num_kv_blocks=32)
    engine.add_request("r", prompt_ids(5), SamplingParams(max_tokens=3, **GREEDY))
    for now in (1.0, 3.0, 6.0):
        clock.now = now
        engine.step()
    m, labels = engine.metrics, engine.metrics.labels
    assert (m.time_to_first_token.count(labels), m.time_to_first_token.sum(labels)) == (1, 1.0)
    assert (m.inter_token_latency.count(labels), m.inter_token_latency.sum(labels)) == (2, 5.0)
    assert m.e2e_request_latency.sum(labels) == 6.0
    assert m.request_queue_time.sum(labels) == 1.0
    assert m.prompt_tokens.value(labels) == 5 and m.generation_tokens.value(labels) == 3
    assert m.request_success.value(m.finished_labels("length")) == 1
    assert m.num_requests_running.value(labels) == 0 and m.kv_cache_usage.value(labels) == 0
    text = render_prometheus(m.registry, prefix="ray_", replica_id="app#LLMServer#1")
    lines = text.splitlines()
    assert "# TYPE ray_vllm_time_to_first_token_seconds histogram" in lines
    assert ('ray_vllm_time_to_first_token_seconds_bucket{ReplicaId="app#LLMServer#1",engine="0",'
            'model_name="tiny",le="1.0"} 1.0') in lines
    assert ('ray_vllm_time_to_first_token_seconds_bucket{ReplicaId="app#LLMServer#1",engine="0",'
            'model_name="tiny",le="0.5"} 0.0') in lines
    assert "# TYPE ray_vllm_prompt_tokens_total counter" in lines
    assert ('ray_vllm_request_success_total{ReplicaId="app#LLMServer#1",engine="0",'
            'finished_reason="length",model_name="tiny"} 1.0') in lines
    assert ('ray_vllm_kv_cache_usage_perc{ReplicaId="app#LLMServer#1",engine="0",'
            'model_name="tiny"} 0.0') in lines
    names = {line.split(" ")[2] for line in lines if line.startswith("# TYPE")}
    assert names == {"ray_vllm_" + n for n in (
        "time_to_first_token_seconds", "inter_token_latency_seconds",
        "e2e_request_latency_seconds", "request_queue_time_seconds", "num_requests_running",
        "num_requests_waiting", "kv_cache_usage_perc", "prompt_tokens_total",
        "generation_tokens_total", "request_success_total", "num_preemptions_total")}


def test_engine_config_from_engine_kwargs():
    config, ignored = EngineConfig.from_engine_kwargs(
        {"max_num_seqs": 4, "gpu_memory_utilization": 0.9, "tensor_parallel_size": 1}, "m")
    assert (config.max_num_seqs, config.model_name, ignored) == (4, "m",
                                                                 ["gpu_memory_utilization"])
    # The parallel sizes are the layout's (builtin_stages), not the engine's.
    assert EngineConfig.from_engine_kwargs({"pipeline_parallel_size": 4}, "m")[1] == []
    with pytest.raises(ValueError, match="max_num_seqs"):
        EngineConfig(max_num_seqs=0)


# ---- asyncio front -----------------------------------------------------------------------

async def wait_until(predicate, what, timeout=20.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


def test_async_engine_streams_outputs_and_aborts_abandoned_requests(model):
    engine = make_engine(model, num_kv_blocks=64)
    # The engine thread takes a permit before each step, so the test decides how far a request
    # gets before its stream is abandoned.
    permits = threading.Semaphore(0)
    step = engine.step
    engine.step = lambda: (permits.acquire(), step())[1]
    front = AsyncLLMEngine(engine)
    long_params = SamplingParams(max_tokens=100, **GREEDY)

    def aborts():
        return engine.metrics.request_success.value(engine.metrics.finished_labels("abort"))

    async def first_output_then_abandon(abandon, expected_aborts):
        holder = [front.generate(prompt_ids(6), long_params)]   # abandon() may drop it
        permits.release()
        assert (await holder[0].__anext__()).new_token_ids
        await abandon(holder)
        permits.release()               # the thread finishes its step, then applies the abort
        await wait_until(lambda: aborts() == expected_aborts, "the abort")

    async def close(holder):
        await holder[0].aclose()

    async def cancel_the_consumer(holder):
        received = []

        async def consume():
            async for out in holder[0]:
                received.append(out)
        task = asyncio.ensure_future(consume())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert received == []

    async def main():
        permits.release(12)
        tokens = [t async for out in front.generate(prompt_ids(6), SamplingParams(
            max_tokens=12, **GREEDY), "whole") for t in out.new_token_ids]
        assert tokens == reference_greedy(model, prompt_ids(6), 12)
        await first_output_then_abandon(close, 1)
        await first_output_then_abandon(cancel_the_consumer, 2)

        async def drop(holder):
            holder.clear()              # its last reference: the stream is collected
        await first_output_then_abandon(drop, 3)
        await wait_until(lambda: not engine.has_unfinished_requests(), "an idle engine")
        with pytest.raises(ValueError, match="maximum model length"):
            front.generate(prompt_ids(200), long_params)

    try:
        asyncio.run(main())
    finally:
        permits.release(1000)
        front.shutdown()
    assert engine.allocator.usage() == 0.0


def test_a_failed_engine_fails_its_streams_and_refuses_new_requests(model):
    engine = make_engine(model, num_kv_blocks=16)

    def broken_step():
        raise RuntimeError("boom")
    engine.step = broken_step
    front = AsyncLLMEngine(engine)

    async def main():
        with pytest.raises(EngineDeadError, match="boom"):
            async for _ in front.generate(prompt_ids(4), SamplingParams(max_tokens=2)):
                pass
        with pytest.raises(EngineDeadError):
            front.generate(prompt_ids(4), SamplingParams(max_tokens=2))

    try:
        asyncio.run(main())
    finally:
        front.shutdown()


# ---- OpenAI protocol ---------------------------------------------------------------------

def error_of(call, *args):
    with pytest.raises(proto.OpenAIError) as info:
        call(*args)
    return info.value


def test_chat_request_checks_give_ray_s_400_bodies():
    body = {"messages": [{"role": "user", "content": "hi"}], "temperature": 3}
    error = error_of(proto.parse_chat_request, body)
    assert error.status == 400
    assert error.body() == {"error": {
        "message": "Invalid request format: Input should be less than or equal to 2 at "
                   "('body', 'temperature')",
        "type": "less_than_equal", "param": 3, "code": "invalid_parameter"}}
    cases = [
        ({}, "missing", "Field required at ('body', 'messages')"),
        ({"messages": "hi"}, "list_type", "('body', 'messages')"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "literal_error",
         "('body', 'messages', 0, 'role')"),
        ({"messages": [], "top_p": 0}, "greater_than", "('body', 'top_p')"),
        ({"messages": [], "n": 0}, "greater_than_equal", "('body', 'n')"),
        ({"messages": [], "max_tokens": 0}, "greater_than_equal", "('body', 'max_tokens')"),
        ({"messages": [], "stop": ["s"] * 9}, "too_long", "at most 8 items"),
        ({"messages": [], "stream": "yes"}, "bool_type", "('body', 'stream')"),
        ({"messages": [], "seed": "x"}, "int_type", "('body', 'seed')"),
        ({"messages": [], "stream_options": {"include_usage": True}}, "value_error",
         "only be defined when `stream=True`"),
        ([1, 2], "model_attributes_type", "('body',)"),
    ]
    for request, error_type, text in cases:
        error = error_of(proto.parse_chat_request, request)
        assert (error.status, error.type, error.code) == (400, error_type, "invalid_parameter")
        assert error.message.startswith("Invalid request format: ") and text in error.message
    assert error_of(proto.parse_json_body, b"{nope").type == "json_invalid"
    assert error_of(proto.parse_completion_request, {"prompt": [1.5]}).type == "string_type"


def test_parsed_requests_carry_sampling_and_streaming_choices():
    chat = proto.parse_chat_request({
        "model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5,
        "max_completion_tokens": 7, "temperature": 0, "stop": "\n", "stream": True,
        "stream_options": {"include_usage": True}, "seed": 10, "n": 2, "unknown": 1})
    assert (chat.model, chat.n, chat.stream, chat.include_usage) == ("tiny", 2, True, True)
    assert chat.sampling == {"max_tokens": 7, "temperature": 0.0, "seed": 10, "stop": ["\n"]}
    assert proto.sampling_kwargs(chat, 1)["seed"] == 11
    SamplingParams(**proto.sampling_kwargs(chat, 1))
    completion = proto.parse_completion_request({"prompt": [[1, 2], [3]]})
    assert (completion.model, completion.n, completion.prompts) == (None, 1, [[1, 2], [3]])
    assert completion.sampling == {"max_tokens": None}


def test_model_selection():
    assert proto.select_model(None, ["only"]) == "only"
    assert proto.select_model("base:adapter", ["base"]) == "base:adapter"
    several = error_of(proto.select_model, None, ["a", "b"])
    assert (several.status, several.body()["error"]["code"]) == (400, 400)
    unknown = error_of(proto.select_model, "nope", ["a"], "req-1")
    assert unknown.body() == {"error": {
        "message": 'Got request for model "nope". Could not find base model with ID "nope". '
                   '(Request ID: req-1)', "type": "HTTPException", "param": None, "code": 404}}


def test_response_and_chunk_shapes():
    chat_id, cmpl_id = proto.new_request_id("chat"), proto.new_request_id("completion")
    assert chat_id.startswith("chatcmpl-") and cmpl_id.startswith("cmpl-")
    usage = proto.usage(3, 2)
    assert usage == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    chat = proto.chat_completion_response(chat_id, "m", 100, [proto.Choice(0, "hi", "stop")],
                                          usage)
    assert list(chat) == ["id", "object", "created", "model", "choices", "usage"]
    assert chat["object"] == "chat.completion" and chat["created"] == 100
    assert chat["choices"] == [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                                "logprobs": None, "finish_reason": "stop", "stop_reason": None}]
    text = proto.completion_response(cmpl_id, "m", 100, [proto.Choice(0, "hi", "length")], usage)
    assert text["object"] == "text_completion"
    assert text["choices"] == [{"index": 0, "text": "hi", "logprobs": None,
                                "finish_reason": "length", "stop_reason": None}]
    role = proto.chat_role_chunk(chat_id, "m", 100, 0, include_usage=True)
    assert list(role) == ["id", "object", "created", "model", "choices", "usage"]
    assert role["object"] == "chat.completion.chunk" and role["usage"] is None
    assert role["choices"] == [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                "logprobs": None, "finish_reason": None, "stop_reason": None}]
    last = proto.chat_chunk(chat_id, "m", 100, 0, {"content": "!"}, "stop", "\n")
    assert "usage" not in last
    assert last["choices"][0]["finish_reason"] == "stop"
    piece = proto.completion_chunk(cmpl_id, "m", 100, 0, "ab")
    assert piece["choices"] == [{"index": 0, "text": "ab", "logprobs": None,
                                 "finish_reason": None, "stop_reason": None}]
    final = proto.usage_chunk("chat", chat_id, "m", 100, usage)
    assert final["choices"] == [] and final["usage"] == usage
    event = proto.sse(final)
    assert event.startswith(b"data: {") and event.endswith(b"}\n\n")
    assert json.loads(event[len(b"data: "):]) == final
    assert proto.SSE_DONE == b"data: [DONE]\n\n"
    assert proto.model_list(["m"], 5) == {"object": "list", "data": [
        {"id": "m", "object": "model", "created": 5, "owned_by": "tessera"}]}


# ---- the engine split into pipeline stages ------------------------------------------------

def test_layers_split_into_consecutive_stages_the_larger_first():
    assert pipeline.split_layers(3, 4) == [range(0, 1), range(1, 2), range(2, 3), range(3, 3)]
    assert pipeline.split_layers(4, 4) == [range(i, i + 1) for i in range(4)]
    assert pipeline.split_layers(7, 3) == [range(0, 3), range(3, 5), range(5, 7)]
    assert pipeline.split_layers(2, 1) == [range(0, 2)]
    for bad in [(3, 0), (-1, 2), (2, 1.5)]:
        with pytest.raises(ValueError):
            pipeline.split_layers(*bad)


class FakeRef:
    def __init__(self, value):
        self.value = value


class FakeMethod:
    """An actor method as the runtime calls it: the arguments pickled (they cross processes),
    top-level refs resolved to their values, the result a ref."""

    def __init__(self, function):
        self.function = function

    def remote(self, *args):
        import pickle
        args = [a.value if isinstance(a, FakeRef) else a for a in args]
        return FakeRef(self.function(*pickle.loads(pickle.dumps(args))))


class FakeWorkerHandle:
    def __init__(self, worker):
        self.run = FakeMethod(worker.run)
        self.ping = FakeMethod(worker.ping)


@pytest.fixture
def fake_actor_get(monkeypatch):
    import tessera

    def get(refs, timeout=None):
        return [r.value for r in refs] if isinstance(refs, list) else refs.value

    monkeypatch.setattr(tessera, "get", get, raising=False)


@pytest.fixture(scope="module")
def float32_model_dir(tmp_path_factory):
    from tessera.serve.llm.tiny_model import save_model
    path = tmp_path_factory.mktemp("pipeline-model")
    save_model(str(path), random_model(dataclasses.replace(SMALL, n_layers=3), seed=2),
               TOKENIZER)
    return str(path)


@pytest.mark.parametrize("num_stages", [1, 2, 3, 4])
def test_an_engine_split_into_stages_gives_the_single_process_tokens(
        float32_model_dir, fake_actor_get, num_stages):
    """Each stage an EngineWorker (its layers and their KV pool), called as actors are (the
    batch and the hidden states pickled from stage to stage), under chunked prefill and
    preemption, greedy and seeded sampling: the same tokens as the engine in one process."""
    from tessera.serve.llm.tiny_model import load_model_config
    config = dict(num_kv_blocks=7, block_size=8, max_num_batched_tokens=24, model_name="tiny")
    prompts = {f"r{i}": prompt_ids(9 + 7 * i, i) for i in range(4)}
    params = {"r0": SamplingParams(max_tokens=12, **GREEDY),
              "r1": SamplingParams(max_tokens=10, temperature=0.9, seed=5, ignore_eos=True),
              "r2": SamplingParams(max_tokens=14, **GREEDY),
              "r3": SamplingParams(max_tokens=8, temperature=1.2, top_k=20, seed=9,
                                   ignore_eos=True)}

    def run(engine):
        for request_id, ids in prompts.items():
            engine.add_request(request_id, ids, dataclasses.replace(params[request_id]))
        return {rid: tokens for rid, (tokens, _, _) in run_all(engine).items()}

    single = LLMEngine(float32_model_dir, EngineConfig(**config), clock=FakeClock())
    expected = run(single)
    workers = [FakeWorkerHandle(pipeline.EngineWorker(float32_model_dir, i, num_stages, 7, 8))
               for i in range(num_stages)]
    shape, tokenizer, _ = load_model_config(float32_model_dir)
    split = LLMEngine(shape, EngineConfig(**config), tokenizer, clock=FakeClock(),
                      stages=pipeline.ActorStages(workers))
    assert run(split) == expected
    assert split.metrics.num_preemptions.value(split.metrics.labels) > 0  # it was exercised
    assert split.allocator.usage() == 0.0
    split.check_stages()


def test_a_stage_holds_only_its_layers_and_their_kv_pool(float32_model_dir):
    middle = pipeline.EngineWorker(float32_model_dir, 1, 3, 4, 8)._runner
    assert (middle.layers, middle.first, middle.last) == (range(1, 2), False, False)
    assert middle.model.tok is None and middle.model.norm is None
    assert [type(b).__name__ for b in middle.model.blocks] == ["Identity", "Block", "Identity"]
    assert middle.cache.keys.shape[0] == 1
    last = pipeline.EngineWorker(float32_model_dir, 3, 4, 4, 8)._runner
    assert last.layers == range(3, 3) and last.last and last.model.tok is not None
    assert last.cache.keys.shape[0] == 0


def test_a_dead_stage_fails_the_check_and_the_step(float32_model_dir, fake_actor_get):
    class DeadMethod:
        def remote(self, *args):
            raise RuntimeError("The actor died unexpectedly before finishing this task.")

    worker = FakeWorkerHandle(pipeline.EngineWorker(float32_model_dir, 0, 2, 4, 8))
    dead = FakeWorkerHandle(pipeline.EngineWorker(float32_model_dir, 1, 2, 4, 8))
    dead.run = dead.ping = DeadMethod()
    stages = pipeline.ActorStages([worker, dead])
    with pytest.raises(RuntimeError, match="actor died"):
        stages.check()
    from tessera.serve.llm.tiny_model import load_model_config
    shape, tokenizer, _ = load_model_config(float32_model_dir)
    engine = LLMEngine(shape, EngineConfig(num_kv_blocks=4, block_size=8), tokenizer,
                       clock=FakeClock(), stages=stages)
    engine.add_request("a", prompt_ids(5), SamplingParams(max_tokens=2, **GREEDY))
    with pytest.raises(RuntimeError, match="actor died"):
        engine.step()


def test_the_replica_slice_comes_from_the_environment(monkeypatch):
    from tessera.serve import context
    monkeypatch.delenv("TESSERA_SERVE_REPLICA_SLICE", raising=False)
    assert context._get_replica_slice() is None
    monkeypatch.setenv("TESSERA_SERVE_REPLICA_SLICE", "serve:llm#m#abc")
    monkeypatch.setenv("TESSERA_SERVE_REPLICA_SLICE_HOSTS", "4")
    found = context._get_replica_slice()
    assert (found.name, found.num_hosts) == ("serve:llm#m#abc", 4)
    group = found.placement_group({"TPU": 4.0})
    assert (group.id.hex(), group.bundle_count) == ("serve:llm#m#abc", 4)
    monkeypatch.setenv("TESSERA_SERVE_REPLICA_SLICE_HOSTS", "")
    with pytest.raises(ValueError, match="not a host count"):
        context._get_replica_slice()


# ---- LLMConfig and placement -------------------------------------------------------------

def test_placement_bundles_for_gpu_tensor_parallel_and_a_v6e_slice():
    gpu = LLMConfig(model_loading_config={"model_id": "m"}, accelerator_type="L4",
                    engine_kwargs={"tensor_parallel_size": 2})
    assert placement_bundles(gpu, engine="vLLM") == (
        [{"GPU": 1.0, "accelerator_type:L4": 0.001, "CPU": 1.0},
         {"GPU": 1.0, "accelerator_type:L4": 0.001}], "PACK")
    data_parallel = LLMConfig(model_loading_config={"model_id": "m"},
                              engine_kwargs={"data_parallel_size": 2})
    assert placement_bundles(data_parallel, engine="vLLM") == ([{"GPU": 1.0, "CPU": 1.0}],
                                                               "STRICT_PACK")
    tpu = LLMConfig(model_loading_config={"model_id": "m"}, accelerator_type="TPU-V6E",
                    accelerator_config={"kind": "tpu", "topology": "4x4"},
                    engine_kwargs={"tensor_parallel_size": 16})
    assert placement_bundles(tpu, engine="vLLM") == (
        [{"TPU": 4.0, "accelerator_type:TPU-V6E": 0.001}] * 4, "SPREAD")
    chips = LLMConfig(model_loading_config={"model_id": "m"}, accelerator_type="TPU-V6E",
                      engine_kwargs={"tensor_parallel_size": 2})
    assert placement_bundles(chips, engine="vLLM")[0] == [
        {"TPU": 1.0, "accelerator_type:TPU-V6E": 0.001, "CPU": 1.0},
        {"TPU": 1.0, "accelerator_type:TPU-V6E": 0.001}]
    assert placement_bundles(gpu, engine="tessera") == ([{"CPU": 1.0}], "PACK")


@pytest.mark.parametrize("accelerator, topology, tp, per_host, bundles", [
    ("TPU-V6E", {"topology": "2x4"}, 8, 8.0, 1),                    # one 8-chip host
    ("TPU-V6E", {"topology": "2x4", "chips_per_host": 4}, 8, 4.0, 2),
    ("TPU-V6E", {"topology": "8x8"}, 64, 4.0, 16),
    ("TPU-V4", {"topology": "2x2x2"}, 8, 4.0, 2),
])
def test_tpu_slices_take_one_bundle_per_host(accelerator, topology, tp, per_host, bundles):
    config = LLMConfig(model_loading_config={"model_id": "m"}, accelerator_type=accelerator,
                       accelerator_config={"kind": "tpu", **topology},
                       engine_kwargs={"tensor_parallel_size": tp})
    assert placement_bundles(config, engine="vLLM") == (
        [{"TPU": per_host, f"accelerator_type:{accelerator}": 0.001}] * bundles, "SPREAD")


def test_llm_config_checks_and_engine_choice(monkeypatch):
    base = {"model_loading_config": {"model_id": "m"}}
    bad = [
        dict(base, llm_engine="sglang"),
        dict(base, colour="red"),
        dict(base, engine_kwargs={"tensor_parallel_size": 0}),
        dict(base, deployment_config={"placement_group_bundles": [{"CPU": 1}]}),
        dict(base, placement_group_config={"bundles": [], "strategy": "PACK"}),
        dict(base, accelerator_type="TPU-V6E", accelerator_config={"kind": "tpu",
                                                                   "topology": "4x4"},
             engine_kwargs={"tensor_parallel_size": 8}),
        dict(base, accelerator_type="TPU-V6E", accelerator_config={"kind": "tpu",
                                                                   "topology": "4x4x4"}),
        {"model_loading_config": {}},
    ]
    for fields in bad:
        with pytest.raises(ValueError):
            LLMConfig.parse(fields)
    config = LLMConfig.parse(base)
    assert config.model_source == "m" and config.log_engine_metrics is True
    assert LLMConfig.parse(config.to_dict()) == config
    monkeypatch.setattr(llm_config, "vllm_available", lambda: False)
    assert config.engine() == "tessera"
    monkeypatch.setattr(llm_config, "vllm_available", lambda: True)
    assert config.engine() == "vLLM"
    assert LLMConfig.parse(dict(base, llm_engine="tessera")).engine() == "tessera"


def test_the_builtin_engine_runs_one_stage_per_host_of_its_slice():
    base = {"model_loading_config": {"model_id": "m"}, "llm_engine": "tessera"}
    v6e = dict(base, accelerator_type="TPU-V6E",
               accelerator_config={"kind": "tpu", "topology": "4x4"},
               engine_kwargs={"tensor_parallel_size": 4, "pipeline_parallel_size": 4})
    config = LLMConfig.parse(v6e)
    assert llm_config.builtin_stages(config) == (4, 4)
    assert llm_config.replica_slice(config) == {
        "accelerator_type": "TPU-V6E", "topology": "4x4", "sub_slice": False}
    half = LLMConfig.parse(dict(v6e, accelerator_config={
        "kind": "tpu", "topology": "2x4", "chips_per_host": 4, "sub_slice": True},
        engine_kwargs={"tensor_parallel_size": 4, "pipeline_parallel_size": 2}))
    assert llm_config.builtin_stages(half) == (2, 4)
    assert llm_config.replica_slice(half) == {
        "accelerator_type": "TPU-V6E", "topology": "2x4", "sub_slice": True}
    assert placement_bundles(half) == ([{"TPU": 4.0, "accelerator_type:TPU-V6E": 0.001}] * 2,
                                       "SPREAD")
    plain = LLMConfig.parse(base)
    assert llm_config.builtin_stages(plain) == (1, 0) and llm_config.replica_slice(plain) is None
    refused = [
        (dict(v6e, engine_kwargs={"tensor_parallel_size": 16}),
         "needs pipeline_parallel_size 4 and tensor_parallel_size 4, got 1 and 16"),
        (dict(base, engine_kwargs={"tensor_parallel_size": 2}), "must be 1, got 2 and 1"),
        (dict(v6e, engine_kwargs={"tensor_parallel_size": 4, "pipeline_parallel_size": 4,
                                  "data_parallel_size": 2}), "data_parallel_size must be 1"),
        (dict(v6e, accelerator_config={"kind": "tpu", "topology": "4x4", "sub_slice": 1}),
         "sub_slice must be a bool"),
    ]
    for fields, message in refused:
        with pytest.raises(ValueError, match=message):
            LLMConfig.parse(fields)
    # vLLM may shard a slice as it likes: TP=16 is its to run.
    LLMConfig.parse(dict(v6e, llm_engine="vLLM", engine_kwargs={"tensor_parallel_size": 16}))


# ---- the demo model ----------------------------------------------------------------------

def test_the_demo_model_generator_writes_a_loadable_model(tmp_path):
    out = tmp_path / "demo"
    assert make_demo_model.main([str(out), "--steps", "2"]) == 0
    assert sorted(os.listdir(out)) == ["config.json", "model.pt", "tokenizer.json"]
    described = json.loads((out / "config.json").read_text())
    assert described["trained_steps"] == 2 and described["format"] == "tessera-tiny-lm"
    model, tokenizer, _ = load_model(str(out))
    assert tokenizer.vocab_size == model.config.vocab_size
    engine = LLMEngine(str(out), EngineConfig(num_kv_blocks=16))
    runs = [engine.generate(["This License"], SamplingParams(max_tokens=8, **GREEDY))[0]
            for _ in range(2)]
    assert runs[0].num_output_tokens == 8 and runs[0].text == runs[1].text
    again = tmp_path / "again"
    make_demo_model.make_demo_model(str(again), steps=2)
    first, second = (torch.load(d / "model.pt") for d in (out, again))
    assert all(torch.equal(first[k], second[k]) for k in first)   # training is deterministic
    assert make_demo_model.main([str(tmp_path / "x"), "--corpus", str(tmp_path / "none")]) == 1

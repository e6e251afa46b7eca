"""The built-in LLM engine served through the OpenAI route, against the same engine called in
process, in the same run (docs/benchmarks.md, "Serving: the built-in LLM engine").

Like `vllm bench serve`: for each concurrency cap (1, 8 and 32 streams) it sends --num-prompts
streamed completions with Poisson arrivals (--request-rate per second, exponential gaps) and
measures, per request, TTFT (send to first chunk) and TPOT ((E2E - TTFT) / (tokens - 1)), and for
the run the output token throughput (all output tokens / duration). Every request generates
exactly --max-tokens tokens (ignore_eos), greedily, from the demo model.

  in-process  AsyncLLMEngine.generate in this process (the engine LLMServer runs, same config)
  served      POST /v1/completions with stream=true through the proxy to LLMServer, on a local
              cluster started here (tessera.init), with the same engine config

    PYTHONPATH=build/python TESSERA_BIN=build/bin/tessera \
      /usr/bin/python3 bench/serve/llm_bench.py [--num-prompts 48] [--request-rate 16]

Serving overhead = 1 - served tokens/s / in-process tokens/s, per concurrency. Nothing is
asserted: it measures.
"""
import argparse
import asyncio
import json
import random
import statistics
import sys
import threading
import time
import urllib.request

CONCURRENCY = (1, 8, 32)
PROMPT = "The GNU General Public License is a free, copyleft license for software"


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def summarize(records, duration):
    ttft = [r["ttft"] for r in records]
    tpot = [(r["e2e"] - r["ttft"]) / (r["tokens"] - 1) for r in records if r["tokens"] > 1]
    tokens = sum(r["tokens"] for r in records)
    return {"requests": len(records), "output_tokens": tokens, "duration_s": duration,
            "tokens_per_s": tokens / duration,
            "ttft_ms_mean": 1000 * statistics.mean(ttft), "ttft_ms_p99": 1000 * percentile(ttft, 99),
            "tpot_ms_mean": 1000 * statistics.mean(tpot) if tpot else 0.0}


def arrivals(n, rate, seed):
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(rate)
    return out


async def run_in_process(engine, n, rate, cap, max_tokens):
    from tessera.serve.llm.sampling import SamplingParams

    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    limit = asyncio.Semaphore(cap)
    records = []

    async def one(i, at, start):
        await asyncio.sleep(max(0.0, start + at - time.monotonic()))
        async with limit:
            sent = time.monotonic()
            first, tokens = None, 0
            async for out in engine.generate(f"{PROMPT} {i}", params):
                if out.new_token_ids and first is None:
                    first = time.monotonic()
                tokens += len(out.new_token_ids)
            records.append({"ttft": first - sent, "e2e": time.monotonic() - sent,
                            "tokens": tokens})

    start = time.monotonic()
    await asyncio.gather(*(one(i, at, start) for i, at in enumerate(arrivals(n, rate, cap))))
    return summarize(records, time.monotonic() - start)


def run_served(base, n, rate, cap, max_tokens):
    limit = threading.Semaphore(cap)
    records, lock = [], threading.Lock()
    body = {"model": "demo", "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}

    def one(i, at, start):
        time.sleep(max(0.0, start + at - time.monotonic()))
        with limit:
            request = urllib.request.Request(
                f"{base}/v1/completions", data=json.dumps({**body, "prompt": f"{PROMPT} {i}"})
                .encode(), headers={"Content-Type": "application/json"})
            sent = time.monotonic()
            first, tokens = None, 0
            with urllib.request.urlopen(request, timeout=600) as response:
                for line in response:
                    line = line.strip()
                    if not line.startswith(b"data: ") or line == b"data: [DONE]":
                        continue
                    chunk = json.loads(line[6:])
                    if first is None and chunk["choices"] and chunk["choices"][0]["text"]:
                        first = time.monotonic()
                    usage = chunk.get("usage")
                    if usage:
                        tokens = usage["completion_tokens"]
            with lock:
                records.append({"ttft": (first or time.monotonic()) - sent,
                                "e2e": time.monotonic() - sent, "tokens": tokens})

    start = time.monotonic()
    threads = [threading.Thread(target=one, args=(i, at, start))
               for i, at in enumerate(arrivals(n, rate, cap))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return summarize(records, time.monotonic() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num-prompts", type=int, default=48)
    parser.add_argument("--request-rate", type=float, default=16.0)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--json")
    args = parser.parse_args()

    from tessera.serve.llm.async_engine import AsyncLLMEngine
    from tessera.serve.llm.engine import EngineConfig, LLMEngine
    from tessera.serve.llm.server import demo_model_dir

    model_dir = demo_model_dir()
    config, _ = EngineConfig.from_engine_kwargs({}, "demo")
    results = {"in_process": {}, "served": {}}

    async def in_process_all():
        engine = AsyncLLMEngine(LLMEngine(model_dir, config))
        try:
            for cap in CONCURRENCY:
                results["in_process"][cap] = await run_in_process(
                    engine, args.num_prompts, args.request_rate, cap, args.max_tokens)
        finally:
            engine.shutdown()

    asyncio.run(in_process_all())

    import tessera
    from tessera import serve
    from tessera.serve.llm import LLMConfig, build_openai_app

    tessera.init(num_cpus=2)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": 0})
        llm = LLMConfig(model_loading_config={"model_id": "demo", "model_source": model_dir},
                        llm_engine="tessera")
        serve.run(build_openai_app({"llm_configs": [llm]}), name="llm", route_prefix="/")
        address = [p.address for p in serve.status().proxies.values() if p.address][0]
        for cap in CONCURRENCY:
            results["served"][cap] = run_served(f"http://{address}", args.num_prompts,
                                                args.request_rate, cap, args.max_tokens)
        serve.shutdown()
    finally:
        tessera.shutdown()

    print(f"{'streams':>7} | {'in-process tok/s':>16} {'TTFT ms':>8} {'TPOT ms':>8} | "
          f"{'served tok/s':>12} {'TTFT ms':>8} {'p99':>7} {'TPOT ms':>8} | {'overhead':>8}")
    for cap in CONCURRENCY:
        a, b = results["in_process"][cap], results["served"][cap]
        print(f"{cap:>7} | {a['tokens_per_s']:>16,.0f} {a['ttft_ms_mean']:>8.1f} "
              f"{a['tpot_ms_mean']:>8.2f} | {b['tokens_per_s']:>12,.0f} {b['ttft_ms_mean']:>8.1f} "
              f"{b['ttft_ms_p99']:>7.1f} {b['tpot_ms_mean']:>8.2f} | "
              f"{1 - b['tokens_per_s'] / a['tokens_per_s']:>8.1%}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

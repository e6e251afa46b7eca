"""Serve a language model with OpenAI's routes (tessera.serve.llm, docs/serve.md): the demo model
(a small byte-level decoder trained here, offline, on the GPL's text the first time it is used)
behind the C++ proxy, on the demo cluster's TPU v6e 4x4 slice: each replica takes a 2x4 half of
it (2 hosts of 4 chips, reserved whole by the serve controller) and runs the model as two
pipeline stages, one engine worker per host. It is asked a question with a streaming chat
completion (tokens printed as they arrive), then a burst of requests makes the deployment scale
from one replica to two (the second takes the other half of the slice), and back once the burst
is over (its half released).

    scripts/run-example python serve_llm       (or from scripts/run-demo)
"""
import json
import threading
import time
import urllib.request

import tessera
from tessera import serve
from tessera.serve.llm import LLMConfig, build_openai_app


def post(url, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(request, timeout=300)


def stream_chat(base, question):
    """A streaming chat completion: each `data: {...}` event's delta printed as it comes."""
    body = {"model": "demo", "messages": [{"role": "user", "content": question}],
            "max_tokens": 80, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    usage = None
    with post(f"{base}/v1/chat/completions", body) as response:
        for line in response:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[len("data: "):])
            for choice in chunk["choices"]:
                print(choice["delta"].get("content", ""), end="", flush=True)
            usage = chunk.get("usage") or usage
    print(f"\n   usage: {usage}")


def running_replicas():
    deployments = serve.status().applications["llm"].deployments
    return {name: d.replica_states.get("RUNNING", 0) for name, d in deployments.items()
            if name.startswith("LLMServer")}


def burst(base, clients, seconds):
    """`clients` threads each sending completions one after another until the deployment has
    scaled up (or `seconds` passed): the replicas' ongoing requests rise past the target."""
    body = {"model": "demo", "prompt": "The GNU General Public License", "max_tokens": 160,
            "temperature": 1.0, "seed": 1}
    stop = threading.Event()
    done = []

    def client():
        while not stop.is_set():
            done.append(json.load(post(f"{base}/v1/completions", body))["usage"])

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    started, most = time.monotonic(), 1
    while time.monotonic() - started < seconds:
        counts = running_replicas()
        most = max([most, *counts.values()])
        print(f"   {time.monotonic() - started:4.0f} s: {len(done):4d} completions, "
              f"running replicas: {counts}")
        if most > 1:
            break
        time.sleep(2)
    stop.set()
    for thread in threads:
        thread.join()
    return most, sum(usage["completion_tokens"] for usage in done)


def main():
    tessera.init()
    serve.start(http_options={"host": "127.0.0.1", "port": 0})
    # A 2x4 block of the demo's 4x4 slice per replica (sub_slice): two replicas fill the slice.
    # The built-in engine runs one pipeline stage per host, tensor parallel over its 4 chips.
    config = LLMConfig(
        model_loading_config={"model_id": "demo", "model_source": "tessera-demo"},
        llm_engine="tessera", accelerator_type="TPU-V6E",
        accelerator_config={"kind": "tpu", "topology": "2x4", "chips_per_host": 4,
                            "sub_slice": True},
        engine_kwargs={"tensor_parallel_size": 4, "pipeline_parallel_size": 2},
        deployment_config={"autoscaling_config": {
            "min_replicas": 1, "max_replicas": 2, "target_ongoing_requests": 4,
            "upscale_delay_s": 0, "downscale_delay_s": 5, "look_back_period_s": 4}})
    print("== serve.run(build_openai_app(...)): the demo model (trained on first use, ~1 min) "
          "on half of the v6e 4x4 slice")
    started = time.monotonic()
    serve.run(build_openai_app({"llm_configs": [config]}), name="llm", route_prefix="/")
    address = [p.address for p in serve.status().proxies.values() if p.address][0]
    base = f"http://{address}"
    print(f"   RUNNING after {time.monotonic() - started:.0f} s; OpenAI routes at {base}/v1")
    with urllib.request.urlopen(f"{base}/v1/models") as response:
        print(f"   GET /v1/models: {[m['id'] for m in json.load(response)['data']]}")
    layout = serve.get_deployment_handle("LLMServer:demo", "llm").engine_layout.remote().result()
    print(f"   the replica on {layout['node_id']} holds slice {layout['slice']}; its engine "
          "workers, one pipeline stage per host:")
    for worker in layout["workers"]:
        print(f"     stage {worker['stage']} (layers {worker['layers'][0]}.."
              f"{worker['layers'][1] - 1}) on {worker['node_id']}: TPU_WORKER_ID="
              f"{worker['tpu_worker_id']}, TPU chips {worker['tpu_ids']}")
    print("== a streaming chat completion (POST /v1/chat/completions, stream=true)")
    print("   ", end="")
    stream_chat(base, "What does this License say?")
    print("== a burst: 16 clients sending completions until the model's deployment scales up")
    most, tokens = burst(base, 16, 60)
    print(f"   {tokens} tokens generated; at most {most} replicas running")
    deadline = time.monotonic() + 60
    while max(running_replicas().values()) > 1 and time.monotonic() < deadline:
        time.sleep(1)
    print(f"== idle again: running replicas {running_replicas()}")
    serve.shutdown()
    tessera.shutdown()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes the dashboard's API fixtures (tests/dashboard/fixtures/*.json) for a small simulated
cluster: h100-0 (8 H100 on NVSwitch), cpu-0 (dead), and the four hosts of the TPU v6e 4x4 slice
v6e-0, which slice group job-7c1e2a90-1 holds for the 16-rank job llama-v6e-pretrain (one rank per
chip); plus placement groups, demand, actors, drivers, events, device telemetry, log recipes,
and Serve: an LLM application with two Serve LLM replicas and one whose replica waits for GPUs
that placement group serve-llm holds.

The JSON follows the head's HTTP contract: proto3 JSON with field names kept and defaults
included, enums as names, int64 as numbers, Resources as amounts in their units. Times are
relative to meta.json's fixture_now_ms; serve_fixtures.py moves them to the present.

Deterministic (no randomness, no clock): run it again after changing it and commit the output.
    python3 tests/dashboard/make_fixtures.py [--out DIR]
"""

import argparse
import json
import math
import pathlib

NOW = 1733140800000  # 2024-12-02 12:00:00 UTC, the fixtures' "now"
MIN = 60_000
GIB = 1024 ** 3

SLICE = "v6e-0"
SLICE_GROUP = "job-7c1e2a90-1"
TRAIN_JOB = "job-7c1e2a90"
SMOKE_JOB = "job-0b5d33f1"
SERVE_DRIVER = "driver-5e0c11"
DEAD_DRIVER = "driver-2b7d40"


def grant(resource, instances):
    return {"resource": resource, "instances": instances, "amounts_raw": [10000] * len(instances)}


def allocation(resources, devices=()):
    return {"resources": resources, "devices": list(devices)}


def all_pairs(count, kind, lanes, gbps):
    return [{"a": a, "b": b, "kind": kind, "lanes": lanes, "gigabytes_per_second": gbps}
            for a in range(count) for b in range(a + 1, count)]


def node_info(node_id, address, resources, available, labels, devices, state, heartbeat_ms, workers, incarnation):
    return {
        "node": {
            "node_id": node_id,
            "address": address,
            "resources": resources,
            "labels": {"tessera.io/node-id": node_id, **labels},
            "devices": devices,
            "incarnation": incarnation,
        },
        "state": state,
        "available": available,
        "last_heartbeat_age_ms": heartbeat_ms,
        "workers": workers,
    }


def make_nodes():
    h100_total = {"CPU": 224, "memory": 2048 * GIB, "object_store_memory": 64 * GIB, "GPU": 8,
                  "accelerator_type:H100": 1}
    h100_avail = dict(h100_total, CPU=200, memory=2048 * GIB - 96 * GIB, object_store_memory=41 * GIB, GPU=6)
    nodes = [
        node_info(
            "h100-0", "10.0.0.10:7701", h100_total, h100_avail,
            {"tessera.io/accelerator-type": "H100", "tessera.io/availability-zone": "us-east5-a",
             "tessera.io/node-group": "h100", "team": "ml-infra"},
            [{"resource": "GPU", "count": 8, "numa_node": [0, 0, 0, 0, 1, 1, 1, 1],
              "nearest_nic": [f"ibp{i}" for i in range(8)],
              "links": all_pairs(8, "nvswitch", 18, 450.0)}],
            "ALIVE", 412, 3, "3f9c2a1e7b"),
        node_info(
            "cpu-0", "10.0.0.20:7701",
            {"CPU": 32, "memory": 128 * GIB, "object_store_memory": 8 * GIB},
            {"CPU": 32, "memory": 128 * GIB, "object_store_memory": 8 * GIB},
            {"tessera.io/availability-zone": "us-east5-a", "tessera.io/node-group": "cpu"},
            [], "DEAD", 95210, 0, "a71d0c44e2"),
    ]
    ici = [{"a": a, "b": b, "kind": "ici", "lanes": 1, "gigabytes_per_second": 56.0}
           for a, b in ((0, 1), (0, 2), (1, 3), (2, 3))]
    for w in range(4):
        total = {"CPU": 180, "memory": 720_000_000_000, "object_store_memory": 64 * GIB, "TPU": 4,
                 SLICE: 1, "accelerator_type:TPU-V6E": 1}
        if w == 0:
            total["TPU-v6e-16-head"] = 1
        avail = dict(total, CPU=172, object_store_memory=52 * GIB, TPU=0, **{SLICE: 0})
        if w == 0:
            avail["TPU-v6e-16-head"] = 0
        nodes.append(node_info(
            f"{SLICE}-w{w}", f"10.0.1.{10 + w}:7701", total, avail,
            {"tessera.io/accelerator-type": "TPU-V6E", "tessera.io/tpu-slice-name": SLICE,
             "tessera.io/tpu-worker-id": str(w), "tessera.io/tpu-topology": "4x4",
             "tessera.io/tpu-pod-type": "v6e-16", "tessera.io/fabric-domain": SLICE,
             "tessera.io/fabric-kind": "ici", "tessera.io/availability-zone": "us-east5-b",
             "tessera.io/node-group": "v6e"},
            [{"resource": "TPU", "count": 4, "numa_node": [0, 0, 1, 1], "nearest_nic": ["eth0"] * 4,
              "links": ici}],
            "ALIVE", 250 + 110 * w, 4, f"b{w}e0917c3d"))
    return sorted(nodes, key=lambda n: n["node"]["node_id"])


def make_placement_groups():
    return [
        {
            "id": "pg-eval-sweep-2", "name": "eval-sweep", "strategy": "STRICT_PACK",
            "state": "PENDING", "option": 0,
            "bundles": [{"index": 0, "node_id": "", "allocation": allocation({})}],
            "explanation": "waiting for room: no node has 8 GPU free (h100-0 has 6 of 8; 2 are held by "
                           "placement group serve-llm)",
            "owner": SERVE_DRIVER,
        },
        {
            "id": "pg-serve-llm-1", "name": "serve-llm", "strategy": "PACK",
            "state": "CREATED", "option": 0,
            "bundles": [
                {"index": i, "node_id": "h100-0",
                 "allocation": allocation({"CPU": 8, "GPU": 1, "memory": 48 * GIB}, [grant("GPU", [i])])}
                for i in range(2)
            ],
            "explanation": "", "owner": SERVE_DRIVER,
        },
    ]


def make_slices():
    hosts = []
    for w in range(4):
        resources = {"CPU": 8, "TPU": 4, SLICE: 1}
        if w == 0:
            resources["TPU-v6e-16-head"] = 1
        hosts.append({"domain": SLICE, "node_id": f"{SLICE}-w{w}", "worker": w,
                      "allocation": allocation(resources, [grant("TPU", [0, 1, 2, 3])])})
    return {
        "slices": [{"name": SLICE, "accelerator_type": "TPU-V6E", "topology": "4x4", "hosts": 4,
                    "hosts_alive": 4, "intact": True, "held_by": SLICE_GROUP}],
        "groups": [{"id": "sg-7c1e2a90-1", "name": SLICE_GROUP, "state": "RESERVED",
                    "alternative": 0, "domains": [SLICE], "hosts": hosts, "explanation": "", "owner": ""}],
        "next_page_token": "",
    }


def usage_of(nodes):
    used, total = {}, {}
    for info in nodes:
        if info["state"] != "ALIVE":
            continue
        for name, amount in info["node"]["resources"].items():
            total[name] = total.get(name, 0) + amount
            used[name] = used.get(name, 0) + amount - info["available"].get(name, 0)
    return [{"resource": name, "used": used[name], "total": total[name]} for name in sorted(total)]


def rank(r, state, exit_reason=""):
    w = r // 4
    return {
        "rank": r, "local_rank": r % 4, "node_rank": w, "node_id": f"{SLICE}-w{w}",
        "host": f"10.0.1.{10 + w}", "worker_id": f"w-{SLICE}-{w}-{r % 4}", "pid": 41200 + r,
        "state": state, "exit_reason": exit_reason,
        "isolation_env": {"TPU_VISIBLE_CHIPS": str(r % 4), "TPU_WORKER_ID": str(w)},
    }


def make_jobs():
    train = {
        "job_id": TRAIN_JOB, "name": "llama-v6e-pretrain", "state": "RUNNING",
        "message": f"16 ranks running on {SLICE_GROUP}", "restart_count": 1, "max_restarts": 3,
        "membership_changes": 0, "world_size": 16, "reservation": SLICE_GROUP,
        "ranks": [rank(r, "RUNNING") for r in range(16)],
        "submit_time_ms": NOW - 47 * MIN, "start_time_ms": NOW - 46 * MIN, "end_time_ms": 0,
        "exit_code": 0, "log_dir": f"/var/lib/tessera/jobs/{TRAIN_JOB}",
        "argv": ["python", "train.py", "--model", "llama-3-8b", "--steps", "100000"],
        "attached": False, "launch_ms": 41250, "last_restart_ms": 18310,
    }
    smoke_ranks = []
    for r in range(2):
        smoke_ranks.append({
            "rank": r, "local_rank": r, "node_rank": 0, "node_id": "h100-0", "host": "10.0.0.10",
            "worker_id": f"w-h100-0-{r}", "pid": 30100 + r, "state": "SUCCEEDED",
            "exit_reason": "exited with code 0", "isolation_env": {"CUDA_VISIBLE_DEVICES": str(2 + r)},
        })
    smoke = {
        "job_id": SMOKE_JOB, "name": "resnet-smoke", "state": "SUCCEEDED",
        "message": "every rank exited 0", "restart_count": 0, "max_restarts": 0,
        "membership_changes": 0, "world_size": 2, "reservation": f"{SMOKE_JOB}-0",
        "ranks": smoke_ranks, "submit_time_ms": NOW - 180 * MIN, "start_time_ms": NOW - 179 * MIN,
        "end_time_ms": NOW - 170 * MIN, "exit_code": 0, "log_dir": f"/var/lib/tessera/jobs/{SMOKE_JOB}",
        "argv": ["torchrun", "resnet.py", "--epochs", "1"], "attached": False, "launch_ms": 9800,
        "last_restart_ms": 0,
    }
    drivers = [
        {"job_id": DEAD_DRIVER, "argv": ["python", "preprocess.py", "--shards", "64"], "node_id": "cpu-0",
         "worker_id": "w-cpu-0-0", "state": "FAILED", "exit_reason": "node cpu-0 was declared dead",
         "start_time_ms": NOW - 300 * MIN, "end_time_ms": NOW - 25 * MIN, "failure_presumed": True},
        {"job_id": SERVE_DRIVER, "argv": ["python", "serve.py", "--model", "llama-3-70b"], "node_id": "h100-0",
         "worker_id": "w-h100-0-9", "state": "RUNNING", "exit_reason": "",
         "start_time_ms": NOW - 120 * MIN, "end_time_ms": 0, "failure_presumed": False},
    ]
    return {"jobs": [train, smoke], "drivers": drivers, "next_page_token": ""}


def make_actors():
    def actor(actor_id, name, ns, cls, owner, state, node, restarts=0, cause="", detached=False):
        alive = state == "ALIVE"
        return {"actor_id": actor_id, "name": name, "namespace": ns, "class_name": cls, "owner": owner,
                "state": state, "address": "10.0.0.10:" + str(40000 + int(actor_id[:4], 16) % 1000) if alive else "",
                "node_id": node if alive else "", "restarts": restarts, "death_cause": cause,
                "detached": detached, "worker_id": f"w-{node}-a{actor_id[:2]}" if alive else ""}

    return {"actors": [
        actor("1a2b3c4d5e6f7081", "llm-server", "serve", "LlmServer", SERVE_DRIVER, "ALIVE", "h100-0"),
        actor("4c5d6e7f8091a2b3", "router", "serve", "Router", SERVE_DRIVER, "ALIVE", "h100-0", restarts=1),
        actor("7e8f90a1b2c3d4e5", "tokenizer", "", "Tokenizer", DEAD_DRIVER, "DEAD", "cpu-0",
              cause="node cpu-0 was declared dead"),
        actor("9f0e1d2c3b4a5968", "metrics-sink", "ops", "MetricsSink", "", "ALIVE", "h100-0", detached=True),
    ], "next_page_token": ""}


LLM_REPLICAS = ["llm#LLMServer:llama-3-8b#k2v9q4xa", "llm#LLMServer:llama-3-8b#p7m3d8rt"]
WAITING_REPLICA = "summarizer#Summarizer#w4c1n6ze"
WAITING_WHY = ("waiting for resources: {CPU: 1, GPU: 8}; 1 node could fit GPU=8; all are busy "
               "(available GPU: 6; held by placement group serve-llm)")


def make_serve():
    """GET serve: Serve's status with each deployment's replicas (ServeStatus JSON); times in
    Unix seconds, relative to NOW."""
    now_s = NOW / 1000

    def replica(replica_id, state, node, pid, actor, since_min, message=""):
        return {"replica_id": replica_id, "state": state, "node_id": node, "actor_id": actor,
                "pid": pid, "state_since_s": now_s - since_min * 60, "message": message}

    def deployment(name, status, trigger, replicas, target, message=""):
        states = {}
        for r in replicas:
            states[r["state"]] = states.get(r["state"], 0) + 1
        return {"name": name, "status": status, "status_trigger": trigger, "message": message,
                "replica_states": states, "target_num_replicas": target, "replicas": replicas}

    llm = {
        "name": "llm", "status": "RUNNING", "message": "", "last_deployed_time_s": now_s - 42 * 60,
        "route_prefix": "/", "ingress_deployment": "OpenAiIngress",
        "deployments": [
            deployment("LLMServer:llama-3-8b", "HEALTHY", "CONFIG_UPDATE_COMPLETED", [
                replica(LLM_REPLICAS[0], "RUNNING", "h100-0", 51234, "3a4b5c6d7e8f9012", 41),
                replica(LLM_REPLICAS[1], "RUNNING", "h100-0", 51388, "6d7e8f90a1b2c3d4", 40),
            ], 2),
            deployment("OpenAiIngress", "HEALTHY", "CONFIG_UPDATE_COMPLETED", [
                replica("llm#OpenAiIngress#b8y0u0gh", "RUNNING", "h100-0", 51102, "0a1b2c3d4e5f6071", 42),
            ], 1),
        ],
    }
    summarizer = {
        "name": "summarizer", "status": "DEPLOYING", "message": "", "last_deployed_time_s": now_s - 3 * 60,
        "route_prefix": "/summarize", "ingress_deployment": "Summarizer",
        "deployments": [
            deployment("Summarizer", "UPDATING", "CONFIG_UPDATE_STARTED", [
                replica(WAITING_REPLICA, "STARTING", "", 0, "", 3, WAITING_WHY),
            ], 1, message="Deployment 'Summarizer' in application 'summarizer' has 1 replicas that "
                          "have taken more than 30s to be scheduled. This may be due to waiting for "
                          "the cluster to auto-scale or for a runtime environment to be installed. "
                          f"Why they are not placed: {WAITING_WHY}"),
        ],
    }
    return {"started": True,
            "proxies": [{"node_id": "head", "status": "HEALTHY", "address": "10.0.0.1:8000"}],
            "applications": [llm, summarizer], "target_capacity": 100}


def make_serve_metrics():
    """GET serve/metrics: Serve's metric families as the head gives them (serve_metrics_json.h):
    the proxy's requests and the two Serve LLM replicas' engine figures."""
    def counter(name, help_text, series):
        return {"name": name, "type": "counter", "help": help_text,
                "series": [{"labels": labels, "value": value} for labels, value in series]}

    def gauge(name, help_text, series):
        return dict(counter(name, help_text, series), type="gauge")

    def histogram(name, help_text, bounds, series):
        out = []
        for labels, count, mean in series:
            counts = [round(count * min(1.0, b / (2 * mean))) for b in bounds] + [count]
            out.append({"labels": labels, "count": count, "sum": round(count * mean, 3),
                        "bounds": bounds, "counts": counts})
        return {"name": name, "type": "histogram", "help": help_text, "series": out}

    route = {"route": "/", "method": "POST", "application": "llm"}
    engine = [({"ReplicaId": r, "engine": "0", "model_name": "llama-3-8b"}, i) for i, r in enumerate(LLM_REPLICAS)]
    ms = [1, 2, 5, 10, 20, 50, 100, 200, 300, 400, 500, 1000, 2000, 5000, 10000, 60000, 120000, 300000, 600000]
    return {"families": [
        counter("ray_serve_num_http_requests_total", "HTTP requests the Serve proxy answered.",
                [(dict(route, status_code="200"), 1523), (dict(route, status_code="400"), 12)]),
        counter("ray_serve_num_http_error_requests_total", "HTTP requests the Serve proxy answered with an error.",
                [({"route": "/", "error_code": "400", "method": "POST", "application": "llm"}, 12)]),
        histogram("ray_serve_http_request_latency_ms", "End-to-end latency of HTTP requests at the Serve proxy.",
                  ms, [(dict(route, status_code="200"), 1523, 850.0)]),
        counter("ray_vllm_generation_tokens_total", "Number of generation tokens processed.",
                [(labels, 190400 + 2100 * i) for labels, i in engine]),
        counter("ray_vllm_prompt_tokens_total", "Number of prefill tokens processed.",
                [(labels, 48800 + 900 * i) for labels, i in engine]),
        counter("ray_vllm_request_success_total", "Count of successfully processed requests.",
                [(dict(labels, finished_reason=reason), n + 3 * i) for labels, i in engine
                 for reason, n in (("stop", 700), ("length", 61))]),
        gauge("ray_vllm_num_requests_running", "Number of requests in model execution batches.",
              [(labels, 3 + i) for labels, i in engine]),
        gauge("ray_vllm_num_requests_waiting", "Number of requests waiting to be processed.",
              [(labels, i) for labels, i in engine]),
        gauge("ray_vllm_kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
              [(labels, 0.37 + 0.2 * i) for labels, i in engine]),
        histogram("ray_vllm_time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                  [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1.0],
                  [(labels, 761 + 3 * i, 0.085) for labels, i in engine]),
        histogram("ray_vllm_inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                  [0.01, 0.025, 0.05, 0.075, 0.1],
                  [(labels, 189000 + 2000 * i, 0.021) for labels, i in engine]),
        histogram("ray_vllm_e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                  [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0],
                  [(labels, 761 + 3 * i, 2.3) for labels, i in engine]),
    ]}


def make_events():
    lines = [
        (360, "node", "node h100-0 registered: 8 × H100, 224 CPU"),
        (359, "node", "node cpu-0 registered: 32 CPU"),
        (358, "node", "node v6e-0-w0 registered: 4 × TPU-V6E, slice v6e-0 worker 0"),
        (358, "node", "node v6e-0-w1 registered: 4 × TPU-V6E, slice v6e-0 worker 1"),
        (358, "node", "node v6e-0-w2 registered: 4 × TPU-V6E, slice v6e-0 worker 2"),
        (358, "node", "node v6e-0-w3 registered: 4 × TPU-V6E, slice v6e-0 worker 3"),
        (300, "job", f"driver {DEAD_DRIVER} started on cpu-0: python preprocess.py --shards 64"),
        (180, "job", f"job {SMOKE_JOB} (resnet-smoke) submitted: 2 ranks"),
        (180, "reservation", f"placement group {SMOKE_JOB}-0 created: 1 bundle on h100-0"),
        (170, "job", f"job {SMOKE_JOB} (resnet-smoke) succeeded"),
        (170, "reservation", f"placement group {SMOKE_JOB}-0 removed"),
        (120, "job", f"driver {SERVE_DRIVER} started on h100-0: python serve.py --model llama-3-70b"),
        (119, "reservation", "placement group serve-llm created: 2 bundles on h100-0"),
        (118, "actor", "actor serve/llm-server alive on h100-0"),
        (118, "actor", "actor serve/router alive on h100-0"),
        (47, "job", f"job {TRAIN_JOB} (llama-v6e-pretrain) submitted: 16 ranks on a TPU-V6E 4x4 slice"),
        (47, "reservation", f"slice group {TRAIN_JOB}-0 reserved: {SLICE}"),
        (31, "worker", f"rank 5 of job {TRAIN_JOB} failed on {SLICE}-w1: exited with code 1"),
        (31, "job", f"job {TRAIN_JOB} restarting its gang (restart 1 of 3)"),
        (31, "reservation", f"slice group {SLICE_GROUP} reserved: {SLICE}"),
        (30, "actor", "actor serve/router restarting on h100-0 (restart 1)"),
        (25, "node", "node cpu-0 declared dead: no heartbeat for 30 s"),
        (25, "job", f"driver {DEAD_DRIVER} presumed failed: node cpu-0 was declared dead"),
        (25, "actor", "actor tokenizer dead: node cpu-0 was declared dead"),
        (3, "reservation", "placement group eval-sweep waits: no node has 8 GPU free"),
    ]
    # Notices want a user's attention (a node lost and what it took); the rest are changes.
    notice = lambda message: "declared dead" in message or "presumed failed" in message
    events = [{"seq": i + 1, "time_ms": NOW - minutes * MIN + i * 1000, "kind": kind, "message": message,
               "notice": notice(message)}
              for i, (minutes, kind, message) in enumerate(lines)]
    return {"events": events, "next": len(events) + 1}


def samples(count, pick):
    out = []
    for i in range(count):
        sample = {"time_ms": NOW - (count - 1 - i) * 2000}
        sample.update({k: v for k, v in pick(i).items() if v is not None})
        out.append(sample)
    return out


def make_telemetry(nodes):
    n = 60
    telemetry = {}
    gpus = []
    for g in range(8):
        busy = g < 2

        def gpu(i, g=g, busy=busy):
            wave = math.sin((i + 7 * g) / 6.0)
            util = 0.72 + 0.2 * wave if busy else max(0.0, 0.02 + 0.02 * wave)
            return {
                "utilization": round(util, 3),
                "memory_used_bytes": int((61 + 4 * wave) * GIB) if busy else int(0.6 * GIB),
                "memory_total_bytes": 80 * GIB,
                "power_watts": round(180 + 480 * util, 1),
                "temperature_celsius": round(34 + 36 * util, 1),
            }

        gpus.append({"resource": "GPU", "index": g, "type": "H100", "samples": samples(n, gpu)})
    telemetry["h100-0"] = {"node_id": "h100-0", "devices": gpus}
    telemetry["cpu-0"] = {"node_id": "cpu-0", "devices": []}
    for w in range(4):
        chips = []
        for c in range(4):
            def tpu(i, w=w, c=c):
                wave = math.sin((i + 5 * c + 11 * w) / 5.0)
                return {
                    "memory_used_bytes": int((27.5 + 1.5 * wave) * GIB),
                    "memory_total_bytes": 32 * GIB,
                    "duty_cycle": round(0.88 + 0.08 * wave, 3),
                    "tensorcore_activity": round(0.61 + 0.12 * wave, 3),
                }

            chips.append({"resource": "TPU", "index": c, "type": "TPU-V6E", "samples": samples(n, tpu)})
        telemetry[f"{SLICE}-w{w}"] = {"node_id": f"{SLICE}-w{w}", "devices": chips}
    assert set(telemetry) == {info["node"]["node_id"] for info in nodes}
    return telemetry


def make_logs():
    """How serve_fixtures.py writes each job's logs: per-rank lines, growing with time while the
    job runs (lines_per_second), complete and `done` once it ended."""
    return {
        TRAIN_JOB: {
            "done": False,
            "preamble": [
                f"[controller] attempt 2 of 4: starting 16 ranks on {SLICE_GROUP}",
                "[rank {rank}] TPU_WORKER_ID={worker} TPU_VISIBLE_CHIPS={local} world_size=16",
                "[rank {rank}] loading llama-3-8b shard {rank} of 16",
            ],
            "line": "[rank {rank}] step {step} loss {loss} tokens/s {tps}",
            "first_step": 4200,
            "initial_lines": 30,
            "lines_per_second": 1,
            "max_lines": 3000,
        },
        SMOKE_JOB: {
            "done": True,
            "preamble": ["[rank {rank}] CUDA_VISIBLE_DEVICES={local} world_size=2"],
            "line": "[rank {rank}] epoch 1 step {step} loss {loss} tokens/s {tps}",
            "first_step": 0,
            "initial_lines": 40,
            "lines_per_second": 0,
            "max_lines": 40,
            "epilogue": ["[rank {rank}] done: exited with code 0"],
        },
    }


def make_cluster(nodes, placement_groups, slices):
    return {
        "nodes": nodes,
        "usage": usage_of(nodes),
        "slices": slices,
        "placement_groups": placement_groups,
        "demand": [
            {"kind": "placement group", "name": "eval-sweep", "status": "pending",
             "explanation": placement_groups[0]["explanation"]},
            {"kind": "lease", "name": f"{SERVE_DRIVER}: score_batch {{TPU: 8}}", "status": "infeasible",
             "explanation": "infeasible: no node has 8 TPU (the most any node has is 4: v6e-0-w0..v6e-0-w3)"},
        ],
        "events": [
            "node cpu-0 declared dead: no heartbeat for 30 s; driver driver-2b7d40 presumed failed, "
            "actor tokenizer dead",
        ],
    }


def write(path, value, compact=False):
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(value, separators=(",", ":")) if compact else json.dumps(value, indent=1, ensure_ascii=False)
    path.write_text(text + "\n", encoding="utf-8")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(pathlib.Path(__file__).parent / "fixtures"))
    out = pathlib.Path(parser.parse_args().out)
    nodes = make_nodes()
    groups = make_placement_groups()
    slices = make_slices()
    write(out / "meta.json", {"fixture_now_ms": NOW, "slice": SLICE, "slice_group": SLICE_GROUP,
                              "train_job": TRAIN_JOB})
    write(out / "nodes.json", {"nodes": nodes, "next_page_token": ""})
    write(out / "cluster.json", make_cluster(nodes, groups, slices))
    write(out / "placement_groups.json", {"groups": groups, "next_page_token": ""})
    write(out / "slices.json", slices)
    write(out / "jobs.json", make_jobs())
    write(out / "actors.json", make_actors())
    write(out / "events.json", make_events())
    write(out / "logs.json", make_logs())
    write(out / "serve.json", make_serve())
    write(out / "serve_metrics.json", make_serve_metrics())
    for node_id, body in make_telemetry(nodes).items():
        write(out / "telemetry" / f"{node_id}.json", body, compact=True)
    print(f"wrote fixtures to {out}")


if __name__ == "__main__":
    main()

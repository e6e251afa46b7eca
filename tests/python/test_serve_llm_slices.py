"""Serve LLM on TPU slices, on the demo cluster (examples/clusters/demo.yaml: one simulated v6e
4x4 slice of 4 hosts, v6e-0-w0 .. v6e-0-w3, beside GPU and CPU nodes): the serve controller
reserves a whole slice per replica (detached, named after the replica), places the replica on
host 0 and the built-in engine runs one engine worker per host, a pipeline stage each, which
sees its host's chips. A chat completion through the OpenAI route says what the engine says in
one process; a dead engine worker gets the replica replaced; a second replica that cannot get a
slice waits, and says what for, until the first application is deleted and its slice released.

The model is the demo model's architecture trained for a few steps into a temporary folder."""
import asyncio
import json
import os
import signal
import urllib.request
from pathlib import Path

import pytest

import tessera
from conftest import wait_for

serve = pytest.importorskip("tessera.serve")
pytest.importorskip("torch")
pytest.importorskip("fastapi")

DEMO = Path(__file__).resolve().parents[2] / "examples" / "clusters" / "demo.yaml"
HOSTS = ["v6e-0-w0", "v6e-0-w1", "v6e-0-w2", "v6e-0-w3"]
CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "What is a License?"}],
        "max_tokens": 12, "temperature": 0}
SAMPLED = dict(CHAT, temperature=0.9, seed=7)


def tpu_config(model_dir, model_id="tiny", **deployment_config):
    from tessera.serve.llm import LLMConfig
    return LLMConfig(model_loading_config={"model_id": model_id, "model_source": model_dir},
                     llm_engine="tessera", accelerator_type="TPU-V6E",
                     accelerator_config={"kind": "tpu", "topology": "4x4"},
                     engine_kwargs={"tensor_parallel_size": 4, "pipeline_parallel_size": 4},
                     deployment_config={"num_replicas": 1,
                                        "ray_actor_options": {"num_cpus": 0.1},
                                        **deployment_config})


@pytest.fixture(scope="module")
def demo(make_cluster, tmp_path_factory):
    from tessera.serve.llm import build_openai_app
    from tessera.serve.llm.make_demo_model import ensure_demo_model

    made = make_cluster(DEMO)
    tessera.init(_state_dir=str(made.state))
    model_dir = ensure_demo_model(str(tmp_path_factory.mktemp("model")), steps=20)
    serve.start(http_options={"host": "127.0.0.1", "port": 0})
    serve.run(build_openai_app({"llm_configs": [tpu_config(model_dir, health_check_period_s=1)],
                                "ingress_deployment_config": {
                                    "ray_actor_options": {"num_cpus": 0.1}}}),
              name="llm", route_prefix="/")
    proxies = wait_for(lambda: [p for p in serve.status().proxies.values() if p.address],
                       60, "the proxy's address")
    yield made, model_dir, f"http://{proxies[0].address}"
    serve.shutdown()
    tessera.shutdown()


def post(url, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.load(response)


def single_process_answer(model_dir, body):
    """The chat response of the same model and request from the built-in engine in this
    process (no slice, no stages)."""
    from tessera.serve.llm import LLMConfig, LLMServer

    server = LLMServer(LLMConfig(model_loading_config={"model_id": "tiny",
                                                       "model_source": model_dir},
                                 llm_engine="tessera"))

    async def first_item():
        async for item in server.chat(body):
            return item

    try:
        return asyncio.run(first_item())
    finally:
        server.shutdown()


def slice_groups(cluster):
    listed = json.loads(cluster.cli("list", "slices", "--json", check=True).stdout)
    return listed, {g["name"]: g for g in listed.get("groups", [])}


def layout():
    handle = serve.get_deployment_handle("LLMServer:tiny", "llm")
    return handle.engine_layout.remote().result(timeout_s=120)


def test_a_replica_takes_the_whole_slice_with_one_engine_worker_per_host(demo):
    from tessera.util.tpu import slice_placement_group

    cluster, model_dir, base = demo
    seen = layout()
    assert seen["slice"].startswith("serve:llm#LLMServer:tiny#")
    listed, groups = slice_groups(cluster)
    group = groups[seen["slice"]]
    assert [h["node_id"] for h in group["hosts"]] == HOSTS
    assert group["owner"] == ""  # detached: it lives as long as the replica, not a driver
    assert [s["held_by"] for s in listed["slices"] if s["name"] == "v6e-0"] == [seen["slice"]]
    # The replica on host 0; one engine worker per host, in its bundle, seeing its chips.
    assert seen["node_id"] == HOSTS[0]
    workers = seen["workers"]
    assert [w["stage"] for w in workers] == [0, 1, 2, 3]
    assert [w["node_id"] for w in workers] == HOSTS
    assert [w["tpu_worker_id"] for w in workers] == ["0", "1", "2", "3"]
    assert all(w["tpu_ids"] == ["0", "1", "2", "3"] for w in workers)
    assert [w["layers"] for w in workers] == [[0, 1], [1, 2], [2, 3], [3, 3]]  # 3 layers
    # Nothing else can take the slice.
    with pytest.raises(RuntimeError, match="Failed to reserve TPU slice"):
        slice_placement_group("4x4", "v6e", timeout_s=1)
    # Through the OpenAI route: what the engine says in one process, greedy and seeded.
    for body in (CHAT, SAMPLED):
        served = post(f"{base}/v1/chat/completions", body)
        alone = single_process_answer(model_dir, body)
        assert served["choices"][0]["message"] == alone["choices"][0]["message"]
        assert served["usage"] == alone["usage"]


def test_a_dead_engine_worker_gets_the_replica_replaced(demo):
    cluster, model_dir, base = demo
    before = layout()
    os.kill(before["workers"][2]["pid"], signal.SIGKILL)

    def replaced():
        seen = layout_or_none()
        return seen if seen is not None and seen["slice"] != before["slice"] else None

    # Its health check fails, the controller replaces the replica, which takes the slice again
    # (a slice per replica: the new one's has the new replica's name).
    after = wait_for(replaced, 180, "a new replica on the slice", interval=1)
    assert [w["node_id"] for w in after["workers"]] == HOSTS
    served = post(f"{base}/v1/chat/completions", CHAT)
    assert served["choices"][0]["message"] == single_process_answer(
        model_dir, CHAT)["choices"][0]["message"]


def layout_or_none():
    try:
        return layout()
    except Exception:  # noqa: BLE001 - the replica is being replaced
        return None


def deployment_status(app, deployment):
    applications = serve.status().applications
    if app not in applications:
        return None
    return applications[app].deployments.get(deployment)


def test_a_second_replica_waits_for_a_slice_until_the_first_app_is_deleted(demo):
    from tessera.serve import api as serve_api, build as serve_build
    from tessera.serve.llm import build_llm_deployment
    from tessera.util.tpu import slice_placement_group

    cluster, model_dir, base = demo
    second = build_llm_deployment(tpu_config(model_dir, model_id="tiny2"))
    built = serve_build.build_application(second, "second", None)
    # Deployed without waiting for RUNNING (serve.run would wait).
    serve_api._deploy([serve_api._application_message(second, built)], None)

    def explained():
        status = deployment_status("second", "LLMServer:tiny2")
        return status if status is not None and "Why they are not placed" in status.message \
            else None

    # The controller shows why a replica is not placed once it has waited 30 s (Ray's rule).
    waiting = wait_for(explained, 120, "the second replica's explanation", interval=1)
    assert waiting.replica_states == {"STARTING": 1}
    assert "slice reservation serve:second#LLMServer:tiny2#" in waiting.message
    assert "PENDING" in waiting.message
    assert serve.status().applications["second"].status == "DEPLOYING"

    # Deleting the first application releases its slice: the waiting replica takes it.
    serve.delete("llm")
    wait_for(lambda: serve.status().applications["second"].status == "RUNNING", 180,
             "the second application to run on the released slice", interval=1)
    _, groups = slice_groups(cluster)
    assert [name for name in groups if name.startswith("serve:")] == [
        name for name in groups if name.startswith("serve:second#LLMServer:tiny2#")]

    serve.delete("second")
    # Deleting it releases its slice too: a 4x4 can be reserved by hand again.
    again = slice_placement_group("4x4", "v6e", timeout_s=60)
    try:
        assert [h["node_id"] for h in again.hosts] == HOSTS
    finally:
        again.shutdown()
    _, groups = slice_groups(cluster)
    assert not [name for name in groups if name.startswith("serve:")]

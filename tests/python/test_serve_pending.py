"""A Serve replica that cannot be placed, on a local cluster of one node with 4 CPUs
(one_node.yaml) whose CPUs a detached placement group, `hog`, holds: the replica's entry in the
head's /api/v1/serve says why in the scheduler's words (the resource that is short and who holds
it: "held by placement group hog"), and so does the deployment's message in `tessera serve
status` once the replica has waited 30 s (Ray's slow start-up warning, with the explanation).
The deployment keeps waiting (the same replica, no failed start-up, no restart), and once the
group is removed the replica starts and serve.run returns.
"""
import json
import threading
import urllib.request
from pathlib import Path

import pytest

import tessera
from conftest import wait_for

serve = pytest.importorskip("tessera.serve")

HERE = Path(__file__).resolve().parent
# A replica is explained every 5 s, and its deployment's message after 30 s of waiting: bounds,
# never measured times.
EXPLAINED_PATIENCE_S = 60
SLOW_START_PATIENCE_S = 120


@pytest.fixture(scope="module")
def one_node(make_cluster):
    made = make_cluster(HERE / "one_node.yaml")
    tessera.init(_state_dir=str(made.state))
    yield made
    tessera.shutdown()


def serve_json(cluster):
    http = (cluster.state / "head.http").read_text().strip()
    token = (cluster.state / "token").read_text().strip()
    request = urllib.request.Request(f"http://{http}/api/v1/serve",
                                     headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def deployment_of(status, app="waiting", name="Waiter"):
    for application in status.get("applications") or []:
        if application["name"] != app:
            continue
        for deployment in application["deployments"]:
            if deployment["name"] == name:
                return deployment
    return None


@serve.deployment(ray_actor_options={"num_cpus": 1})
class Waiter:
    def __call__(self):
        return "placed"


def test_a_replica_waiting_for_resources_says_which_and_who_holds_them_then_starts(one_node):
    from tessera.util.placement_group import placement_group, remove_placement_group

    hog = placement_group([{"CPU": 4}], name="hog", lifetime="detached")
    assert hog.wait(60), "the placement group holding every CPU was not placed"
    serve.start(http_options={"host": "127.0.0.1", "port": 0})
    ran = {}

    def run():
        try:
            ran["handle"] = serve.run(Waiter.bind(), name="waiting", route_prefix="/w")
        except Exception as error:  # noqa: BLE001 - the test reports it
            ran["error"] = error

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    try:
        def explained():
            deployment = deployment_of(serve_json(one_node))
            replicas = (deployment or {}).get("replicas") or []
            waiting = [r for r in replicas if "held by" in r.get("message", "")]
            return waiting[0] if waiting else None

        replica = wait_for(explained, EXPLAINED_PATIENCE_S, "the replica's explanation",
                           interval=0.5)
        assert replica["state"] == "STARTING" and replica["node_id"] == ""
        message = replica["message"]
        assert message.startswith("waiting for resources: "), message
        assert "CPU" in message and "held by placement group hog" in message, message

        # Ray's slow start-up warning carries the explanation, in `tessera serve status` too.
        def warned():
            shown = one_node.cli("serve", "status", "-n", "waiting", timeout=120)
            text = " ".join(shown.stdout.split())  # YAML folds long messages over lines
            return text if "held by placement group hog" in text else None

        text = wait_for(warned, SLOW_START_PATIENCE_S, "serve status to explain the replica",
                        interval=2)
        assert "taken more than 30s to be scheduled" in text
        assert "DEPLOYING" in text and "DEPLOY_FAILED" not in text

        # Still waiting, not failing: the same replica, started once.
        deployment = deployment_of(serve_json(one_node))
        assert [r["replica_id"] for r in deployment["replicas"]] == [replica["replica_id"]]
        assert deployment["status"] == "UPDATING"
        assert runner.is_alive() and not ran

        remove_placement_group(hog)
        runner.join(timeout=120)
        assert not runner.is_alive(), "serve.run did not return once the CPUs were free"
        assert "error" not in ran, ran.get("error")
        assert ran["handle"].remote().result(timeout_s=60) == "placed"
        deployment = deployment_of(serve_json(one_node))
        [running] = deployment["replicas"]
        assert running["replica_id"] == replica["replica_id"]
        assert running["state"] == "RUNNING" and running["message"] == ""
        assert running["node_id"] == "cpu-0" and running["pid"] > 0
    finally:
        try:
            remove_placement_group(hog)
        except Exception:  # noqa: BLE001 - removed already
            pass
        runner.join(timeout=120)
        serve.shutdown()

"""A serve application survives its head: on a cluster whose head keeps its state in Redis (a
real redis-server), a driver deploys an application and exits; the head is SIGKILLed and started
again on the same port; the new head's serve controller reads its records back, finds the running
replica (a detached actor) and serves it again through a new proxy on the same HTTP port: the
same replica process answers before and after (docs/serve.md)."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import TWO_NODES, free_port, wait_for

pytest.importorskip("tessera.serve")

DEPLOY = """
import os, sys, tessera
from tessera import serve
tessera.init()
serve.start(http_options={{"host": "127.0.0.1", "port": {port}}})

@serve.deployment(ray_actor_options={{"num_cpus": 0.1}})
def pid(request):
    return {{"pid": os.getpid()}}

serve.run(pid.bind(), name="survivor", route_prefix="/pid")
print("deployed")
"""


def answer(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/pid", timeout=10) as r:
        return json.load(r)["pid"]


def answers(port):
    try:
        return answer(port)
    except OSError:
        return None


@pytest.fixture()
def redis_socket():
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("no redis-server to keep the head's state in (scripts/setup installs it)")
    folder = tempfile.mkdtemp(prefix="tredis-")
    path = os.path.join(folder, "redis.sock")
    process = subprocess.Popen([server, "--port", "0", "--unixsocket", path, "--unixsocketperm",
                                "700", "--save", "", "--appendonly", "no"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: os.path.exists(path), 30, "redis-server's socket")
        yield path
    finally:
        process.terminate()
        process.wait(10)
        shutil.rmtree(folder, ignore_errors=True)


def test_an_application_answers_before_and_after_a_head_restart_on_redis(make_cluster,
                                                                        redis_socket):
    cluster = make_cluster(TWO_NODES, "--redis-address", f"unix:{redis_socket}")
    port = free_port()
    deployed = cluster.python(DEPLOY.format(port=port), timeout=180)
    assert deployed.returncode == 0 and "deployed" in deployed.stdout, deployed.stderr
    before = wait_for(lambda: answers(port), 60, "the application over HTTP")

    head_port = (cluster.state / "head.address").read_text().strip().rsplit(":", 1)[1]
    head_pid = int((cluster.state / "head.pid").read_text().split()[0])
    os.kill(head_pid, signal.SIGKILL)
    wait_for(lambda: answers(port) is None, 30, "the proxy gone with its head")
    started = cluster.cli("start", "--head", "--port", head_port, "--redis-address",
                          f"unix:{redis_socket}", timeout=90)
    assert started.returncode == 0, started.stderr

    after = wait_for(lambda: answers(port), 120, "the application answering after the restart")
    assert after == before  # the same replica, re-adopted, not a new one
    status = cluster.python(
        "import tessera; from tessera import serve; tessera.init(); "
        "print(serve.status().applications['survivor'].status)", timeout=60)
    assert status.stdout.strip().endswith("RUNNING"), status.stderr

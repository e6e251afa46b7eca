"""Fixtures of the Python package's tests (tests/python).

- The package is imported from the build tree: ctest sets PYTHONPATH=build/python; run by hand,
  build/python is put on sys.path here.
- `tessera_bin`: the CLI, from $TESSERA_BIN (ctest sets it), else build/bin/tessera.
- `make_cluster(file, *up_args)`: `tessera up FILE` in a fresh, short state folder; `tessera down`
  at teardown whatever happened, then any process still naming that folder is killed.
- `cluster`: two_nodes.yaml, up for the whole test module, with this process connected to it
  (`tessera.init(_state_dir=...)`) and disconnected at the module's end.
- `run(...)`: every subprocess has a timeout, so nothing can hang CI.
- `start_serve(**http_options)`: Serve started on the connected cluster with its HTTP proxy on
  127.0.0.1 and a free port; the proxy's base URL (the serve tests' module fixtures).

Tests keep shared memory small: every store is 64 MiB unless a test sizes it.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
BUILD_PYTHON = REPO / "build" / "python"
TWO_NODES = HERE / "two_nodes.yaml"

try:
    import tessera
except ImportError:
    sys.path.insert(0, str(BUILD_PYTHON))
    import tessera


def run(cmd, timeout, cwd=None, env=None, check=False, input=None):
    """subprocess.run with text output and a hard timeout; a timeout fails the test with the
    command and whatever it printed."""
    cmd = [str(c) for c in cmd]
    try:
        result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                                timeout=timeout, input=input,
                                stdin=None if input is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"timed out after {timeout}s: {' '.join(cmd)}\n"
                    f"stdout: {e.stdout}\nstderr: {e.stderr}")
    if check and result.returncode != 0:
        pytest.fail(f"exit {result.returncode}: {' '.join(cmd)}\n"
                    f"stdout: {result.stdout[-3000:]}\nstderr: {result.stderr[-3000:]}")
    return result


def wait_for(predicate, timeout, what, interval=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


def start_serve(**http_options):
    """serve.start with the HTTP proxy on 127.0.0.1, a port it picks and these http_options
    (request_timeout_s, ...): the proxy's base URL, once serve.status names its address."""
    from tessera import serve

    serve.start(http_options={"host": "127.0.0.1", "port": 0, **http_options})
    proxies = wait_for(lambda: [p for p in serve.status().proxies.values()
                                if p.address and not p.address.endswith(":0")],
                       60, "the proxy's address")
    host, port = proxies[0].address.rsplit(":", 1)
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    return f"http://{host}:{port}"


def run_tiny_llm_app(tmp_path_factory):
    """Serve LLM's OpenAI app of the demo model (20 training steps: quick, not fluent) at "/",
    the built-in engine, each deployment on a tenth of a CPU: the proxy's base URL."""
    from tessera import serve
    from tessera.serve.llm import LLMConfig, build_openai_app
    from tessera.serve.llm.make_demo_model import ensure_demo_model

    model_dir = ensure_demo_model(str(tmp_path_factory.mktemp("model")), steps=20)
    base = start_serve()
    config = LLMConfig(model_loading_config={"model_id": "tiny", "model_source": model_dir},
                       llm_engine="tessera",
                       deployment_config={"ray_actor_options": {"num_cpus": 0.1}})
    serve.run(build_openai_app({"llm_configs": [config],
                                "ingress_deployment_config": {
                                    "ray_actor_options": {"num_cpus": 0.1}}}),
              name="llm", route_prefix="/")
    return base


def free_port():
    """A TCP port of 127.0.0.1 nothing listens on now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_run_config(tmp, name, max_failures=0, num_to_keep=2):
    """The train tests' RunConfig: runs stored under `tmp`, these failures allowed and
    checkpoints kept."""
    from tessera import train
    return train.RunConfig(
        name=name, storage_path=str(tmp / "runs"),
        failure_config=train.FailureConfig(max_failures=max_failures),
        checkpoint_config=train.CheckpointConfig(num_to_keep=num_to_keep))


def rank_records(out):
    """What each rank of a train test's loop wrote to `out` (rank<r>-attempt<a>.json)."""
    import json
    return {p.stem: json.loads(p.read_text()) for p in out.glob("rank*-attempt*.json")}


def processes_naming(marker):
    """Pids of processes whose command line or environment names `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            data = (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in data:
            found.append(int(entry.name))
    return found


def pid_alive(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.fixture(scope="session")
def tessera_bin():
    explicit = os.environ.get("TESSERA_BIN")
    path = Path(explicit) if explicit else REPO / "build" / "bin" / "tessera"
    if not (path.is_file() and os.access(path, os.X_OK)):
        if explicit:
            pytest.fail(f"TESSERA_BIN={explicit} is not an executable")
        pytest.skip(f"no tessera binary at {path}: build it, or set TESSERA_BIN")
    os.environ.setdefault("TESSERA_BIN", str(path))
    return path


class Cluster:
    """A local cluster of one state folder, and the CLI against it."""

    def __init__(self, tessera_bin, state):
        self.tessera_bin = Path(tessera_bin)
        self.state = Path(state)
        self.env = dict(os.environ, TESSERA_STATE_DIR=str(self.state))

    def cli(self, *args, timeout=60, check=False):
        return run([self.tessera_bin, *args], timeout=timeout, env=self.env, check=check)

    def up(self, cluster_file, *extra):
        if "--object-store-memory" not in extra:
            extra = (*extra, "--object-store-memory", "128MiB")
        r = self.cli("up", cluster_file, *extra, timeout=150)
        assert r.returncode == 0, f"tessera up failed:\n{r.stdout}\n{r.stderr}"

    def down(self):
        return self.cli("down", timeout=90)

    def node_ids(self):
        return sorted(p.name for p in (self.state / "nodes").iterdir() if p.is_dir())

    def agent_pid(self, node_id):
        return int((self.state / "nodes" / node_id / "agent.pid").read_text().split()[0])

    def python(self, script, timeout=120, env=None):
        """Runs `script` in a new interpreter that can import tessera and reaches this cluster
        (TESSERA_STATE_DIR), with a hard timeout."""
        merged = dict(self.env)
        merged["PYTHONPATH"] = os.pathsep.join(
            [str(Path(tessera.__file__).resolve().parent.parent)]
            + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
        merged.update(env or {})
        return run([sys.executable, "-c", script], timeout=timeout, env=merged)


@pytest.fixture(scope="module")
def make_cluster(tessera_bin):
    made = []

    def make(cluster_file, *up_args):
        state = Path(tempfile.mkdtemp(prefix="tpy-"))
        cluster = Cluster(tessera_bin, state)
        made.append(cluster)
        cluster.up(cluster_file, *up_args)
        return cluster

    yield make
    for cluster in made:
        cluster.down()
        for pid in processes_naming(str(cluster.state)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(cluster.state, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(make_cluster):
    made = make_cluster(TWO_NODES)
    tessera.init(_state_dir=str(made.state))
    yield made
    tessera.shutdown()

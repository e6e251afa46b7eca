"""A real head whose node registry fill_head_registry (bench/fill_head_registry.cc) has filled
with N nodes through the head's own RegisterNode and Heartbeat calls, for the dashboard's test
against it (test_registered_nodes.py) and its benchmark (bench/python/dashboard_registered_nodes.py).

    with registered_head.start(tessera, filler, nodes=1000, devices=8) as head:
        head.url          # the dashboard, http://127.0.0.1:PORT/
        head.token        # the cluster token (the endpoint asks for it, on loopback too)
        head.state        # the state folder
        head.filler_log() # what the filler said on stderr so far
    head.final_log        # after the block: all it said, its summary line last

`tessera start --head` runs the head as a daemon in a fresh state folder under /tmp; the filler
runs until the context ends, then is stopped (SIGTERM), and `tessera down` stops the head. Not
thread-safe: one head per caller.
"""

import contextlib
import dataclasses
import json
import os
import pathlib
import queue
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request

REPO = pathlib.Path(__file__).resolve().parents[2]


def tessera_binary():
    return os.environ.get("TESSERA_BIN", str(REPO / "build" / "bin" / "tessera"))


def filler_binary(tessera=None):
    """$FILL_HEAD_REGISTRY, else bench/fill_head_registry of the build the tessera binary is in."""
    if os.environ.get("FILL_HEAD_REGISTRY"):
        return os.environ["FILL_HEAD_REGISTRY"]
    build = pathlib.Path(tessera or tessera_binary()).resolve().parent.parent
    return str(build / "bench" / "fill_head_registry")


def missing(tessera, filler):
    """Why the head or the filler cannot run here, or ''."""
    if not os.access(tessera, os.X_OK):
        return f"no tessera binary at {tessera} (build the `tessera` target or set TESSERA_BIN)"
    if not os.access(filler, os.X_OK):
        return (f"no fill_head_registry at {filler} (build the `fill_head_registry` target, which "
                "needs Google Benchmark's package for bench/, or set FILL_HEAD_REGISTRY)")
    return ""


@dataclasses.dataclass
class RegisteredHead:
    state: pathlib.Path
    url: str
    nodes: int
    devices: int
    filler: subprocess.Popen
    log_path: pathlib.Path
    token: str = ""
    final_log: str = ""  # the filler's stderr once it stopped (its summary last), set at exit

    def get(self, path, timeout=30):
        """GET api/v1/<path> as JSON."""
        request = urllib.request.Request(self.url + "api/v1/" + path,
                                         headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())

    def events(self):
        """Every event the head keeps, oldest first (api/v1/events?after=SEQ page by page)."""
        events, after = [], 0
        for _ in range(1000):
            page = self.get(f"events?after={after}").get("events", [])
            if not page:
                break
            events += page
            after = page[-1]["seq"]
        return events

    def filler_log(self):
        return self.log_path.read_text(errors="replace")

    def head_log(self):
        try:
            return (self.state / "logs" / "head.log").read_text(errors="replace")
        except OSError:
            return ""

    def head_pid(self):
        try:
            return int((self.state / "head.pid").read_text().strip())
        except (OSError, ValueError):
            return None


def _run(args, timeout):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout,
                            stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))}: exit {result.returncode}\n{result.stdout}{result.stderr}")
    return result


@contextlib.contextmanager
def start(tessera, filler, nodes=1000, devices=8, heartbeat_ms=1000, agent_address=None,
          register_timeout_s=120):
    """Starts the head, fills it with `nodes` nodes (their agent at `agent_address`, else the
    filler's dead loopback port) and yields a RegisteredHead once the filler says "registered N
    nodes". RuntimeError (with the filler's stderr) when it does not."""
    root = pathlib.Path(tempfile.mkdtemp(prefix="tessera-dash-registered-", dir="/tmp"))
    state = root / "state"
    log_path = root / "filler.log"
    proc = None
    running = None
    log = open(log_path, "wb")
    try:
        _run([tessera, "start", "--head", "--state-dir", state, "--http-port", "0"], timeout=60)
        url = f"http://{(state / 'head.http').read_text().strip()}/"
        command = [filler, "--state-dir", state, "--nodes", str(nodes), "--devices-per-node", str(devices),
                   "--heartbeat-ms", str(heartbeat_ms)]
        if agent_address:
            command += ["--agent-address", agent_address]
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, text=True)
        lines = queue.Queue()

        def pump():
            for line in proc.stdout:
                lines.put(line.strip())

        threading.Thread(target=pump, daemon=True).start()
        want = f"registered {nodes} nodes"
        deadline = time.monotonic() + register_timeout_s
        while True:
            try:
                if lines.get(timeout=0.5) == want:
                    break
            except queue.Empty:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"fill_head_registry did not say {want!r} within {register_timeout_s} s (exit "
                    f"{proc.poll()}): {log_path.read_text(errors='replace')[-2000:]}")
        running = RegisteredHead(state, url, nodes, devices, proc, log_path,
                                 token=(state / "token").read_text().strip())
        yield running
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        log.close()
        if running is not None:
            running.final_log = log_path.read_text(errors="replace")
        subprocess.run([str(tessera), "down", "--state-dir", str(state)], capture_output=True,
                       timeout=120, stdin=subprocess.DEVNULL)
        shutil.rmtree(root, ignore_errors=True)

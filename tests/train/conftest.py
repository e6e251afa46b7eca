"""Fixtures for the end-to-end tests of `tessera train` and `tessera job` (test_train.py).

- `tessera`: the binary, from $TESSERA_BIN (ctest sets it), else <repo>/build/bin/tessera.
- `make_cluster(file, *up_args)`: `tessera up FILE` in a fresh, short state folder; `tessera down`
  at teardown whatever happened, then any process still naming that folder is killed.
- `torchrun_reference(...)`: the final parameters of the same script under torchrun (computed once
  per pytest process for each set of arguments).
- `run(...)` / `Background`: every subprocess has a timeout, so nothing can hang CI.

The rank command runs with this interpreter (sys.executable): the one that has torch and pytest.
"""
import json
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
SCRIPT = REPO / "examples" / "train" / "ddp_train.py"
PYTHON = sys.executable
ONE_SLICE = HERE / "one_slice.yaml"
TWO_SLICES = HERE / "two_slices.yaml"

TERMINAL_STATES = ("SUCCEEDED", "FAILED", "STOPPED")


# ----------------------------------------------------------------------------------------------
# Processes


def run(cmd, timeout, cwd=None, env=None, check=False):
    """subprocess.run with text output and a hard timeout; a timeout fails the test with the
    command and whatever it printed."""
    cmd = [str(c) for c in cmd]
    try:
        result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                                timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"timed out after {timeout}s: {' '.join(cmd)}\n"
                    f"stdout: {_text(e.stdout)[-3000:]}\nstderr: {_text(e.stderr)[-3000:]}")
    if check and result.returncode != 0:
        pytest.fail(f"exit {result.returncode}: {' '.join(cmd)}\n"
                    f"stdout: {result.stdout[-3000:]}\nstderr: {result.stderr[-3000:]}")
    return result


def _text(data):
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


class Background:
    """A command running in its own session, its stdout and stderr going to files (no pipe can
    fill up). `wait` has a timeout; the fixture that made it kills it at teardown if it still runs."""

    def __init__(self, cmd, cwd, env, log_prefix):
        self.cmd = [str(c) for c in cmd]
        self.stdout_path = Path(f"{log_prefix}.out")
        self.stderr_path = Path(f"{log_prefix}.err")
        self._out = open(self.stdout_path, "w")
        self._err = open(self.stderr_path, "w")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(self.cmd, cwd=cwd, env=env, stdout=self._out,
                                     stderr=self._err, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        self.pid = self.proc.pid

    def poll(self):
        return self.proc.poll()

    def wait(self, timeout):
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"still running after {timeout}s: {' '.join(self.cmd)}\n"
                        f"stdout: {self.stdout()[-3000:]}\nstderr: {self.stderr()[-3000:]}")
        self._close()
        return rc

    def kill(self, sig=signal.SIGKILL):
        if self.proc.poll() is None:
            try:
                os.killpg(self.pid, sig)  # its own session: only this client and what it forked
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self._close()

    def _close(self):
        for f in (self._out, self._err):
            if not f.closed:
                f.close()

    def stdout(self):
        return self.stdout_path.read_text(errors="replace") if self.stdout_path.exists() else ""

    def stderr(self):
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""


def pid_alive(pid):
    """True while `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat[stat.rfind(")") + 2:].split()[0] != "Z"


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def process_state(pid):
    """The one-letter state of /proc/PID/stat (R, S, T, Z, ...), "" when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return ""
    return stat[stat.rfind(")") + 2:].split()[0]


def _children():
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    return children


def find_process(pid, marker):
    """`pid` if its command line contains `marker`, else its first descendant whose does (a rank
    started through a wrapper); None when neither. Tests signal only what this returns."""
    if marker in cmdline(pid):
        return pid
    children = _children()
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop(0)
        if marker in cmdline(p):
            return p
        todo.extend(children.get(p, []))
    return None


def processes_naming(marker):
    """Pids (not ours) whose command line contains `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid() and marker in cmdline(int(entry)):
            found.append(int(entry))
    return found


def wait_for(predicate, timeout, what, interval=0.2):
    """Polls `predicate` until it returns something truthy, which is returned; fails after
    `timeout` seconds naming `what`."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def num(value, default=0):
    """A JSON number, or a 64-bit one that protobuf's JSON printed as a string."""
    if value is None or value == "":
        return default
    return int(value)


# ----------------------------------------------------------------------------------------------
# The binary and the cluster


@pytest.fixture(scope="session")
def tessera():
    explicit = os.environ.get("TESSERA_BIN")
    path = Path(explicit) if explicit else REPO / "build" / "bin" / "tessera"
    if not (path.is_file() and os.access(path, os.X_OK)):
        if explicit:
            pytest.fail(f"TESSERA_BIN={explicit} is not an executable")
        pytest.skip(f"no tessera binary at {path}: build it, or set TESSERA_BIN")
    return path


@pytest.fixture(scope="session")
def torch_module():
    try:
        import torch  # noqa: F401
        import torch.distributed  # noqa: F401
    except ImportError as e:
        pytest.skip(f"PyTorch is not importable by {PYTHON} ({e}); install python3-torch "
                    "(scripts/setup)")
    import torch
    if not torch.distributed.is_available():
        pytest.skip(f"this PyTorch ({torch.__version__}) was built without torch.distributed")
    return torch


def torchrun_command(nproc, script_args):
    """`torchrun --standalone --nproc-per-node N SCRIPT ARGS` as this interpreter's module.
    torch 1.x spells the flag --nproc_per_node (2.x takes both). Debian 12's torch 1.13 under
    Python 3.11 cannot parse its own default --redirects/--tee value "0" (Std.from_str returns
    None; fixed upstream in 2.0), so there a map naming no real local rank is passed, which means
    "no redirection" for every rank."""
    cmd = [PYTHON, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
    try:
        from torch.distributed.elastic.multiprocessing.api import Std
        if Std.from_str("0") is None:
            cmd += ["--redirects", "9:0", "--tee", "9:0"]
    except ImportError:
        pass
    return cmd + [str(SCRIPT)] + [str(a) for a in script_args]


def training_args(steps, seed, extra=()):
    return ["--steps", steps, "--seed", seed, *extra]


@pytest.fixture(scope="session")
def torchrun_reference(torch_module, tmp_path_factory):
    """fn(steps, seed) -> path of the final state_dict of an uninterrupted torchrun run with 4
    ranks; one run per (steps, seed) per pytest process."""
    cache = {}

    def reference(steps, seed):
        key = (steps, seed)
        if key not in cache:
            work = tmp_path_factory.mktemp(f"torchrun-{steps}-{seed}")
            out = work / "reference.pt"
            env = dict(os.environ)
            r = run(torchrun_command(4, training_args(steps, seed, ["--output", out])),
                    timeout=120, cwd=work, env=env)
            assert r.returncode == 0, f"torchrun failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
            assert out.exists(), f"torchrun wrote no {out}:\n{r.stdout[-3000:]}"
            cache[key] = out
        return cache[key]

    return reference


def assert_same_parameters(torch, path_a, path_b):
    a = torch.load(path_a, map_location="cpu")
    b = torch.load(path_b, map_location="cpu")
    assert list(a) == list(b), f"different state_dict keys: {list(a)} vs {list(b)}"
    different = [k for k in a if not torch.equal(a[k], b[k])]
    assert not different, (f"{path_a} and {path_b} differ in {different} "
                           f"(max abs diff {max(float((a[k] - b[k]).abs().max()) for k in different)})")


class Cluster:
    """A local cluster of one state folder, and the CLI against it."""

    def __init__(self, tessera, base):
        self.tessera = Path(tessera)
        self.base = Path(base)
        self.state = self.base / "state"
        self.work = self.base / "work"      # the clients' folder, so the ranks' folder too
        self.work.mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ, TESSERA_STATE_DIR=str(self.state))
        self.is_up = False
        self.clients = []
        self._names = 0

    # The CLI --------------------------------------------------------------------------------
    def cli(self, *args, timeout=30, check=False):
        return run([self.tessera, *args], timeout=timeout, cwd=self.work, env=self.env,
                   check=check)

    def cli_json(self, *args, timeout=30):
        r = self.cli(*args, timeout=timeout, check=True)
        try:
            return json.loads(r.stdout)
        except json.JSONDecodeError as e:
            pytest.fail(f"tessera {' '.join(map(str, args))}: not JSON ({e}): {r.stdout[:2000]}")

    def up(self, cluster_file, *extra):
        # Small stores unless the test sizes them: tests keep shared memory well under 2 GiB.
        if "--object-store-memory" not in extra:
            extra = (*extra, "--object-store-memory", "16MiB")
        r = self.cli("up", cluster_file, *extra, timeout=150)
        assert r.returncode == 0, f"tessera up failed:\n{r.stdout}\n{r.stderr}"
        self.is_up = True

    def down(self):
        r = self.cli("down", timeout=90)
        self.is_up = False
        return r

    def unique_name(self, stem):
        self._names += 1
        return f"{stem}-{os.getpid()}-{self._names}"

    # Jobs -----------------------------------------------------------------------------------
    def jobs(self):
        listed = self.cli_json("job", "list", "--json")
        if isinstance(listed, dict):
            listed = listed.get("jobs", [])
        return listed

    def job_id(self, name, timeout=30):
        """The id of the job named `name` (a foreground `tessera train --name`)."""
        def find():
            for job in self.jobs():
                if job.get("name") == name:
                    return job.get("job_id")
            return None
        return wait_for(find, timeout, f"a job named {name} in `tessera job list`")

    def status(self, job_id):
        return self.cli_json("job", "status", job_id, "--json")

    def wait_status(self, job_id, predicate, timeout, what):
        """Polls `job status` until predicate(status) holds; returns that status."""
        deadline = time.monotonic() + timeout
        while True:
            s = self.status(job_id)
            if predicate(s):
                return s
            if time.monotonic() >= deadline:
                pytest.fail(f"timed out after {timeout}s waiting for {what}; last status: "
                            f"state={s.get('state')} message={s.get('message')!r} "
                            f"restarts={s.get('restart_count')} ranks="
                            f"{[(r.get('rank'), r.get('state'), r.get('pid')) for r in s.get('ranks', [])]}")
            time.sleep(0.25)

    def wait_running(self, job_id, world_size, timeout=60):
        """Every rank RUNNING with a pid; returns the status."""
        def ready(s):
            if s.get("state") in TERMINAL_STATES:
                pytest.fail(f"job {job_id} ended {s.get('state')} before running: {s.get('message')}")
            ranks = s.get("ranks", [])
            return (s.get("state") == "RUNNING" and len(ranks) == world_size and
                    all(r.get("state") == "RUNNING" and num(r.get("pid")) > 0 for r in ranks))
        return self.wait_status(job_id, ready, timeout, f"all {world_size} ranks of {job_id} RUNNING")

    def rank(self, status, rank):
        for r in status.get("ranks", []):
            if num(r.get("rank")) == rank:
                return r
        pytest.fail(f"no rank {rank} in status {status}")

    # Foreground train ------------------------------------------------------------------------
    def start(self, *args, log_name="client"):
        """`tessera ARGS` in the background (a foreground `tessera train`, say)."""
        client = Background([self.tessera, *args], cwd=self.work, env=self.env,
                            log_prefix=self.base / log_name)
        self.clients.append(client)
        return client

    # Diagnostics ------------------------------------------------------------------------------
    def diagnostics(self):
        lines = [f"state folder: {self.state}"]
        if self.is_up:
            for args in (("status",), ("job", "list")):
                r = self.cli(*args, timeout=20)
                lines.append(f"$ tessera {' '.join(args)}\n{r.stdout}{r.stderr}")
        head_log = self.state / "logs" / "head.log"
        if head_log.exists():
            lines.append("head.log (tail):\n" + "".join(head_log.read_text(errors="replace")
                                                         .splitlines(True)[-40:]))
        for job_log in sorted((self.state / "jobs").glob("*/job.log")):
            lines.append(f"{job_log} (tail):\n" + "".join(job_log.read_text(errors="replace")
                                                          .splitlines(True)[-30:]))
        return "\n".join(lines)


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)


def kill_left_behind(base):
    """Kills what still names a cluster's fresh mkdtemp folder after `tessera down` (agents and
    ranks hold it in their arguments): the test started it; nothing else can name that folder."""
    for pid in processes_naming(str(base)):
        print(f"left behind after tessera down: pid {pid}: {cmdline(pid)}")
        try:
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def make_cluster(tessera, request):
    """fn(cluster_file, *up_args) -> Cluster, up. Torn down at teardown, even on failure."""
    made = []

    def make(cluster_file, *up_args):
        # Short and fresh: unix sockets live under the state folder (108-byte limit).
        base = tempfile.mkdtemp(prefix="tessera-train-")
        cluster = Cluster(tessera, base)
        made.append(cluster)
        cluster.up(cluster_file, *up_args)
        return cluster

    yield make

    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    problems = (Exception, pytest.fail.Exception)  # a step that fails must not skip the rest
    for cluster in made:
        if failed:
            try:
                print(cluster.diagnostics())
            except problems as e:
                print(f"(diagnostics incomplete: {e})")
        for client in cluster.clients:
            if client.poll() is None:
                print(f"killing client still running: {' '.join(client.cmd)}")
            client.kill()
        try:
            r = cluster.down()
            if r.returncode != 0:
                print(f"tessera down exited {r.returncode}: {r.stdout}{r.stderr}")
        except problems as e:
            print(f"tessera down failed: {e}")
        kill_left_behind(cluster.base)
        if failed:
            print(f"kept {cluster.base} for inspection")
        else:
            shutil.rmtree(cluster.base, ignore_errors=True)

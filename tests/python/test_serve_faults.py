"""Faults and updates of a running application, seen over HTTP through the head's C++ proxy on a
local cluster (two_nodes.yaml):

- a replica SIGKILLed while responses stream from every replica: its clients see a broken
  response (the connection reset, never a response cut short that looks whole, never a hang),
  the streams of the other replicas end whole, and the deployment recovers (a new replica,
  HEALTHY with every replica RUNNING, requests answered by it);
- a code change (an env var of ray_actor_options) rolling through three replicas while clients
  keep sending requests: replicas are replaced one at a time (serve.status polled throughout:
  never fewer than two RUNNING, never more than one STARTING), both versions answer during the
  roll, no request fails (the stopped replicas drain), and afterwards only new replicas answer;
  then a user_config change reconfigures the same replicas in place (same pids, no restart).

One cluster, one Serve (no request_timeout_s: a hang must show as one), one application,
"faults" at /faults, which both tests use in turn. Replicas wait for files the test writes;
waits poll, nothing is timed.
"""
import asyncio
import http.client
import json
import os
import signal
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import start_serve, wait_for
from test_serve_http import connect, read_body, read_head, request

serve = pytest.importorskip("tessera.serve")
pytest.importorskip("starlette")

SOCKET_TIMEOUT_S = 60
REPLICAS = 3
STREAMS = 6
# Code version 1; the roll changes CODE, which the replicas' environment carries.
ACTOR_OPTIONS = {"num_cpus": 0.1, "runtime_env": {"env_vars": {"CODE": "1"}}}


def make_worker():
    """The deployment (its constructor waits for the file $START_GATE when that is set), by
    path (the last segment):

    /who     {"pid", "replica", "code", "greeting"} after `sleep` seconds (a request that is
             still running when its replica is told to stop);
    /stream  a first line {"pid", "replica"}, then, once the file <folder>/<gate> exists, the
             lines b"<i>\\n" for i < n.
    """
    from starlette.responses import JSONResponse, StreamingResponse

    @serve.deployment(num_replicas=REPLICAS, ray_actor_options=ACTOR_OPTIONS,
                      max_ongoing_requests=10, user_config={"greeting": "hello"})
    class Worker:
        def __init__(self, folder):
            self.folder = folder
            self.greeting = None
            # A version whose start the test holds: its replicas stay STARTING until the file
            # START_GATE names exists.
            gate = os.environ.get("START_GATE")
            while gate and not os.path.exists(os.path.join(folder, gate)):
                time.sleep(0.05)

        def reconfigure(self, config):
            self.greeting = config["greeting"]

        def identity(self):
            return {"pid": os.getpid(),
                    "replica": serve.get_replica_context().replica_id.unique_id}

        async def stream(self, gate, n):
            yield (json.dumps(self.identity()) + "\n").encode()
            while not os.path.exists(os.path.join(self.folder, gate)):
                await asyncio.sleep(0.05)
            for i in range(n):
                yield f"{i}\n".encode()

        async def __call__(self, request):
            kind = request.url.path.rsplit("/", 1)[-1]
            query = request.query_params
            if kind == "stream":
                return StreamingResponse(self.stream(query["gate"], int(query["n"])))
            await asyncio.sleep(float(query.get("sleep", 0)))
            return JSONResponse({**self.identity(), "code": os.environ.get("CODE"),
                                 "greeting": self.greeting})

    return Worker


@pytest.fixture(scope="module")
def app(cluster, tmp_path_factory):
    """(the proxy's (host, port), the Worker deployment, its files' folder), with the
    application running."""
    folder = tmp_path_factory.mktemp("faults")
    base = start_serve()
    worker = make_worker()
    serve.run(worker.bind(str(folder)), name="faults", route_prefix="/faults")
    address = urllib.parse.urlsplit(base)
    yield (address.hostname, address.port), worker, folder
    serve.shutdown()


def deployment_status():
    return serve.status().applications["faults"].deployments["Worker"]


def replica_states(status):
    """A deployment status's replica counts by state, the states with none left out."""
    return {state: n for state, n in status.replica_states.items() if n}


def healthy_with_every_replica_running():
    status = deployment_status()
    return status.status == "HEALTHY" and replica_states(status) == {"RUNNING": REPLICAS}


def who(conn, sleep=0.0):
    """GET /faults/who on `conn` (keep-alive): its JSON."""
    conn.request("GET", f"/faults/who?sleep={sleep}")
    response = conn.getresponse()
    body = response.read()
    assert response.status == 200, (response.status, body)
    return json.loads(body)


def who_once(address, sleep=0.0):
    conn = http.client.HTTPConnection(*address, timeout=SOCKET_TIMEOUT_S)
    try:
        return who(conn, sleep)
    finally:
        conn.close()


def pids_answering(address, count=30):
    """The pids of the replicas answering `count` requests (all of them, almost surely)."""
    conn = http.client.HTTPConnection(*address, timeout=SOCKET_TIMEOUT_S)
    try:
        return {who(conn)["pid"] for _ in range(count)}
    finally:
        conn.close()


def settled(address):
    """Waits until every replica runs and answers (whatever a test before left behind): their
    pids."""
    def answering():
        if not healthy_with_every_replica_running():
            return None
        try:
            pids = pids_answering(address)
        except AssertionError:  # a failed request: a dead replica still routed to
            return None
        return pids if len(pids) == REPLICAS else None

    return wait_for(answering, 120, "every replica running and answering")


# ---------------------------------------------------------------------------------------------
# A replica killed under streaming responses.


class Stream:
    """One streaming response, read from a raw connection: its first line says its replica."""

    def __init__(self, address, gate, n):
        self.sock = connect(address)
        self.reader = self.sock.makefile("rb")
        self.sock.sendall(request("GET", f"/faults/stream?gate={gate}&n={n}"))
        status, self.headers = read_head(self.reader)
        assert status == 200 and self.headers.get("transfer-encoding") == "chunked"
        size = int(self.reader.readline(), 16)
        first = self.reader.read(size)
        assert self.reader.readline() == b"\r\n"
        self.replica = json.loads(first)

    def rest(self):
        """The rest of the body, or the error that ended it."""
        try:
            return read_body(self.reader, self.headers)
        except (OSError, ValueError, AssertionError) as e:  # reset, closed mid-chunk
            return e
        finally:
            self.reader.close()
            self.sock.close()


def test_a_killed_replica_breaks_its_streams_only_and_is_replaced(app):
    address, _, folder = app
    before = settled(address)
    with ThreadPoolExecutor(STREAMS) as pool:
        streams = list(pool.map(lambda _: Stream(address, "kill-gate", 5), range(STREAMS)))
    by_pid = {}
    for stream in streams:
        by_pid.setdefault(stream.replica["pid"], []).append(stream)
    assert len(by_pid) >= 2, f"the streams all went to one replica: {list(by_pid)}"
    victim = max(by_pid, key=lambda pid: len(by_pid[pid]))
    os.kill(victim, signal.SIGKILL)

    # The victim's streams break (a reset connection, or one closed before the last chunk):
    # not a hang (the socket's timeout), not a response that looks whole.
    for stream in by_pid.pop(victim):
        ended = stream.rest()
        assert isinstance(ended, Exception), f"a stream of the killed replica ended whole: {ended}"
        assert not isinstance(ended, TimeoutError), "a stream of the killed replica hung"
    # The others were not touched: released, they end whole.
    (folder / "kill-gate").touch()
    for pid, others in by_pid.items():
        for stream in others:
            assert stream.rest() == b"0\n1\n2\n3\n4\n", f"a stream of replica {pid} broke"

    # Requests sent from now on go around the dead replica, none failing: Ray's routers drop a
    # replica whose actor died and send the request that found it dead to another replica.
    survivors = before - {victim}
    replacement = wait_for(lambda: (pid := who_once(address)["pid"]) not in before and pid,
                           120, "a replacement replica to answer")
    # Recovered: every replica running again, the survivors and the replacement answering.
    wait_for(healthy_with_every_replica_running, 120, "the deployment to recover")
    wait_for(lambda: pids_answering(address) == survivors | {replacement}, 120,
             "every replica to answer")


# ---------------------------------------------------------------------------------------------
# Updates under traffic.


class Traffic:
    """Clients sending /who requests on keep-alive connections until stopped, and a poller of
    serve.status meanwhile: every answer, failure and replica-state count, in order."""

    def __init__(self, address, clients=3, sleep=0.2):
        self.address = address
        self.sleep = sleep
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.answers = []  # (time, answer)
        self.failures = []
        self.states = []  # (status, replica_states) of each poll
        self.threads = [threading.Thread(target=self.client, daemon=True)
                        for _ in range(clients)]
        self.threads.append(threading.Thread(target=self.poll, daemon=True))

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for thread in self.threads:
            thread.join(SOCKET_TIMEOUT_S)

    def client(self):
        conn = http.client.HTTPConnection(*self.address, timeout=SOCKET_TIMEOUT_S)
        while not self.stop.is_set():
            try:
                answer = who(conn, self.sleep)
            except Exception as e:  # noqa: BLE001 - every failure is recorded and fails the test
                with self.lock:
                    self.failures.append(repr(e))
                conn.close()
                continue
            with self.lock:
                self.answers.append((time.monotonic(), answer))
        conn.close()

    def poll(self):
        while not self.stop.is_set():
            status = deployment_status()
            with self.lock:
                self.states.append((status.status, replica_states(status)))
            self.stop.wait(0.1)

    def answered(self, predicate):
        with self.lock:
            return [answer for _, answer in self.answers if predicate(answer)]

    def answers_since(self, mark):
        with self.lock:
            return [answer for when, answer in self.answers if when >= mark]


def test_a_code_change_rolls_through_the_replicas_without_failing_a_request(app):
    address, worker, folder = app
    old_pids = settled(address)
    # Code version 2, whose replicas wait in their constructor until the test opens the gate.
    new_options = {**ACTOR_OPTIONS,
                   "runtime_env": {"env_vars": {"CODE": "2", "START_GATE": "roll-gate"}}}
    with Traffic(address) as traffic, ThreadPoolExecutor(8) as pool:
        wait_for(lambda: len(traffic.answers) >= 10, 60, "traffic before the update")
        # Requests still running when their replicas are told to stop: they drain.
        slow = [pool.submit(who_once, address, 2.5) for _ in range(6)]
        deployed = pool.submit(serve.run, worker.options(ray_actor_options=new_options).bind(
            str(folder)), name="faults", route_prefix="/faults")
        # One replica at a time (rollout size max(int(0.2 * 3), 1) = 1): the first old one
        # stopped and gone, its successor held STARTING, and the two others left serving.
        wait_for(lambda: replica_states(deployment_status()) == {"RUNNING": 2, "STARTING": 1},
                 120, "one old replica replaced by a held new one")
        serving = traffic.answered(lambda a: True)[-6:]
        assert {a["code"] for a in serving} == {"1"}
        (folder / "roll-gate").touch()
        deployed.result(timeout=120)
        wait_for(healthy_with_every_replica_running, 120, "the roll to complete")
        mark = time.monotonic()
        wait_for(lambda: len({a["pid"] for a in traffic.answers_since(mark)}) == REPLICAS,
                 60, "every new replica to answer")
        assert [f.result(timeout=60)["code"] for f in slow] == ["1"] * len(slow)
    assert traffic.failures == []

    # Throughout: never fewer than two serving, never more than one starting, never more than
    # three serving or starting.
    counts = [states for _, states in traffic.states]
    for states in counts:
        assert states.get("RUNNING", 0) >= REPLICAS - 1, counts
        assert states.get("STARTING", 0) <= 1, counts
        assert sum(states.get(s, 0) for s in ("RUNNING", "STARTING", "UPDATING")) <= REPLICAS
    assert any("STOPPING" in states for states in counts), "the roll was not seen"
    # The old replicas answered, then only new ones (new processes), each replica once started.
    old = traffic.answered(lambda a: a["code"] == "1")
    new = traffic.answered(lambda a: a["code"] == "2")
    assert {a["pid"] for a in old} <= old_pids
    new_pids = {a["pid"] for a in new}
    assert len(new_pids) == REPLICAS and not new_pids & old_pids
    assert len({a["replica"] for a in new}) == REPLICAS
    assert pids_answering(address) == new_pids

    # A user_config change only: the same replicas, reconfigured in place.
    with Traffic(address) as traffic:
        wait_for(lambda: len(traffic.answers) >= 10, 60, "traffic before the reconfigure")
        serve.run(worker.options(ray_actor_options=new_options,
                                 user_config={"greeting": "hi"}).bind(str(folder)),
                  name="faults", route_prefix="/faults")
        wait_for(lambda: {a["pid"] for a in traffic.answered(lambda a: a["greeting"] == "hi")}
                 == new_pids, 120, "every replica to take the new user_config")
    assert traffic.failures == []
    assert {a["pid"] for _, a in traffic.answers} == new_pids
    for _, states in traffic.states:
        assert set(states) <= {"RUNNING", "UPDATING"}, traffic.states

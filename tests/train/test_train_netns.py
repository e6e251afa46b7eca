"""`tessera train` across network namespaces: ranks find each other through the addresses Tessera
gives them (MASTER_ADDR, TPU_WORKER_HOSTNAMES), not through loopback.

Two network namespaces, each joined by a veth pair to one Linux bridge in the root namespace:

    root namespace   bridge tstrb<pid>   10.209.<pid%250>.1/24   the head binds here
    tstr<pid>a       tseth0              10.209.<pid%250>.2/24   node agent nsA (or v6e-0-w0)
    tstr<pid>b       tseth0              10.209.<pid%250>.3/24   node agent nsB (or v6e-0-w1)

(as tests/integration/network_namespaces.cc does it, with a bridge so the namespaces reach each
other). Nothing listens on loopback that another namespace could reach, so a rank that used
127.0.0.1 to find a peer would fail.

The DDP jobs pass no GLOO_SOCKET_IFNAME of their own: gloo would pick its address by resolving
the host name, which here (one host name for every namespace, /etc/hosts mapping it to
127.0.0.1, like Debian's 127.0.1.1) gives loopback, and rank 0 would then fail in
init_process_group with "connect [127.0.0.1]:NNNN: Connection refused" even though MASTER_ADDR is
right. Tessera sets GLOO_SOCKET_IFNAME (and NCCL_SOCKET_IFNAME) to the interface each rank's
node agent is reached on (tseth0 in both namespaces), so the ranks meet at MASTER_ADDR and
exchange their namespace addresses there.

Needs root, `ip netns add`, a Linux bridge, and PyTorch for /usr/bin/python3; skips otherwise.

    TESSERA_BIN=build/bin/tessera /usr/bin/python3 -m pytest -q tests/train/test_train_netns.py
"""
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import SCRIPT, Cluster, kill_left_behind, num, run, wait_for
from test_train import checksums, rank_lines

PYTHON = "/usr/bin/python3"   # Debian's, with python3-torch; another python3 may come first on PATH
PID = os.getpid()
SUBNET = f"10.209.{PID % 250}"
PREFIX = 24
INSIDE_IF = "tseth0"          # the same name in every namespace (GLOO_SOCKET_IFNAME)
STEPS = 10
START_LINE = re.compile(r"^rank (\d+)/(\d+) .* master (\S+):(\d+)$")
ENV_LINE = re.compile(r"^ENV (.*)$")
# One echo per rank: the variables a rank uses to find its peers.
ENV_PROBE = ("echo ENV RANK=$RANK WORLD_SIZE=$WORLD_SIZE NODE=$TESSERA_NODE_ID "
             "MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT JAX=$JAX_COORDINATOR_ADDRESS "
             "TPU_WORKER_ID=$TPU_WORKER_ID TPU_WORKER_HOSTNAMES=$TPU_WORKER_HOSTNAMES")
# A simulated TPU v6e 2x4 slice of two hosts (4 chips each): v6e-0-w0, v6e-0-w1.
TPU_CLUSTER = """\
node_groups:
  - name: v6e
    slices: {count: 1, accelerator: TPU-V6E, topology: 2x4, chips_per_host: 4}
    hardware:
      host: {sockets: 1, cores_per_socket: 8, memory: 32GiB}
"""


# ----------------------------------------------------------------------------------------------
# Network namespaces


def sh(command, timeout=30):
    """A root-namespace shell command; (exit code, output). Never raises."""
    try:
        r = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return 124, f"timed out: {command}"
    return r.returncode, r.stdout + r.stderr


def why_not():
    """Why these tests cannot run here, or "" when they can."""
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    if sh("ip -V")[0] != 0:
        return "the `ip` command (iproute2) is missing"
    probe = f"tstrp{PID}"
    if sh(f"ip netns add {probe}")[0] != 0:
        return "`ip netns add` is not permitted here"
    sh(f"ip netns del {probe}")
    if sh(f"ip link add {probe} type bridge")[0] != 0:
        return "cannot create a Linux bridge (`ip link add NAME type bridge`)"
    sh(f"ip link del {probe}")
    if not os.access(PYTHON, os.X_OK):
        return f"no {PYTHON}"
    code, out = sh(f"{PYTHON} -c 'import torch, torch.distributed as d; assert d.is_available()'",
                   timeout=120)
    if code != 0:
        return f"{PYTHON} cannot import torch with torch.distributed (install python3-torch): " \
               f"{out.strip().splitlines()[-1] if out.strip() else code}"
    return ""


class Namespaces:
    """Two namespaces on one bridge; every name holds this process's pid."""

    def __init__(self):
        self.bridge = f"tstrb{PID}"
        self.bridge_ip = f"{SUBNET}.1"
        self.names = [f"tstr{PID}a", f"tstr{PID}b"]
        self.host_links = [f"tstrh{PID}a", f"tstrh{PID}b"]
        self.ips = [f"{SUBNET}.2", f"{SUBNET}.3"]
        self.made_links = []
        self.made_namespaces = []

    def _do(self, command):
        code, out = sh(command)
        if code != 0:
            pytest.fail(f"network setup failed: `{command}` exited {code}: {out}")

    def create(self):
        self._do(f"ip link add {self.bridge} type bridge")
        self.made_links.append(self.bridge)
        self._do(f"ip addr add {self.bridge_ip}/{PREFIX} dev {self.bridge}")
        self._do(f"ip link set {self.bridge} up")
        for ns, host_if, ip in zip(self.names, self.host_links, self.ips):
            self._do(f"ip netns add {ns}")
            self.made_namespaces.append(ns)
            # The peer is made inside the namespace, so it can have the same name in each.
            self._do(f"ip link add {host_if} type veth peer name {INSIDE_IF} netns {ns}")
            self.made_links.append(host_if)
            self._do(f"ip link set {host_if} master {self.bridge}")
            self._do(f"ip link set {host_if} up")
            self._do(f"ip netns exec {ns} ip addr add {ip}/{PREFIX} dev {INSIDE_IF}")
            self._do(f"ip netns exec {ns} ip link set {INSIDE_IF} up")
            self._do(f"ip netns exec {ns} ip link set lo up")

    def exec_prefix(self, index):
        return ["ip", "netns", "exec", self.names[index]]

    def remove(self):
        # The host ends first (a veth goes with its peer), then the bridge, then the namespaces.
        for link in reversed(self.made_links):
            sh(f"ip link del {link}")
        for ns in reversed(self.made_namespaces):
            sh(f"ip netns del {ns}")
        self.made_links.clear()
        self.made_namespaces.clear()

    def leftovers(self):
        """Anything of ours `ip netns list` or `ip link` still shows."""
        found = []
        _, listed = sh("ip netns list")
        _, links = sh("ip -o link")
        for name in self.names + self.host_links + [self.bridge]:
            if re.search(rf"\b{name}\b", listed) or re.search(rf"\b{name}\b", links):
                found.append(name)
        return found

    def can_connect(self, index, host, port):
        """Whether a TCP connection from inside namespace `index` to host:port succeeds."""
        code = f"import socket; socket.create_connection(({host!r}, {port}), timeout=3).close()"
        r = run([*self.exec_prefix(index), PYTHON, "-c", code], timeout=30)
        return r.returncode == 0


@pytest.fixture(scope="module")
def namespaces():
    reason = why_not()
    if reason:
        print(f"skipping: {reason}")
        pytest.skip(reason)
    made = Namespaces()
    try:
        made.create()
        yield made
    finally:
        made.remove()
        # `ip netns del` can leave the veth's host end a moment longer; look until it is gone.
        deadline = time.monotonic() + 10
        while made.leftovers() and time.monotonic() < deadline:
            for name in made.leftovers():
                print(f"still there after removal: {name}; removing it again")
                sh(f"ip link del {name}")
                sh(f"ip netns del {name}")
            time.sleep(0.2)
        left = made.leftovers()
        assert not left, f"network namespaces or links left behind: {left}"


# ----------------------------------------------------------------------------------------------
# A head in the root namespace, one agent in each namespace


class NetnsCluster(Cluster):
    """Cluster's CLI (conftest.py) against a head on the bridge and agents in the namespaces."""

    def __init__(self, tessera, base, nets):
        # Absolute: the CLI runs in the work folder, and TESSERA_BIN may be relative.
        super().__init__(Path(tessera).resolve(), base)
        self.nets = nets
        self.nodes = {}   # node id -> namespace index

    def start_head(self):
        r = self.cli("start", "--head", "--bind", self.nets.bridge_ip, "--state-dir", self.state,
                     timeout=60)
        assert r.returncode == 0, f"tessera start --head failed:\n{r.stdout}\n{r.stderr}"
        self.is_up = True
        self.head = (self.state / "head.address").read_text().strip()
        assert self.head.startswith(f"{self.nets.bridge_ip}:"), \
            f"the head bound on {self.nets.bridge_ip} serves at {self.head}"

    def start_agent(self, index, node_id, *extra):
        cmd = [*self.nets.exec_prefix(index), self.tessera, "start", "--address", self.head,
               "--bind", self.nets.ips[index], "--state-dir", self.state, "--node-id", node_id,
               "--object-store-memory", "16MiB", *extra]
        r = run(cmd, timeout=60, cwd=self.work, env=self.env)
        assert r.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{r.stdout}\n{r.stderr}"
        self.nodes[node_id] = index

    def list_nodes(self):
        listed = self.cli_json("list", "nodes", "--json", "--state-dir", self.state)
        return {n["node"]["node_id"]: n for n in listed.get("nodes", [])}

    def wait_alive(self, timeout=30):
        def alive():
            nodes = self.list_nodes()
            return nodes if all(nodes.get(n, {}).get("state") == "ALIVE" for n in self.nodes) \
                else None
        return wait_for(alive, timeout, f"nodes {sorted(self.nodes)} ALIVE")

    def ip_of(self, node_id):
        return self.nets.ips[self.nodes[node_id]]

    def train(self, *args, timeout=150):
        return self.cli("train", "--state-dir", self.state, *args, timeout=timeout)


@pytest.fixture
def netns_cluster(tessera, namespaces, request):
    """fn() -> NetnsCluster with its head started; `tessera down` and a kill of anything still
    naming its folder at teardown, whatever happened."""
    made = []

    def make():
        base = tempfile.mkdtemp(prefix="tessera-netns-")
        cluster = NetnsCluster(tessera, base, namespaces)
        made.append(cluster)
        cluster.start_head()
        return cluster

    yield make

    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    problems = (Exception, pytest.fail.Exception)
    for cluster in made:
        if failed:
            try:
                print(cluster.diagnostics())
                for node in cluster.nodes:
                    log = cluster.state / "nodes" / node / "agent.log"
                    if log.exists():
                        print(f"{log} (tail):\n" + "".join(
                            log.read_text(errors="replace").splitlines(True)[-20:]))
            except problems as e:
                print(f"(diagnostics incomplete: {e})")
        try:
            r = run([cluster.tessera, "down", "--state-dir", cluster.state], timeout=90,
                    cwd=cluster.work, env=cluster.env)
            if r.returncode != 0:
                print(f"tessera down exited {r.returncode}: {r.stdout}{r.stderr}")
        except problems as e:
            print(f"tessera down failed: {e}")
        kill_left_behind(cluster.base)
        if failed:
            print(f"kept {cluster.base} for inspection")
        else:
            remove_tree(cluster.base)


def remove_tree(path):
    """rmtree, retried while something that was just stopped may still be writing there."""
    for attempt in range(20):
        errors = []
        shutil.rmtree(path, onerror=lambda fn, p, exc: errors.append(f"{fn.__name__} {p}: {exc[1]}"))
        if not os.path.exists(path):
            return
        time.sleep(0.25)
    print(f"could not remove {path}: {errors}")


# ----------------------------------------------------------------------------------------------
# Output


def env_lines(text):
    """{rank: {NAME: value}} from the ENV_PROBE lines."""
    found = {}
    for rank, line in rank_lines(text):
        m = ENV_LINE.match(line)
        if m:
            found[rank] = dict(kv.split("=", 1) for kv in m.group(1).split())
    return found


def job_status(cluster, name):
    return cluster.status(cluster.job_id(name))


def described(r):
    return f"exit {r.returncode}\nstdout:\n{r.stdout[-4000:]}\nstderr:\n{r.stderr[-4000:]}"


def assert_ranks_on(cluster, status, world_size):
    """Every rank ran on one of our agents, at its namespace address; {rank: node id}."""
    ranks = {num(r.get("rank")): r for r in status.get("ranks", [])}
    assert sorted(ranks) == list(range(world_size)), f"ranks in status: {status}"
    placed = {}
    for rank, r in ranks.items():
        node = r.get("node_id")
        assert node in cluster.nodes, f"rank {rank} ran on {node}, not one of {sorted(cluster.nodes)}"
        assert r.get("host") == cluster.ip_of(node), \
            f"rank {rank} on {node}: host {r.get('host')}, its namespace address is {cluster.ip_of(node)}"
        placed[rank] = node
    return placed


def assert_env_addresses(cluster, probe, placed):
    """MASTER_ADDR (and JAX's coordinator) is rank 0's namespace address on every rank."""
    master = cluster.ip_of(placed[0])
    for rank, env in sorted(probe.items()):
        assert env["NODE"] == placed[rank], f"rank {rank} says node {env['NODE']}, status {placed[rank]}"
        assert env["MASTER_ADDR"] == master, \
            f"rank {rank}: MASTER_ADDR={env['MASTER_ADDR']}, rank 0's node {placed[0]} is at {master}"
        assert not env["MASTER_ADDR"].startswith("127.") and env["MASTER_ADDR"] != "localhost"
        assert 0 < int(env["MASTER_PORT"]) < 65536, env
        assert env["JAX"].rsplit(":", 1)[0] == master, f"rank {rank}: JAX coordinator {env['JAX']}"
    assert len({env["MASTER_PORT"] for env in probe.values()}) == 1, probe


def run_ddp(cluster, name, where, output):
    """ddp_train.py on gloo across the namespaces; checks it and returns its status."""
    r = cluster.train(*where, "--name", name, "--",
                      PYTHON, SCRIPT, "--steps", STEPS, "--output", output)
    assert r.returncode == 0, f"tessera train {name}: {described(r)}"
    status = job_status(cluster, name)
    assert status.get("state") == "SUCCEEDED", status
    placed = assert_ranks_on(cluster, status, 2)
    assert set(placed.values()) == set(cluster.nodes), f"ranks on {placed}"

    # Each rank saw rank 0's namespace address as MASTER_ADDR, and rendezvoused there.
    master = cluster.ip_of(placed[0])
    starts = {rank: START_LINE.match(line) for rank, line in rank_lines(r.stdout)
              if START_LINE.match(line)}
    assert sorted(starts) == [0, 1], f"start lines: {rank_lines(r.stdout)[:10]}"
    for rank, m in starts.items():
        assert m.group(3) == master, f"rank {rank} printed master {m.group(3)}, expected {master}"
    assert f"MASTER_ADDR={master} " in r.stderr, f"the launcher's attempt line: {r.stderr[-2000:]}"

    sums = checksums(r.stdout)
    assert sorted(sums) == [0, 1], f"checksum lines: {sums}\n{described(r)}"
    assert len(set(sums.values())) == 1, f"ranks ended different: {sums}"
    assert sum(1 for rank, line in rank_lines(r.stdout)
               if rank == 0 and line.startswith("step ")) == STEPS
    assert Path(output).exists(), f"rank 0 wrote no {output}"
    return status


# ----------------------------------------------------------------------------------------------
# Tests


def test_ddp_across_network_namespaces(netns_cluster):
    started = time.monotonic()
    cluster = netns_cluster()
    cluster.start_agent(0, "nsA", "--resources", "CPU=2")
    cluster.start_agent(1, "nsB", "--resources", "CPU=2")
    nodes = cluster.wait_alive()
    for node in ("nsA", "nsB"):
        address = nodes[node]["node"]["address"]
        assert address.startswith(f"{cluster.ip_of(node)}:"), f"{node} registered at {address}"

    # The namespaces are really apart: nsB reaches nsA's agent at its address, not on loopback.
    port_a = int(nodes["nsA"]["node"]["address"].rsplit(":", 1)[1])
    assert cluster.nets.can_connect(1, cluster.ip_of("nsA"), port_a), \
        "nsB cannot reach nsA's agent across the bridge"
    assert not cluster.nets.can_connect(1, "127.0.0.1", port_a), \
        "nsA's agent port answers on nsB's loopback: the namespaces are not separate"

    where = ["--workers", "2", "--resources-per-worker", "CPU=1", "--strategy", "STRICT_SPREAD"]

    # What the ranks are given to find each other.
    name = cluster.unique_name("env")
    r = cluster.train(*where, "--name", name, "--", "sh", "-c", ENV_PROBE, timeout=60)
    assert r.returncode == 0, f"env probe: {described(r)}"
    probe = env_lines(r.stdout)
    assert sorted(probe) == [0, 1], f"probe lines: {r.stdout}"
    placed = assert_ranks_on(cluster, job_status(cluster, name), 2)
    assert sorted(placed.values()) == ["nsA", "nsB"], f"STRICT_SPREAD ranks on {placed}"
    assert_env_addresses(cluster, probe, placed)

    # DDP across the namespaces: gloo rendezvous at MASTER_ADDR, identical parameters.
    run_ddp(cluster, cluster.unique_name("ddp"), where, cluster.work / "final.pt")
    print(f"DDP across network namespaces: {time.monotonic() - started:.1f}s in all")


def test_tpu_slice_across_network_namespaces(netns_cluster):
    started = time.monotonic()
    cluster = netns_cluster()
    cluster_file = cluster.base / "v6e-2x4.yaml"
    cluster_file.write_text(TPU_CLUSTER)
    cluster.start_agent(0, "v6e-0-w0", "--cluster-file", cluster_file)
    cluster.start_agent(1, "v6e-0-w1", "--cluster-file", cluster_file)
    cluster.wait_alive()
    where = ["--accelerator", "TPU-V6E", "--topology", "2x4"]

    name = cluster.unique_name("tpuenv")
    r = cluster.train(*where, "--name", name, "--", "sh", "-c", ENV_PROBE, timeout=60)
    assert r.returncode == 0, f"env probe: {described(r)}"
    probe = env_lines(r.stdout)
    assert sorted(probe) == [0, 1], f"probe lines: {r.stdout}"
    placed = assert_ranks_on(cluster, job_status(cluster, name), 2)
    assert_env_addresses(cluster, probe, placed)
    # The slice's hosts by their addresses in worker order, the same on every host.
    hostnames = [cluster.ip_of("v6e-0-w0"), cluster.ip_of("v6e-0-w1")]
    for rank, env in sorted(probe.items()):
        assert env["TPU_WORKER_HOSTNAMES"] == ",".join(hostnames), \
            f"rank {rank} on {env['NODE']}: TPU_WORKER_HOSTNAMES={env['TPU_WORKER_HOSTNAMES']}"
        worker = int(env["TPU_WORKER_ID"])
        assert env["NODE"] == f"v6e-0-w{worker}", env
        assert hostnames[worker] == cluster.ip_of(env["NODE"]), env

    run_ddp(cluster, cluster.unique_name("tpuddp"), where, cluster.work / "final.pt")
    print(f"TPU slice across network namespaces: {time.monotonic() - started:.1f}s in all")

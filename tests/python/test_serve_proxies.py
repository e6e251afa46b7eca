"""The proxies of the nodes on a local cluster (two_nodes.yaml: cpu-0 and cpu-1, one host): with
http_options location EveryNode, every node that has a replica runs a proxy besides the head's
(an actor of the head's, SERVE_PROXY_ACTOR-<node id> in the namespace "serve", holding no
resources); each answers on the address serve.status() and `tessera serve status --json` show
(a free port each, as they share a host); a request entering a node's proxy goes to the replica
on that node; a proxy whose actor is killed is replaced by the controller. First, without a
cluster, the ProxyActor class over a stand-in for the C++ proxy.

One cluster and one Serve for the file. Waits poll with generous bounds (a proxy's health is
checked every 10 s); nothing is timed.
"""
import json
import urllib.request

import pytest

import tessera
from conftest import TWO_NODES, wait_for

serve = pytest.importorskip("tessera.serve")

NODES = ("cpu-0", "cpu-1")
READY_TIMEOUT_S = 180


def get(url, timeout=60):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read()


def serving(address):
    """Whether the proxy at `address` has its route table (its /-/healthz says so)."""
    try:
        return get(f"http://{address}/-/healthz", timeout=10) == (200, b"success")
    except OSError:  # 503 (HTTPError), or not listening yet
        return False


def healthy_addresses():
    """The address of every HEALTHY proxy, by node id, once the head and both nodes have one."""
    ready = {node: proxy.address for node, proxy in serve.status().proxies.items()
             if proxy == "HEALTHY" and proxy.address}
    return ready if {"head", *NODES} <= set(ready) else None


def proxy_actor_id(node):
    """The id of the live proxy actor of `node`; None while there is none."""
    try:
        return tessera.get_actor(f"SERVE_PROXY_ACTOR-{node}", namespace="serve")._actor_id
    except Exception:  # noqa: BLE001 - gone, or not yet made again
        return None


class FakeProxyHost:
    """What _core.serve_proxy_start returns, in memory."""

    def __init__(self, port):
        self._port = port
        self.draining = False
        self.ongoing = 0
        self.stopped = False

    def port(self):
        return self._port

    def set_draining(self, draining):
        self.draining = draining

    def ongoing_requests(self):
        return self.ongoing

    def stop(self):
        self.stopped = True


def test_the_proxy_actor_starts_the_proxy_as_told_and_reports_where_it_listens(monkeypatch):
    from tessera import _core
    from tessera.serve.proxy import ProxyActor

    started = []

    def start(node_id, node_ip_address, host, port, request_timeout_s, keep_alive_timeout_s):
        started.append((node_id, node_ip_address, host, port, request_timeout_s,
                        keep_alive_timeout_s))
        return FakeProxyHost(port or 41234)

    monkeypatch.setattr(_core, "serve_proxy_start", start, raising=False)
    options = {"node_id": "cpu-1", "node_host": "10.0.0.7", "http_host": "0.0.0.0",
               "http_port": 0, "request_timeout_s": 5, "keep_alive_timeout_s": 90}
    actor = ProxyActor(json.dumps(options))
    assert started == [("cpu-1", "10.0.0.7", "0.0.0.0", 0, 5.0, 90.0)]
    assert actor.ready() == "10.0.0.7:41234"  # every interface: the node's host
    actor.start_draining()
    assert actor._proxy.draining
    actor._proxy.ongoing = 2
    assert actor.is_drained() is False
    actor._proxy.ongoing = 0
    assert actor.is_drained() is True
    assert actor.ready() == "10.0.0.7:41234" and not actor._proxy.draining  # ready ends a drain
    actor.check_health()
    actor.shutdown()
    assert actor._proxy.stopped
    with pytest.raises(RuntimeError, match="stopped"):
        actor.check_health()

    ipv6 = ProxyActor(json.dumps({**options, "http_host": "::1", "http_port": 8000}))
    assert ipv6.ready() == "[::1]:8000"


@pytest.fixture(scope="module")
def cluster_with_proxies(make_cluster):
    cluster = make_cluster(TWO_NODES)
    tessera.init(_state_dir=str(cluster.state))
    serve.start(http_options={"host": "127.0.0.1", "port": 0, "location": "EveryNode"})

    # 3 of a node's 4 CPUs each: one replica per node.
    @serve.deployment(num_replicas=2, ray_actor_options={"num_cpus": 3})
    class WhereAmI:
        def __call__(self, request):
            return tessera.get_runtime_context().get_node_id()

    serve.run(WhereAmI.bind(), name="where", route_prefix="/where")
    yield cluster
    serve.shutdown()
    tessera.shutdown()


def test_each_node_with_a_replica_runs_a_proxy_that_answers_on_its_address(cluster_with_proxies):
    addresses = wait_for(healthy_addresses, READY_TIMEOUT_S, "a healthy proxy on each node")
    assert len(set(addresses.values())) == len(addresses), addresses  # one port each
    for node, address in addresses.items():
        wait_for(lambda: serving(address), 60, f"the proxy of {node} serving")
        status, body = get(f"http://{address}/-/routes")
        assert (status, json.loads(body)) == (200, {"/where": "where"}), node
    for node in NODES:
        assert proxy_actor_id(node) is not None

    shown = cluster_with_proxies.cli("serve", "status", "--json", timeout=120)
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    assert {node: view["proxy_addresses"][node] for node in addresses} == addresses
    assert {view["proxies"][node] for node in addresses} == {"HEALTHY"}


def test_a_request_entering_a_nodes_proxy_goes_to_the_replica_on_that_node(
        cluster_with_proxies):
    addresses = wait_for(healthy_addresses, READY_TIMEOUT_S, "a healthy proxy on each node")
    for node in NODES:
        wait_for(lambda: serving(addresses[node]), 60, f"the proxy of {node} serving")
        answers = {get(f"http://{addresses[node]}/where")[1].decode() for _ in range(6)}
        assert answers == {node}, f"the proxy of {node} sent requests to {answers}"


def test_a_killed_proxy_is_replaced(cluster_with_proxies):
    wait_for(healthy_addresses, READY_TIMEOUT_S, "a healthy proxy on each node")
    node = NODES[0]
    old = proxy_actor_id(node)
    assert old is not None
    tessera.kill(tessera.get_actor(f"SERVE_PROXY_ACTOR-{node}", namespace="serve"))

    def replaced():
        ready = healthy_addresses()
        new = proxy_actor_id(node)
        return ready if ready and new is not None and new != old else None

    addresses = wait_for(replaced, READY_TIMEOUT_S, f"a new healthy proxy on {node}")
    wait_for(lambda: serving(addresses[node]), 60, f"the new proxy of {node} serving")
    assert get(f"http://{addresses[node]}/where")[1].decode() == node

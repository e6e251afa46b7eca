"""The dashboard of a real head whose node registry holds 1,000 nodes registered through the
head's own path (pytest): fill_head_registry (bench/fill_head_registry.cc) registers and then
heartbeats them over tessera.v1.HeadNodes RegisterNode and Heartbeat with the cluster token, as
node agents do, each node with 8 measured GPUs. Then:
- /api/v1/cluster and /api/v1/nodes list all 1,000, every one ALIVE, and a node's telemetry has
  every GPU's readings; the head declares no node dead while they heartbeat, and never connects
  to the nodes' agent address (a listener here that counts connections and answers none: the
  head calls agents only for bundles);
- in headless Chromium the overview, the nodes page (50 rows of 1,000, a filter, the next page)
  and one node's hardware view show them with no console error. The pages' load and poll times
  are printed, not asserted (bench/python/dashboard_registered_nodes.py measures them).

Skips, with the reason, without the tessera or fill_head_registry binaries, or (the browser
test) without Debian's `chromium`. Screenshots go to $TESSERA_DASHBOARD_SCREENSHOTS when set,
else to pytest's tmp_path.
"""

import os
import pathlib
import shutil
import socket
import sys
import threading
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import check_pages  # noqa: E402
import registered_head  # noqa: E402

NODES = 1000
DEVICES = 8
TESSERA = registered_head.tessera_binary()
FILLER = registered_head.filler_binary(TESSERA)


def has_chromium():
    return any(shutil.which(n) for n in (os.environ.get("CHROMIUM", ""), "chromium", "chromium-browser") if n)


class Listener:
    """The nodes' agent address: a loopback port that counts the connections made to it and
    closes each at once."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.address = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self):
        self.sock.close()


@pytest.fixture(scope="module")
def agent():
    listener = Listener()
    yield listener
    listener.close()


@pytest.fixture(scope="module")
def head(agent):
    why = registered_head.missing(TESSERA, FILLER)
    if why:
        pytest.skip(why)
    with registered_head.start(TESSERA, FILLER, nodes=NODES, devices=DEVICES,
                               agent_address=agent.address) as running:
        yield running


def node_ids():
    return [f"fill-{n:04d}" for n in range(1, NODES + 1)]


def assert_all_alive(head):
    listed = head.get("nodes")
    assert listed.get("next_page_token", "") == ""
    ids = [n["node"]["node_id"] for n in listed["nodes"]]
    assert ids == node_ids()
    not_alive = [(n["node"]["node_id"], n["state"]) for n in listed["nodes"] if n["state"] != "ALIVE"]
    assert not not_alive, f"{len(not_alive)} nodes not alive, e.g. {not_alive[:5]}"
    assert "does not know" not in head.filler_log(), head.filler_log()[-2000:]
    dead = [e["message"] for e in head.events() if "declared dead" in e["message"]]
    assert not dead, dead[:5]
    return listed


def test_the_head_lists_every_registered_node_alive(head, agent):
    cluster = head.get("cluster")
    assert len(cluster["nodes"]) == NODES
    assert all(n["state"] == "ALIVE" for n in cluster["nodes"])
    usage = {u["resource"]: u for u in cluster["usage"]}
    assert usage["GPU"]["total"] == NODES * DEVICES
    listed = assert_all_alive(head)
    first = listed["nodes"][0]["node"]
    assert first["labels"]["tessera.io/accelerator-type"] == "H100"
    assert first["devices"][0]["count"] == DEVICES
    # Heartbeats go on: a node timeout (5 s) later every node is still alive.
    time.sleep(6)
    assert_all_alive(head)
    telemetry = head.get("nodes/fill-0001/telemetry")
    assert sorted(d["index"] for d in telemetry["devices"]) == list(range(DEVICES))
    assert all(len(d["samples"]) >= 2 and "utilization" in d["samples"][-1] for d in telemetry["devices"])
    assert listed["nodes"][0]["node"]["address"] == agent.address
    assert agent.connections == 0, f"the head connected {agent.connections} times to the nodes' agent address"


@pytest.mark.skipif(not has_chromium(), reason="no Chromium (apt-get install -y chromium)")
def test_the_pages_show_every_registered_node_without_errors(head, agent, tmp_path):
    out = os.environ.get("TESSERA_DASHBOARD_SCREENSHOTS") or str(tmp_path)
    checks = check_pages.large_cluster_checks(NODES, filter_text="fill-09")
    checks[0].expect.append(f"{NODES:,} nodes, {NODES:,} alive")
    checks[1].expect += [f"{NODES} / {NODES}", "0 draining · 0 dead"]
    checks.append(check_pages.registered_node_check("fill-0001", DEVICES, "H100"))
    with check_pages.Chromium() as browser:
        results = check_pages.check_pages(head.url, checks, out, token=head.token, timeout_s=60,
                                          browser=browser)
        print("\n" + check_pages.describe(results))
        assert all(r.ok for r in results), check_pages.describe(results)
        tab = check_pages.timed_tab(browser, head.token)
        try:
            for route in ("#/overview", "#/nodes", "#/nodes/fill-0001"):
                timing = check_pages.measure_page(tab, head.url, route, polls=3)
                print(f"{route}: shown {timing.load_ms:.0f} ms after navigation; polls "
                      f"{[p['ms'] for p in timing.polls]} ms (fetches {[p['fetch_ms'] for p in timing.polls]} ms) "
                      f"against the 2000 ms poll interval")
                assert timing.errors == [], timing.errors
        finally:
            tab.close()
    assert_all_alive(head)
    assert agent.connections == 0, f"the head connected {agent.connections} times to the nodes' agent address"

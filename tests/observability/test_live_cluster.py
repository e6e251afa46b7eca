"""Observability of a live local cluster (examples/clusters/demo.yaml, simulated GPUs and a TPU
v6e 4x4 slice) with a training gang running on the slice:
- every HTTP endpoint (the head's and each agent's /metrics) is valid Prometheus text
  (`promtool check metrics`);
- a real Prometheus (Debian's `prometheus`), configured only with the head's file_sd targets file
  and the 0600 scrape-token file as its credentials (`authorization: credentials_file:`), scrapes the
  head and every agent, and its HTTP API answers the expected series;
- the dashboard in headless Chromium shows the nodes, the slice's holder and the gang, with no
  console error, and updates when a job starts; a screenshot of each page is written; the URL
  `tessera dashboard` prints logs the page in without the token, once.
Tests that cannot run (no promtool, prometheus or chromium) skip with the reason."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "dashboard"))
TESSERA = os.environ.get("TESSERA_BIN", str(REPO / "build" / "bin" / "tessera"))
DEMO = REPO / "examples" / "clusters" / "demo.yaml"
SHOTS = Path(os.environ.get("TESSERA_SCREENSHOT_DIR", tempfile.gettempdir())) / "tessera-dashboard"


def run(*args, timeout=120, check=True):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                            timeout=timeout, stdin=subprocess.DEVNULL)
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(map(str, args))}: exit {result.returncode}\n{result.stdout}\n"
                    f"{result.stderr}")
    return result


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.25)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


def get(url, timeout=10, token=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                timeout=timeout) as response:
        return response.read().decode()


@pytest.fixture(scope="module")
def cluster():
    state = tempfile.mkdtemp(prefix="tessera-obs-", dir="/tmp")
    env_args = ["--state-dir", state]
    run(TESSERA, "up", DEMO, *env_args, timeout=180)
    # A gang on the whole slice, running while the checks look at it.
    submitted = run(TESSERA, "train", "--detach", "--name", "watched", "--accelerator", "TPU-V6E",
                    "--topology", "4x4", *env_args, "--", "/bin/sleep", "300")
    job = submitted.stdout.strip().splitlines()[-1].split()[-1]
    status = lambda: json.loads(run(TESSERA, "job", "status", job, "--json", *env_args).stdout)
    wait_for(lambda: status()["state"] == "RUNNING", 120, f"job {job} to run")
    try:
        yield {"state": Path(state), "job": job, "args": env_args,
               "head_http": (Path(state) / "head.http").read_text().strip(),
               "token": (Path(state) / "token").read_text().strip()}
    finally:
        run(TESSERA, "down", *env_args, timeout=120, check=False)
        shutil.rmtree(state, ignore_errors=True)


def endpoints(cluster):
    """The head's targets file, once it names the head and all 7 agents (it is rewritten as
    agents join)."""
    path = cluster["state"] / "prometheus" / "targets.json"

    def complete():
        try:
            targets = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        found = {group["labels"].get("node", "head"): group["targets"][0] for group in targets}
        return found if len(found) == 8 else None

    return wait_for(complete, 30, f"{path} to name the head and 7 agents")


def test_the_head_and_every_agent_are_prometheus_targets(cluster):
    found = endpoints(cluster)
    nodes = json.loads(get(f"http://{cluster['head_http']}/api/v1/nodes",
                           token=cluster["token"]))["nodes"]
    assert found["head"] == cluster["head_http"]
    assert sorted(k for k in found if k != "head") == sorted(n["node"]["node_id"] for n in nodes)
    assert len(nodes) == 7  # 2 GPU hosts, 4 slice hosts, 1 CPU node


def test_every_endpoint_is_valid_exposition_text(cluster):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian's prometheus package; scripts/setup)")
    for name, address in endpoints(cluster).items():
        text = get(f"http://{address}/metrics", token=cluster["token"])
        checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                                 text=True, timeout=30)
        assert checked.returncode == 0, f"{name} ({address}): {checked.stdout}{checked.stderr}"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_real_prometheus_scrapes_the_cluster_through_the_targets_file(cluster, tmp_path):
    from prometheus_server import find_prometheus, prometheus_scraping
    if find_prometheus() is None:
        pytest.skip("prometheus is not installed (Debian's prometheus package; scripts/setup)")
    with prometheus_scraping(cluster["state"], tmp_path) as prometheus:
        def stored(expr, what, timeout=30):
            return wait_for(lambda: prometheus.query(expr), timeout, what)

        # Every target scraped and up (the file's own labels are on the series).
        up = wait_for(lambda: (r := prometheus.query("up == 1")) and len(r) == 8 and r, 90,
                      "8 targets up in Prometheus")
        assert {s["metric"]["job"] for s in up} == {"tessera-head", "tessera-node"}
        alive = stored('tessera_nodes{state="ALIVE"}', "tessera_nodes")
        assert float(alive[0]["value"][1]) == 7
        running = stored('tessera_gangs{state="RUNNING"}', "tessera_gangs")
        assert float(running[0]["value"][1]) == 1
        # The gang holds the slice's chips: the head accounts for all 16.
        held = stored('sum(tessera_head_node_resource_reserved{resource="TPU"})', "reserved TPUs")
        assert float(held[0]["value"][1]) == 16
        # The heartbeats the head answered are counted and timed by method, under the service
        # that serves them (head.proto's HeadNodes).
        beats = stored('tessera_rpc_server_handled_total{job="tessera-head",'
                       'service="tessera.v1.HeadNodes",method="Heartbeat",code="OK"}',
                       "counted heartbeats")
        assert float(beats[0]["value"][1]) > 0
        timed = stored('tessera_rpc_server_handling_seconds_count{job="tessera-head",'
                       'method="Heartbeat"}', "timed heartbeats")
        assert float(timed[0]["value"][1]) > 0
        # The gang's slice group was placed and committed: both were timed.
        placed = stored('tessera_head_scheduling_decision_seconds_count{kind="slice_group"}',
                        "a timed slice decision")
        assert float(placed[0]["value"][1]) >= 1
        committed = stored('tessera_head_two_phase_commit_seconds_count{outcome="ok"}',
                           "a timed two-phase commit")
        assert float(committed[0]["value"][1]) >= 1

        # Every Grafana dashboard query (monitoring/grafana/tessera-dashboard.json) runs here.
        import test_grafana_dashboard as grafana
        dashboard = grafana.load_dashboard()
        values = {**grafana.variable_values(dashboard), "__rate_interval": "1m"}
        for where, expr in grafana.expressions(dashboard):
            answer = prometheus.raw_query(grafana.substitute(expr, values))
            assert answer["status"] == "success", f"{where}: {expr}: {answer}"


def test_the_gangs_timeline_has_its_phases_and_every_rank(cluster, tmp_path):
    out = tmp_path / "trace.json"
    run(TESSERA, "timeline", "watched", "-o", out, *cluster["args"])
    trace = json.loads(out.read_text())
    events = trace["traceEvents"]
    assert trace["otherData"]["job_id"] == cluster["job"]
    names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in events if e["ph"] == "M"
             and e["name"] in ("process_name", "thread_name")}
    assert names[(1, None)] == f"Job {cluster['job']} (watched)"
    phases = [e["name"] for e in events if e.get("cat") == "phase"]
    assert phases[:3] == ["PENDING", "STARTING", "RUNNING"], phases
    ranks = [e for e in events if e.get("cat") == "rank"]
    assert len(ranks) == 4  # one per host of the 4x4 slice, running now
    assert {e["args"]["state"] for e in ranks} == {"RUNNING"}
    assert all(e["dur"] > 0 for e in ranks)


def test_the_dashboard_shows_the_cluster_and_follows_a_new_job(cluster):
    import check_pages
    if check_pages.find_chromium() is None:
        pytest.skip("chromium is not installed (Debian's chromium package; scripts/setup)")
    base = f"http://{cluster['head_http']}/"
    SHOTS.mkdir(parents=True, exist_ok=True)
    checks = check_pages.default_checks({
        "nodes": ["gpu-0", "v6e-0-w3", "cpu-0"],
        "slices": ["v6e-0", cluster["job"]],
        "jobs": ["watched"],
    })
    # A GPU host's hardware view: its 4 GB200s on NVSwitch, with their measured figures.
    checks.append(check_pages.PageCheck("node-gpu", "#/nodes/gpu-0", ["GB200", "nvswitch"]))
    browser = check_pages.Chromium().start()
    try:
        results = check_pages.check_pages(base, checks, out_dir=str(SHOTS), token=cluster["token"],
                                          browser=browser)
        failed = [r for r in results if not r.ok]
        assert not failed, check_pages.describe(failed)
        # The URL `tessera dashboard` prints logs a fresh tab in (no token given), and its one-time
        # ticket leaves the address at once.
        printed = run(TESSERA, "dashboard", *cluster["args"]).stdout.split()[0]
        assert printed.startswith(base + "#login=")
        fresh = check_pages.Tab(browser)
        try:
            fresh.navigate(printed)
            wait_for(lambda: fresh.evaluate("location.hash") == "#/overview", 30,
                     "the login to leave the address")
            fresh.evaluate("location.hash = '#/nodes'")
            shows_nodes = lambda: fresh.evaluate(
                "document.body ? document.body.innerText.includes('gpu-0') : false")
            wait_for(shows_nodes, 30, "the logged-in dashboard to show the nodes")
            assert not fresh.evaluate("document.getElementById('token-dialog').open")
            assert fresh.evaluate("sessionStorage.getItem('tessera.token')") != cluster["token"]
            assert fresh.take_errors() == []
        finally:
            fresh.close()
        # A job started while the jobs page is open shows there as it polls, without a reload.
        tab = check_pages.Tab(browser, cluster["token"])
        try:
            tab.navigate(base + "#/jobs")
            shows = lambda text: tab.evaluate(
                f"document.body ? document.body.innerText.includes({json.dumps(text)}) : false")
            wait_for(lambda: shows("watched"), 30, "the jobs page to show the running gang")
            assert not shows("late-job")
            submitted = run(TESSERA, "job", "submit", "--name", "late-job", *cluster["args"],
                            "--", "/bin/sleep", "60")
            late = submitted.stdout.strip().splitlines()[-1].split()[-1]
            wait_for(lambda: shows("late-job"), 30, "the new job on the open jobs page")
            tab.screenshot(str(SHOTS / "jobs-updated.png"))
            assert tab.take_errors() == []
            run(TESSERA, "job", "stop", late, *cluster["args"])
        finally:
            tab.close()
    finally:
        browser.close()

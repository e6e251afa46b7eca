"""Serve's observability on a local cluster (two_nodes.yaml) with Serve LLM's OpenAI app over the
built-in engine: after requests through the C++ proxy, the head's /metrics has the engine's
metrics as Ray exports vLLM's (ray_vllm_*, tagged ReplicaId and model_name: the serve controller
asks every running replica for them) beside Serve's own (ray_serve_*, the proxy's and the
controller's), the text is valid for `promtool check metrics`, a real Prometheus that knows only
the head's targets file and scrape token scrapes them, and the dashboard's Serve page shows the
application, its replicas (node, process) and the engine's figures in headless Chromium.

The model is the demo model's architecture trained for a few steps into a temporary folder.
Tests that cannot run (no promtool, prometheus, chromium) skip with the reason.
"""
import json
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import run_tiny_llm_app, wait_for

serve = pytest.importorskip("tessera.serve")
pytest.importorskip("torch")
pytest.importorskip("fastapi")

REPO = Path(__file__).resolve().parents[2]
# The controller asks replicas for their metrics every 10 s: a bound, never a measured time.
METRICS_PATIENCE_S = 90

_SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$')
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def samples(text):
    """[(name, {label: value}, value)] of Prometheus text (enough of the format for these
    checks; promtool checks the rest)."""
    out = []
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if line.startswith("#") or not match:
            continue
        labels = {k: bytes(v, "utf-8").decode("unicode_escape")
                  for k, v in _LABEL.findall(match.group(2) or "")}
        out.append((match.group(1), labels, float(match.group(3))))
    return out


def matching(text, name, **labels):
    return [(l, v) for n, l, v in samples(text)
            if n == name and all(l.get(k) == want for k, want in labels.items())]


def get(url, token=None, timeout=10):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                timeout=timeout) as response:
        return response.read().decode()


def post(url, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


class Head:
    def __init__(self, cluster):
        self.state = cluster.state
        self.http = (cluster.state / "head.http").read_text().strip()
        self.token = (cluster.state / "token").read_text().strip()

    def metrics(self):
        return get(f"http://{self.http}/metrics", token=self.token)

    def api(self, path):
        return json.loads(get(f"http://{self.http}/api/v1/{path}", token=self.token))


@pytest.fixture(scope="module")
def llm_app(cluster, tmp_path_factory):
    base = run_tiny_llm_app(tmp_path_factory)
    for _ in range(3):
        status, body = post(f"{base}/v1/completions",
                            {"model": "tiny", "prompt": "ab", "max_tokens": 4, "temperature": 0})
        assert status == 200, body
        assert body["usage"]["completion_tokens"] == 4
    status, _ = post(f"{base}/v1/completions", {"model": "tiny", "prompt": "ab",
                                                 "temperature": 7})
    assert status == 400
    yield {"base": base, "head": Head(cluster)}
    serve.shutdown()


def relayed_tokens(head):
    """The head's /metrics once it relays the 12 generated tokens."""
    def ready():
        text = head.metrics()
        tokens = matching(text, "ray_vllm_generation_tokens_total", model_name="tiny")
        return text if tokens and sum(v for _, v in tokens) >= 12 else None
    return wait_for(ready, METRICS_PATIENCE_S, "the engine's metrics on the head's /metrics",
                    interval=1)


def test_the_engines_metrics_reach_the_heads_metrics_with_rays_names_and_tags(llm_app):
    text = relayed_tokens(llm_app["head"])
    [(labels, tokens)] = matching(text, "ray_vllm_generation_tokens_total", model_name="tiny")
    assert tokens == 12
    assert labels["ReplicaId"].startswith("llm#LLMServer")
    replica = labels["ReplicaId"]
    running = llm_app["head"].api("serve")
    ids = [r["replica_id"] for a in running["applications"] for d in a["deployments"]
           for r in d.get("replicas", [])]
    if ids:  # the replicas' list (the dashboard's) names the same replica
        assert replica in ids
    mine = {"ReplicaId": replica, "model_name": "tiny"}
    assert [v for _, v in matching(text, "ray_vllm_time_to_first_token_seconds_count",
                                   **mine)] == [3]
    assert matching(text, "ray_vllm_inter_token_latency_seconds_bucket", le="+Inf", **mine)
    assert [v for _, v in matching(text, "ray_vllm_e2e_request_latency_seconds_count",
                                   **mine)] == [3]
    assert [v for _, v in matching(text, "ray_vllm_request_success_total",
                                   finished_reason="length", **mine)] == [3]
    assert [v for _, v in matching(text, "ray_vllm_num_requests_running", **mine)] == [0]
    assert [v for _, v in matching(text, "ray_vllm_num_requests_waiting", **mine)] == [0]
    [(_, usage)] = matching(text, "ray_vllm_kv_cache_usage_perc", **mine)
    assert 0 <= usage <= 1
    assert "# TYPE ray_vllm_time_to_first_token_seconds histogram" in text
    assert "# TYPE ray_vllm_prompt_tokens_total counter" in text


def test_serves_own_metrics_have_rays_names_and_tags(llm_app):
    text = relayed_tokens(llm_app["head"])
    ok = matching(text, "ray_serve_num_http_requests_total", route="/", method="POST",
                  application="llm", status_code="200")
    assert [v for _, v in ok] == [3]
    assert [v for _, v in matching(text, "ray_serve_num_http_error_requests_total",
                                   error_code="400", application="llm")] == [1]
    [(labels, errors)] = matching(text, "ray_serve_num_deployment_http_error_requests_total",
                                  error_code="400", application="llm", route="/")
    assert errors == 1 and labels["deployment"] and labels["method"] == "POST"
    assert [v for _, v in matching(text, "ray_serve_http_request_latency_ms_count",
                                   application="llm", status_code="200")] == [3]
    healthy = matching(text, "ray_serve_deployment_replica_healthy", application="llm")
    assert len(healthy) == 2 and all(v == 1 for _, v in healthy)  # the ingress and the model
    running = matching(text, "tessera_serve_deployment_replicas", application="llm",
                       state="RUNNING")
    assert sorted(v for _, v in running) == [1, 1]
    assert matching(text, "ray_serve_controller_num_control_loops")


def test_the_heads_metrics_are_valid_exposition_text(llm_app):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian's prometheus package; scripts/setup)")
    text = relayed_tokens(llm_app["head"])
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                             text=True, timeout=30)
    report = checked.stdout + checked.stderr
    if checked.returncode == 3:
        # Lint only (3; 1 is invalid text): promtool's style rules flag two of Ray's names,
        # kept so that Ray's dashboards read them: the unit in ray_serve_*_latency_ms and the
        # tag ReplicaId. Nothing else may be flagged.
        problems = [line for line in report.splitlines() if line.strip()]
        for line in problems:
            ray_ms = (line.startswith("ray_serve_") and "_ms " in line
                      and "abbreviated units" in line)
            replica_id = line.startswith("ray_vllm_") and "'snake_case' not 'camelCase'" in line
            assert ray_ms or replica_id, report
        return
    assert checked.returncode == 0, report


def test_a_real_prometheus_scrapes_them_through_the_targets_file(llm_app, tmp_path):
    sys.path.insert(0, str(REPO / "tests" / "observability"))
    from prometheus_server import find_prometheus, prometheus_scraping
    if find_prometheus() is None:
        pytest.skip("prometheus is not installed (Debian's prometheus package; scripts/setup)")
    relayed_tokens(llm_app["head"])
    with prometheus_scraping(llm_app["head"].state, tmp_path) as prometheus:
        tokens = wait_for(
            lambda: prometheus.query('ray_vllm_generation_tokens_total{model_name="tiny"}'),
            60, "the engine's tokens in Prometheus", interval=0.5)
        assert float(tokens[0]["value"][1]) == 12
        assert tokens[0]["metric"]["ReplicaId"].startswith("llm#LLMServer")
        assert tokens[0]["metric"]["job"] == "tessera-head"
        ttft = wait_for(lambda: prometheus.query('sum(ray_vllm_time_to_first_token_seconds_count)'),
                        30, "TTFT observations in Prometheus", interval=0.5)
        assert float(ttft[0]["value"][1]) == 3
        requests = wait_for(
            lambda: prometheus.query('sum(ray_serve_num_http_requests_total{application="llm"})'),
            30, "the proxy's requests in Prometheus", interval=0.5)
        assert float(requests[0]["value"][1]) == 4


def test_the_dashboards_serve_page_shows_the_application_its_replicas_and_the_engine(llm_app,
                                                                                    tmp_path):
    sys.path.insert(0, str(REPO / "tests" / "dashboard"))
    import check_pages
    if check_pages.find_chromium() is None:
        pytest.skip("chromium is not installed (Debian's chromium package; scripts/setup)")
    head = llm_app["head"]
    relayed_tokens(head)
    status = head.api("serve")
    [app] = status["applications"]
    replicas = {d["name"]: d["replicas"] for d in app["deployments"]}
    [model] = [r for name, rs in replicas.items() if name.startswith("LLMServer") for r in rs]
    assert model["state"] == "RUNNING" and model["node_id"] and model["actor_id"]
    assert model["pid"] > 0 and model["message"] == ""
    metrics = head.api("serve/metrics")
    names = {f["name"] for f in metrics["families"]}
    assert {"ray_serve_num_http_requests_total", "ray_vllm_generation_tokens_total"} <= names
    assert not any(n.startswith("tessera_head_") for n in names)

    check = check_pages.PageCheck(
        "serve-live", "#/serve",
        ["Serve", "llm", "OpenAiIngress", "LLMServer:tiny", model["replica_id"], str(model["pid"]),
         model["node_id"], "2 / 2", "tiny", "12"])
    results = check_pages.check_pages(f"http://{head.http}/", [check], out_dir=str(tmp_path),
                                      token=head.token)
    assert all(r.ok for r in results), check_pages.describe(results)

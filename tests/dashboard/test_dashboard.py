"""The dashboard against its fixtures (pytest): the fixture server answers the head's HTTP
contract (logs by byte offset, events after a seq, the bearer token, N synthesised nodes), and in
headless Chromium every page shows what the fixtures hold with no console error, asks for the
token once, says when the head is down, and keeps 50 rows of DOM with 1,000 nodes.

The browser tests skip without Debian's `chromium` package. Screenshots go to
$TESSERA_DASHBOARD_SCREENSHOTS when set, else to pytest's tmp_path.
"""

import json
import os
import pathlib
import shutil
import sys
import urllib.error
import urllib.request

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import check_pages  # noqa: E402
import serve_fixtures  # noqa: E402

needs_chromium = pytest.mark.skipif(
    not any(shutil.which(n) for n in (os.environ.get("CHROMIUM", ""), "chromium", "chromium-browser") if n),
    reason="no Chromium (apt-get install -y chromium)")


def get(url, token=None):
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, json.loads(response.read())


@pytest.fixture
def server():
    with serve_fixtures.start_server() as running:
        yield running


def screenshots(tmp_path):
    return os.environ.get("TESSERA_DASHBOARD_SCREENSHOTS") or str(tmp_path)


def test_a_log_read_by_offsets_is_the_whole_log_once(server):
    url = server.url + "api/v1/jobs/job-0b5d33f1/logs?rank=1&offset={}"
    text, offset, done, reads = "", 0, False, 0
    while not done and reads < 100:
        _, chunk = get(url.format(offset))
        text += chunk["data"]
        assert chunk["next_offset"] == offset + len(chunk["data"].encode())
        offset, done, reads = chunk["next_offset"], chunk["done"], reads + 1
    assert done
    assert text.startswith("[rank 1] CUDA_VISIBLE_DEVICES=1")
    assert text.endswith("[rank 1] done: exited with code 0\n")
    _, again = get(url.format(offset))
    assert again == {"data": "", "next_offset": offset, "done": True}


def test_events_after_a_seq_are_the_later_ones(server):
    _, first = get(server.url + "api/v1/events")
    seqs = [e["seq"] for e in first["events"]]
    assert seqs == sorted(seqs) and first["next"] == seqs[-1] + 1
    _, later = get(server.url + f"api/v1/events?after={seqs[-3]}")
    assert [e["seq"] for e in later["events"]] == seqs[-2:]


def test_a_guarded_server_answers_401_without_the_token():
    with serve_fixtures.start_server(token="s3cret") as guarded:
        with pytest.raises(urllib.error.HTTPError) as refused:
            get(guarded.url + "api/v1/nodes")
        assert refused.value.code == 401
        status, body = get(guarded.url + "api/v1/nodes", token="s3cret")
        assert status == 200 and len(body["nodes"]) == 6


def test_synthesised_nodes_fill_the_cluster_to_n():
    with serve_fixtures.start_server(nodes=1000) as big:
        _, nodes = get(big.url + "api/v1/nodes")
        _, cluster = get(big.url + "api/v1/cluster")
        ids = [n["node"]["node_id"] for n in nodes["nodes"]]
        assert len(ids) == 1000 and ids == sorted(ids)
        assert len(cluster["nodes"]) == 1000
        status, telemetry = get(big.url + "api/v1/nodes/node-0001/telemetry")
        assert status == 200 and telemetry["node_id"] == "node-0001"


@needs_chromium
def test_every_page_shows_the_fixtures_without_errors(tmp_path):
    results = check_pages.run_fixture_suite(screenshots(tmp_path))
    assert {r.name for r in results} >= {c.name for c in check_pages.fixture_checks()} | {"token", "head-down"}
    assert all(r.ok for r in results), check_pages.describe(results)
    assert {c.name for c in check_pages.navigation_checks()} <= {r.name for r in results}
    assert all(pathlib.Path(r.screenshot).stat().st_size > 0 for r in results if r.screenshot)


@needs_chromium
def test_a_thousand_nodes_cost_fifty_rows(tmp_path):
    results = check_pages.run_fixture_suite(screenshots(tmp_path), nodes=1000)
    assert all(r.ok for r in results), check_pages.describe(results)

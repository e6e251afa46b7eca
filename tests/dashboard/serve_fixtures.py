#!/usr/bin/env python3
"""Serves the dashboard (web/dashboard/ at /) and the API fixtures (tests/dashboard/fixtures/ at
/api/v1/...) the way the head does, for development and for check_pages.py.

    python3 tests/dashboard/serve_fixtures.py [--port 8265] [--nodes 1000] [--token SECRET]

--nodes N pads the cluster to N nodes (clones of the fixture nodes, some dead or draining) to
check that the pages stay responsive with 1,000 nodes. --token makes every /api/v1 call need
`Authorization: Bearer SECRET` (401 otherwise), like a head started with a token.

The fixtures' times are moved to the server's start; telemetry, events and the running job's
logs advance with the clock (a sample every 2 s, an event every 10 s, a log line a second).
Thread-safe: the fixtures are read-only after start-up and each request is answered from them
(ThreadingHTTPServer). As a module: start_server(...) returns a FixtureServer (url, stop()).
"""

import argparse
import copy
import http.server
import json
import math
import pathlib
import threading
import time
import urllib.parse

from make_fixtures import usage_of  # beside this file: the cluster's usage as the head sums it

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEFAULT_WEB = REPO / "web" / "dashboard"
DEFAULT_FIXTURES = HERE / "fixtures"

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".json": "application/json",
    ".txt": "text/plain; charset=utf-8",
}
LOG_CHUNK_BYTES = 64 * 1024
EVENT_EVERY_S = 10
SAMPLE_EVERY_S = 2


def _shift_times(value, shift_ms):
    """Adds shift_ms to every non-zero field named *time_ms, in place."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key.endswith("time_ms") and isinstance(item, (int, float)) and item > 0:
                value[key] = item + shift_ms
            else:
                _shift_times(item, shift_ms)
    elif isinstance(value, list):
        for item in value:
            _shift_times(item, shift_ms)


def _shift_seconds(value, shift_s):
    """Adds shift_s to every non-zero Unix-seconds field of Serve's (last_deployed_time_s,
    state_since_s), in place."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("last_deployed_time_s", "state_since_s") and isinstance(item, (int, float)) and item > 0:
                value[key] = item + shift_s
            else:
                _shift_seconds(item, shift_s)
    elif isinstance(value, list):
        for item in value:
            _shift_seconds(item, shift_s)


def synthesise_nodes(nodes, count):
    """The fixture nodes plus clones of the non-slice ones up to `count` nodes: node-0001, ...;
    every 50th clone is dead and every 97th draining. Returns (nodes, clone id -> template id)."""
    templates = [n for n in nodes if "tessera.io/tpu-slice-name" not in n["node"]["labels"]]
    out = list(nodes)
    sources = {}
    for i in range(1, max(0, count - len(nodes)) + 1):
        template = templates[i % len(templates)]
        clone = copy.deepcopy(template)
        node_id = f"node-{i:04d}"
        clone["node"]["node_id"] = node_id
        clone["node"]["address"] = f"10.{1 + i // 65000}.{(i // 250) % 250}.{i % 250}:7701"
        clone["node"]["labels"]["tessera.io/node-id"] = node_id
        clone["node"]["labels"]["tessera.io/node-group"] = f"synthetic-{i % 7}"
        clone["node"]["incarnation"] = f"{i:010x}"
        clone["state"] = "DEAD" if i % 50 == 0 else "DRAINING" if i % 97 == 0 else "ALIVE"
        clone["last_heartbeat_age_ms"] = 40000 + i if clone["state"] == "DEAD" else 100 + (i * 37) % 900
        cpu = clone["node"]["resources"].get("CPU", 0)
        clone["available"]["CPU"] = max(0, cpu - (i * 13) % (cpu + 1))
        clone["workers"] = (i * 7) % 12
        out.append(clone)
        sources[node_id] = template["node"]["node_id"]
    out.sort(key=lambda n: n["node"]["node_id"])
    return out, sources


class FixtureApi:
    """Answers /api/v1/<path>?<query> from the fixtures. handle() -> (status, JSON-able body)."""

    def __init__(self, fixtures_dir=DEFAULT_FIXTURES, nodes=None, clock=time.time):
        self.dir = pathlib.Path(fixtures_dir)
        self.clock = clock
        self.start_s = clock()
        meta = self._load("meta.json")
        self.shift_ms = int(self.start_s * 1000) - meta["fixture_now_ms"]

        node_list = self._load("nodes.json")["nodes"]
        self.telemetry_source = {}
        if nodes and nodes > len(node_list):
            node_list, self.telemetry_source = synthesise_nodes(node_list, nodes)
        cluster = self._load("cluster.json")
        cluster["nodes"] = node_list
        cluster["usage"] = usage_of(node_list)

        static = {
            "cluster": cluster,
            "nodes": {"nodes": node_list, "next_page_token": ""},
            "placement_groups": self._load("placement_groups.json"),
            "slices": self._load("slices.json"),
            "jobs": self._load("jobs.json"),
            "actors": self._load("actors.json"),
            "serve": self._load("serve.json"),
        }
        _shift_seconds(static["serve"], self.shift_ms / 1000)
        # Encoded once: these do not change while the server runs.
        self.static = {}
        for name, body in static.items():
            _shift_times(body, self.shift_ms)
            self.static[name] = json.dumps(body).encode()
        self.jobs = json.loads(self.static["jobs"])
        self.serve_metrics = json.dumps(self._load("serve_metrics.json")).encode()
        self.events = self._load("events.json")["events"]
        _shift_times(self.events, self.shift_ms)
        self.logs = self._load("logs.json")
        self.telemetry = {}
        for path in sorted((self.dir / "telemetry").glob("*.json")):
            self.telemetry[path.stem] = json.loads(path.read_text(encoding="utf-8"))
        self.node_ids = {n["node"]["node_id"] for n in node_list}
        # GET nodes/<id>: one node's entry, {"node": null} for an id the head does not list.
        self.node_by_id = {n["node"]["node_id"]: json.dumps({"node": n}).encode()
                           for n in json.loads(self.static["nodes"])["nodes"]}

    def _load(self, name):
        return json.loads((self.dir / name).read_text(encoding="utf-8"))

    def elapsed_s(self):
        return max(0.0, self.clock() - self.start_s)

    def handle(self, path, query):
        """path: the part after /api/v1/; query: parse_qs dict. Returns (status, body), where
        body is bytes (already JSON) or a JSON-able value."""
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/") if p]
        if len(parts) == 1 and parts[0] in self.static:
            return 200, self.static[parts[0]]
        if len(parts) == 2 and parts[0] == "nodes":
            return 200, self.node_by_id.get(parts[1], b'{"node": null}')
        if len(parts) == 3 and parts[0] == "nodes" and parts[2] == "telemetry":
            return self._telemetry(parts[1])
        if len(parts) == 3 and parts[0] == "jobs" and parts[2] == "logs":
            return self._logs(parts[1], query)
        if parts == ["events"]:
            return self._events(query)
        if parts == ["serve", "metrics"]:
            return 200, self.serve_metrics
        return 404, {"error": f"no such API path: /api/v1/{path}"}

    def _telemetry(self, node_id):
        if node_id not in self.node_ids:
            return 404, {"error": f"no node {node_id}"}
        source = self.telemetry_source.get(node_id, node_id)
        body = copy.deepcopy(self.telemetry.get(source, {"devices": []}))
        body["node_id"] = node_id
        now_ms = int(self.clock() * 1000)
        roll = int(self.elapsed_s() // SAMPLE_EVERY_S)
        for device in body.get("devices", []):
            samples = device.get("samples", [])
            if not samples:
                continue
            k = roll % len(samples)
            samples[:] = samples[k:] + samples[:k]
            for i, sample in enumerate(samples):
                sample["time_ms"] = now_ms - (len(samples) - 1 - i) * SAMPLE_EVERY_S * 1000
        return 200, body

    def _all_events(self):
        events = list(self.events)
        seq = events[-1]["seq"] if events else 0
        start_ms = int(self.start_s * 1000)
        for k in range(int(self.elapsed_s() // EVENT_EVERY_S)):
            seq += 1
            events.append({"seq": seq, "time_ms": start_ms + (k + 1) * EVENT_EVERY_S * 1000, "kind": "worker",
                           "message": f"worker w-h100-0-{10 + k} started on h100-0 for driver driver-5e0c11"})
        return events

    def _events(self, query):
        after = _int(query, "after", 0)
        events = self._all_events()
        fresh = [e for e in events if e["seq"] > after][:200]
        last = fresh[-1]["seq"] if fresh else (events[-1]["seq"] if events else 0)
        return 200, {"events": fresh, "next": max(last, after) + 1}

    def _log_text(self, job_id, rank):
        recipe = self.logs.get(job_id)
        job = next((j for j in self.jobs["jobs"] if j["job_id"] == job_id), None)
        if recipe is None or job is None:
            return None
        world = job["world_size"]
        if rank != -1 and not 0 <= rank < world:
            return None
        lines_now = recipe["initial_lines"] + int(self.elapsed_s() * recipe["lines_per_second"])
        count = min(recipe["max_lines"], lines_now)
        ranks = range(world) if rank == -1 else [rank]

        def fill(template, r, step=0):
            loss = 2.5 * math.exp(-step / 20000) + 0.05 * math.sin(step + r)
            return template.format(rank=r, worker=r // 4, local=r % 4, step=step, loss=f"{loss:.4f}",
                                   tps=10000 + (step * 37 + r * 101) % 900)

        out = []
        for template in recipe["preamble"]:
            if "{rank}" not in template:
                if rank in (-1, 0):
                    out.append(template)
                continue
            out.extend(fill(template, r) for r in ranks)
        for i in range(count):
            out.extend(fill(recipe["line"], r, recipe["first_step"] + i) for r in ranks)
        for template in recipe.get("epilogue", []):
            out.extend(fill(template, r) for r in ranks)
        return ("\n".join(out) + "\n").encode(), recipe["done"]

    def _logs(self, job_id, query):
        rank = _int(query, "rank", -1)
        offset = max(0, _int(query, "offset", 0))
        made = self._log_text(job_id, rank)
        if made is None:
            return 404, {"error": f"no log of rank {rank} of job {job_id}"}
        text, ended = made
        chunk = text[offset:offset + LOG_CHUNK_BYTES]
        next_offset = offset + len(chunk)
        return 200, {"data": chunk.decode("utf-8", "replace"), "next_offset": next_offset,
                     "done": bool(ended and next_offset >= len(text))}


def _int(query, name, default):
    try:
        return int(query.get(name, [default])[0])
    except (TypeError, ValueError):
        return default


def make_handler(api, web_dir, token, verbose):
    web_root = pathlib.Path(web_dir).resolve()

    class Handler(http.server.BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, so stop() leaves no kept-alive connection
        # answering (the head-down check relies on it).
        protocol_version = "HTTP/1.0"

        def log_message(self, fmt, *args):
            if verbose:
                super().log_message(fmt, *args)

        def _send(self, status, body, content_type="application/json", extra=None):
            if not isinstance(body, bytes):
                body = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            for key, value in (extra or {}).items():
                self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_HEAD(self):
            self.do_GET()

        def do_GET(self):
            url = urllib.parse.urlsplit(self.path)
            if url.path.startswith("/api/v1/"):
                if token and self.headers.get("Authorization", "") != f"Bearer {token}":
                    self._send(401, {"error": "this cluster needs a bearer token"},
                               extra={"WWW-Authenticate": "Bearer"})
                    return
                status, body = api.handle(url.path[len("/api/v1/"):], urllib.parse.parse_qs(url.query))
                self._send(status, body)
                return
            self._static(url.path)

        def _static(self, path):
            relative = urllib.parse.unquote(path).lstrip("/") or "index.html"
            target = (web_root / relative).resolve()
            if web_root not in target.parents or not target.is_file():
                self._send(404, b"not found\n", "text/plain; charset=utf-8")
                return
            self._send(200, target.read_bytes(), CONTENT_TYPES.get(target.suffix, "application/octet-stream"))

    return Handler


class FixtureServer:
    """A running fixture server on a thread of its own: url, api, stop()."""

    def __init__(self, httpd, api):
        self.httpd = httpd
        self.api = api
        host, port = httpd.server_address[:2]
        self.url = f"http://{host}:{port}/"
        self.thread = threading.Thread(target=httpd.serve_forever, name="fixture-server", daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def start_server(host="127.0.0.1", port=0, nodes=None, token=None, web_dir=DEFAULT_WEB,
                 fixtures_dir=DEFAULT_FIXTURES, verbose=False):
    api = FixtureApi(fixtures_dir, nodes=nodes)
    httpd = http.server.ThreadingHTTPServer((host, port), make_handler(api, web_dir, token, verbose))
    httpd.daemon_threads = True
    return FixtureServer(httpd, api)


def main():
    parser = argparse.ArgumentParser(description="Serve the dashboard and its API fixtures.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8265, help="0 picks a free port")
    parser.add_argument("--nodes", type=int, default=None, help="pad the cluster to N nodes")
    parser.add_argument("--token", default=None, help="require Authorization: Bearer TOKEN on /api/v1")
    parser.add_argument("--web", default=str(DEFAULT_WEB))
    parser.add_argument("--fixtures", default=str(DEFAULT_FIXTURES))
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args()
    server = start_server(args.host, args.port, args.nodes, args.token, args.web, args.fixtures, args.verbose)
    print(f"serving the dashboard at {server.url} (Ctrl-C stops)", flush=True)
    try:
        server.thread.join()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()

"""HTTP through the serve proxy to a no-op deployment, against a bare HTTP server doing the same
no-op on the same cores in the same run (docs/benchmarks.md, "Serving: the proxy").

Three targets, each measured by wrk (Debian's) at 1, 16 and 64 connections with 2 threads:
  tessera     GET /noop through the C++ proxy to one replica of a no-op deployment (its
              __call__ returns the bytes b"ok" as a Starlette Response): the proxy, the router,
              the replica hop (an actor call on the local task stream) and the replica's Python
  floor       GET /-/healthz, answered by the proxy itself: the HTTP server's own cost
  uvicorn     the same no-op as a bare ASGI app under uvicorn (Debian's python3-uvicorn), one
              process: what a user would run without a runtime

    PYTHONPATH=build/python TESSERA_BIN=build/bin/tessera \
      /usr/bin/python3 bench/serve/proxy_bench.py [--duration 5] [--json OUT]

Prints one table; --json keeps every figure. Nothing here is asserted: it measures.
"""
import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time

CONNECTIONS = (1, 16, 64)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def to_ms(text: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def wrk(url: str, connections: int, duration: int) -> dict:
    out = subprocess.run(["wrk", "-t", str(min(2, connections)), "-c", str(connections), "-d",
                          f"{duration}s", "--latency", url],
                         capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = to_ms(re.search(r"\s50%\s+([\d.]+\w+)", out).group(1))
    p99 = to_ms(re.search(r"\s99%\s+([\d.]+\w+)", out).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"rps": rps, "p50_ms": p50, "p99_ms": p99,
            "non_2xx": int(errors.group(1)) if errors else 0}


def wait_http(url: str, timeout: float = 30) -> None:
    import urllib.request
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


UVICORN_APP = """
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})
"""


def measure_uvicorn(duration: int, tmp: str) -> dict:
    with open(os.path.join(tmp, "bare_noop.py"), "w") as f:
        f.write(UVICORN_APP)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "uvicorn", "bare_noop:app", "--port",
                               str(port), "--log-level", "warning", "--no-access-log"],
                              cwd=tmp)
    try:
        wait_http(f"http://127.0.0.1:{port}/")
        return {c: wrk(f"http://127.0.0.1:{port}/", c, duration) for c in CONNECTIONS}
    finally:
        server.terminate()
        server.wait(10)


def measure_tessera(duration: int) -> dict:
    import tessera
    from tessera import serve
    from starlette.responses import Response

    tessera.init(num_cpus=2)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": 0})

        @serve.deployment(max_ongoing_requests=1000)
        class Noop:
            async def __call__(self, request):
                return Response(b"ok", media_type="text/plain")

        serve.run(Noop.bind(), name="noop", route_prefix="/noop")
        address = [p.address for p in serve.status().proxies.values() if p.address][0]
        base = f"http://{address}"
        wait_http(f"{base}/noop")
        results = {"tessera": {}, "floor": {}}
        for c in CONNECTIONS:
            results["tessera"][c] = wrk(f"{base}/noop", c, duration)
            results["floor"][c] = wrk(f"{base}/-/healthz", c, duration)
        serve.shutdown()
        return results
    finally:
        tessera.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=int, default=5, help="seconds per wrk run")
    parser.add_argument("--json", help="write every figure here")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        print("proxy_bench: wrk is not installed (scripts/setup installs it)", file=sys.stderr)
        return 2
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        bare = measure_uvicorn(args.duration, tmp)
    results = measure_tessera(args.duration)
    results["uvicorn"] = bare
    print(f"{'connections':>11} | {'tessera req/s':>13} {'p50 ms':>7} {'p99 ms':>7} | "
          f"{'uvicorn req/s':>13} {'p50 ms':>7} {'p99 ms':>7} | {'floor req/s':>11} "
          f"{'p50 ms':>7} | {'tessera/uvicorn':>15} {'p50 added ms':>12}")
    for c in CONNECTIONS:
        t, u, f = results["tessera"][c], results["uvicorn"][c], results["floor"][c]
        print(f"{c:>11} | {t['rps']:>13,.0f} {t['p50_ms']:>7.2f} {t['p99_ms']:>7.2f} | "
              f"{u['rps']:>13,.0f} {u['p50_ms']:>7.2f} {u['p99_ms']:>7.2f} | {f['rps']:>11,.0f} "
              f"{f['p50_ms']:>7.2f} | {t['rps'] / u['rps']:>15.2f} "
              f"{t['p50_ms'] - u['p50_ms']:>12.2f}")
    bad = {name: {c: r["non_2xx"] for c, r in runs.items() if r["non_2xx"]}
           for name, runs in results.items()}
    if any(bad.values()):
        print(f"non-2xx responses: {bad}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

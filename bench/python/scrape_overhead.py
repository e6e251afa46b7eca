"""What metrics cost the task hot path: Python task throughput on a local cluster with nobody
scraping, against the same with the head's and every agent's /metrics scraped once a second (as
a Prometheus with a 1 s interval would), in the same run, interleaved round by round so the shared
machine's noise falls on both sides alike.

Usage: PYTHONPATH=build/python TESSERA_BIN=build/bin/tessera \
       /usr/bin/python3 bench/python/scrape_overhead.py [--rounds 6] [--seconds 3]

A round runs the loop (1000 no-op tasks submitted, then all got: the async loop of
microbench.py) for --seconds without scraping and for --seconds with a scraper thread; the
figure is the median over rounds of (rate with scraping) / (rate without). Prints one table.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESSERA = os.environ.get("TESSERA_BIN", str(REPO / "build" / "bin" / "tessera"))


def endpoints(state):
    targets = json.loads((Path(state) / "prometheus" / "targets.json").read_text())
    return [group["targets"][0] for group in targets]


def scraper(addresses, stop, counts, token):
    while not stop.wait(1.0):
        for address in addresses:
            request = urllib.request.Request(f"http://{address}/metrics",
                                             headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(request, timeout=5) as reply:
                counts["bytes"] += len(reply.read())
            counts["scrapes"] += 1


def rate(tessera, noop, seconds):
    done = 0
    began = time.perf_counter()
    while time.perf_counter() - began < seconds:
        tessera.get([noop.remote() for _ in range(1000)])
        done += 1000
    return done / (time.perf_counter() - began)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    state = tempfile.mkdtemp(prefix="tessera-scrape-", dir="/tmp")
    cluster = REPO / "tests" / "python" / "two_nodes.yaml"
    subprocess.run([TESSERA, "up", cluster, "--state-dir", state], check=True,
                   capture_output=True, timeout=120)
    try:
        deadline = time.monotonic() + 30
        while len(endpoints_or_none(state)) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        addresses = endpoints(state)
        import tessera
        tessera.init(_state_dir=state)

        @tessera.remote
        def noop():
            return None

        rate(tessera, noop, 2.0)  # warm-up: workers started
        rows = []
        for _ in range(args.rounds):
            quiet = rate(tessera, noop, args.seconds)
            stop = threading.Event()
            counts = {"scrapes": 0, "bytes": 0}
            token = (Path(state) / "token").read_text().strip()
            thread = threading.Thread(target=scraper, args=(addresses, stop, counts, token),
                                      daemon=True)
            thread.start()
            scraped = rate(tessera, noop, args.seconds)
            stop.set()
            thread.join()
            rows.append((quiet, scraped, counts["scrapes"], counts["bytes"]))
        tessera.shutdown()
    finally:
        subprocess.run([TESSERA, "down", "--state-dir", state], capture_output=True, timeout=120)
        shutil.rmtree(state, ignore_errors=True)
    print(f"{'round':>5} {'no scrape tasks/s':>18} {'scraped tasks/s':>16} {'ratio':>6} "
          f"{'scrapes':>8} {'bytes/scrape':>12}")
    for i, (quiet, scraped, scrapes, size) in enumerate(rows, 1):
        print(f"{i:>5} {quiet:>18,.0f} {scraped:>16,.0f} {scraped / quiet:>6.3f} {scrapes:>8} "
              f"{size // max(scrapes, 1):>12,}")
    ratios = [scraped / quiet for quiet, scraped, _, _ in rows]
    print(f"median ratio {statistics.median(ratios):.3f} "
          f"(slowdown {100 * (1 - statistics.median(ratios)):.1f} %; target: at most 3 %)")


def endpoints_or_none(state):
    try:
        return endpoints(state)
    except (OSError, ValueError):
        return []


if __name__ == "__main__":
    sys.exit(main())

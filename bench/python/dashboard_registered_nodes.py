"""The dashboard against a real head holding 1,000 registered nodes: fill_head_registry
(bench/fill_head_registry.cc) registers them over the head's own RegisterNode and heartbeats
them (each with 8 measured GPUs, once a second), then this measures
- each JSON call the dashboard's overview, nodes and node pages make, fetched from here
  (median and highest of --calls, with the answer's size), and
- in headless Chromium (tests/dashboard/check_pages.py), each of those pages' load (navigation
  to the first poll's end) and its polls (median of --polls polls after the first, split into
  the poll's fetches and the rest: JSON parsing and rendering), against the dashboard's 2 s poll
  interval.

Usage: ninja -C build tessera fill_head_registry
       TESSERA_BIN=build/bin/tessera /usr/bin/python3 bench/python/dashboard_registered_nodes.py \
           [--nodes 1000] [--devices 8] [--calls 20] [--polls 7]

Prints one table per part, the head's resident memory, the nodes' states at the end and the
filler's own summary (heartbeats answered, failed, late rounds). Nothing is asserted.
"""
import argparse
import collections
import statistics
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "dashboard"))
import check_pages  # noqa: E402
import registered_head  # noqa: E402

POLL_INTERVAL_MS = 2000  # web/dashboard/js/app.js POLL_MS


def time_call(url, calls, token):
    times, size = [], 0
    for _ in range(calls):
        began = time.perf_counter()
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            size = len(response.read())
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times), max(times), size


def resident_mib(pid):
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, TypeError):
        pass
    return float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--devices", type=int, default=8, help="GPUs per node")
    parser.add_argument("--calls", type=int, default=20, help="fetches of each JSON call")
    parser.add_argument("--polls", type=int, default=7, help="polls of each page after its first")
    args = parser.parse_args()
    tessera = registered_head.tessera_binary()
    filler = registered_head.filler_binary(tessera)
    why = registered_head.missing(tessera, filler)
    if why:
        sys.exit(why)
    node = "fill-0001"
    with registered_head.start(tessera, filler, nodes=args.nodes, devices=args.devices) as head:
        time.sleep(5)  # a few heartbeats: every node has device readings
        print(f"{args.nodes} nodes registered, {args.devices} GPUs each; head resident "
              f"{resident_mib(head.head_pid()):.0f} MiB\n")
        print("| JSON call (fetched from Python) | used by | median ms | highest ms | bytes |")
        print("|---|---|--:|--:|--:|")
        for path, pages in (("nodes", "nodes"), ("cluster", "overview"), ("events", "overview"),
                            (f"nodes/{node}", "node"), (f"nodes/{node}/telemetry", "node")):
            median, highest, size = time_call(head.url + "api/v1/" + path, args.calls, head.token)
            print(f"| `/api/v1/{path}` | {pages} | {median:.1f} | {highest:.1f} | {size:,} |")
        print()
        print("| page (Chromium) | load ms | poll ms (median) | of which fetches | of which parse + render "
              "| poll / 2 s interval | JSON fetch ms (median, by path) |")
        print("|---|--:|--:|--:|--:|--:|---|")
        with check_pages.Chromium() as browser:
            tab = check_pages.timed_tab(browser, head.token)
            for route in ("#/overview", "#/nodes", f"#/nodes/{node}"):
                t = check_pages.measure_page(tab, head.url, route, polls=args.polls,
                                             timeout_s=30 + args.polls * 4)
                fetches = ", ".join(f"{p.removeprefix('/api/v1/')} {statistics.median(ms):.0f}"
                                    for p, ms in sorted(t.fetch_ms.items()))
                poll = t.median("ms")
                print(f"| `{route}` | {t.load_ms:.0f} | {poll:.0f} | {t.median('fetch_ms'):.0f} | "
                      f"{t.median('rest_ms'):.0f} | {poll / POLL_INTERVAL_MS:.3f} | {fetches} |")
                if t.errors:
                    print(f"  console errors on {route}: {t.errors}")
            tab.close()
        states = collections.Counter(n["state"] for n in head.get("nodes")["nodes"])
        dead = [e["message"] for e in head.events() if "declared dead" in e["message"]]
        print(f"\nhead resident {resident_mib(head.head_pid()):.0f} MiB after the pages; node states "
              f"{dict(states)}; {len(dead)} 'declared dead' events")
    print("filler: " + (head.final_log.strip() or "(nothing on stderr)"))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Runs the Python microbenchmarks on Tessera (microbench.py) and on Dask distributed
(dask_microbench.py), alternately, --repeats times each, and prints the markdown table of
docs/benchmarks.md ("Python API (microbenchmarks)"): per loop the best run of each system (a
run's figure is the mean of its trials, as the peer's harness reports; the best of the runs
because the shared 2-core machine only ever slows a run down), Tessera / Dask, Ray's published
single-node figure (the Ray 2.20.0 release log's microbenchmark, one
m5.16xlarge: 64 vCPUs) and Tessera / Ray, and large put against the memcpy of the same run.

    /usr/bin/python3 bench/python/compare.py [--build build] [--repeats 3] [--quick] [--out DIR]
    /usr/bin/python3 bench/python/compare.py --table-from DIR     # the table of runs kept in DIR

PYTHONPATH and TESSERA_BIN default to BUILD/python and BUILD/bin/tessera. Every run's JSON and
stderr stay in --out (default a new /tmp folder, printed), with the load average before each run.
Targets checked (marked in the last column): Tessera >= 20x Dask and >= Ray's published figure
on every loop; large put >= 50 % of memcpy in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

# Ray 2.20.0 (release/release_logs/2.20.0/microbenchmark.json), ops/s. Ray counts 0.8 "GB" per
# 800 MiB array (0.8388 * 1e9 bytes), so its put figure x 1.048576 is in bytes / 1e9 per second,
# the unit of microbench.py.
RAY_PUBLISHED = {
    "single_client_tasks_sync": 965.8,
    "single_client_tasks_async": 7994,
    "multi_client_tasks_async": 22359,
    "1_1_actor_calls_sync": 2113,
    "1_1_actor_calls_async": 8749,
    "n_n_actor_calls_async": 27207,
    "single_client_put_calls": 5142,
    "single_client_get_calls": 10269,
    "single_client_put_gigabytes": 18.68 * 1.048576,
}
ORDER = [
    "single_client_tasks_sync", "single_client_tasks_async", "multi_client_tasks_async",
    "1_1_actor_calls_sync", "1_1_actor_calls_async", "n_n_actor_calls_async",
    "single_client_put_calls", "single_client_get_calls", "single_client_put_gigabytes",
    "cross_node_get_gigabytes", "memcpy_gigabytes",
]
DASK_FACTOR = 20.0
PUT_OVER_MEMCPY = 0.5


def run_one(command, env, out: Path, name: str) -> dict:
    load = os.getloadavg()
    json_path = out / f"{name}.json"
    with open(out / f"{name}.err", "w") as err:
        done = subprocess.run(command + ["--json", str(json_path)], env=env, stdout=subprocess.PIPE,
                              stderr=err, text=True, timeout=1800)
    if done.returncode != 0 or not json_path.exists():
        print(f"compare: {name} failed (exit {done.returncode}); see {out / (name + '.err')}",
              file=sys.stderr)
        return {}
    data = json.loads(json_path.read_text())
    data["meta"]["load_before"] = load
    json_path.write_text(json.dumps(data, indent=2))
    print(f"compare: {name} done (load average before {load[0]:.2f})", file=sys.stderr)
    return data


def best(runs, loop):
    """The best run's figures for `loop` (highest mean), with that run's index."""
    found = [(r["results"][loop], i) for i, r in enumerate(runs) if loop in r.get("results", {})]
    return max(found, key=lambda f: f[0]["rate"]) if found else (None, None)


def fmt(value, unit):
    if value is None:
        return "—"
    if unit == "GB/s":
        return f"{value:.2f} GB/s"
    return f"{value:,.0f}/s"


def ratio(a, b):
    return f"{a / b:.2f}×" if a is not None and b else "—"


def table(tessera_runs, dask_runs) -> str:
    lines = ["| loop | Tessera | Dask | Tessera / Dask | Ray 2.20.0 (64 vCPU) | Tessera / Ray "
             "| targets |",
             "|:--|--:|--:|--:|--:|--:|:--|"]
    for loop in ORDER:
        t, t_run = best(tessera_runs, loop)
        d, _ = best(dask_runs, loop)
        if t is None and d is None:
            continue
        unit = (t or d)["unit"]
        t_rate = t["rate"] if t else None
        d_rate = d["rate"] if d else None
        published = RAY_PUBLISHED.get(loop)
        verdicts = []
        if loop == "memcpy_gigabytes":
            verdicts.append("ceiling")
        else:
            if t_rate is not None and d_rate:
                met = t_rate >= DASK_FACTOR * d_rate
                verdicts.append(f"≥20× Dask {'met' if met else 'MISSED'}")
            if t_rate is not None and published:
                verdicts.append(f"≥ Ray {'met' if t_rate >= published else 'MISSED'}")
        if loop == "single_client_put_gigabytes" and t is not None:
            memcpy = tessera_runs[t_run]["results"].get("memcpy_gigabytes")
            if memcpy:
                share = t_rate / memcpy["rate"]
                verdicts.append(f"{share:.0%} of memcpy (same run): ≥50% "
                                f"{'met' if share >= PUT_OVER_MEMCPY else 'MISSED'}")
        lines.append(f"| {loop} | {fmt(t_rate, unit)} | {fmt(d_rate, unit)} | "
                     f"{ratio(t_rate, d_rate)} | {fmt(published, unit)} | "
                     f"{ratio(t_rate, published)} | {'; '.join(verdicts)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=str(REPO / "build"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--skip-dask", action="store_true")
    parser.add_argument("--out", help="folder for every run's JSON (default: a new /tmp folder)")
    parser.add_argument("--only", action="append", metavar="NAME")
    parser.add_argument("--table-from", metavar="DIR",
                        help="run nothing: print the table of the tessera-*.json and dask-*.json "
                             "already in DIR (runs added by hand, or a run to re-read)")
    args = parser.parse_args()
    if args.table_from:
        folder = Path(args.table_from)
        load = lambda pattern: [json.loads(p.read_text()) for p in sorted(folder.glob(pattern))]
        print(table(load("tessera-*.json"), load("dask-*.json")))
        return
    out = Path(args.out or tempfile.mkdtemp(prefix="tessera-pybench-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"compare: results in {out}", file=sys.stderr)
    build = Path(args.build).resolve()
    env = dict(os.environ)
    env.setdefault("PYTHONPATH", str(build / "python"))
    env.setdefault("TESSERA_BIN", str(build / "bin" / "tessera"))
    extra = (["--quick"] if args.quick else []) + [a for n in (args.only or []) for a in
                                                   ("--only", n)]
    tessera_runs, dask_runs = [], []
    for i in range(args.repeats):
        tessera_runs.append(run_one([sys.executable, str(HERE / "microbench.py")] + extra, env,
                                    out, f"tessera-{i}"))
        if not args.skip_dask:
            dask_runs.append(run_one([sys.executable, str(HERE / "dask_microbench.py")] + extra,
                                     env, out, f"dask-{i}"))
    text = table(tessera_runs, dask_runs)
    (out / "table.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()

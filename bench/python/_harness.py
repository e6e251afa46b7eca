"""The timing harness and output of the Python microbenchmarks (microbench.py for Tessera,
dask_microbench.py for Dask distributed), so both systems run exactly the same loops the same way.

timeit is the peer harness's (Ray's `timeit`, the peers' published harness (Ray's microbenchmark A1)): a
warm-up of `warmup_s` counting calls c, then `trials` trials that each run blocks of c // 10 + 1
calls until `trial_s` has passed; a trial's rate is multiplier x calls / elapsed. The figure is
the mean of the trials (as the peer reports), with the stddev and the best trial beside it.

Sizes: `Sizes(quick)` is the one place the loops' sizes live; --quick is 1 % of each (batches of
10 instead of 1000, 2 MiB instead of 200 MiB) with short trials, for the smoke test.

Output: one line per loop on stdout, `name rate unit` (three fields, for the smoke test and
compare.py), and with --json a file {"meta": {...}, "results": {name: {rate, stddev, best,
unit, how}}}.

Threading: one thread. Cost: what the loops cost; the harness adds a clock read per block.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional

MIB = 2**20


class Sizes:
    """Every loop's size and timing; --quick is 1 % of each."""

    def __init__(self, quick: bool) -> None:
        scale = 0.01 if quick else 1.0
        self.quick = quick
        self.batch = max(1, int(1000 * scale))  # tasks or calls per async block
        self.clients = 4  # multi-client driver processes, n:n callers
        self.target_actors = 8  # n:n targets (the peer: 32 on 64 vCPUs)
        self.calls_per_client = max(1, int(1000 * scale))  # n:n calls per caller per block
        self.large_bytes = max(MIB, int(200 * MIB * scale))  # large put, memcpy, cross-node get
        self.cross_node_repeats = 2 if quick else 4
        self.multi_client_seconds = 0.3 if quick else 3.0
        self.multi_client_trials = 1 if quick else 2
        self.warmup_s, self.trials, self.trial_s = (0.2, 1, 0.3) if quick else (1.0, 4, 2.0)


def timeit(fn: Callable[[], object], multiplier: float, sizes: Sizes) -> Dict[str, float]:
    """The peer's harness: rate = multiplier x calls / elapsed; mean, stddev and best trial."""
    start = time.perf_counter()
    calls = 0
    while time.perf_counter() - start < sizes.warmup_s:
        fn()
        calls += 1
    step = calls // 10 + 1
    rates = []
    for _ in range(sizes.trials):
        start = time.perf_counter()
        done = 0
        while time.perf_counter() - start < sizes.trial_s:
            for _ in range(step):
                fn()
            done += step
        rates.append(multiplier * done / (time.perf_counter() - start))
    return summarize(rates)


def race_clients(command: List[str], clients: int, system: str,
                 env: Optional[Dict[str, str]] = None) -> float:
    """Tasks/s of `clients` copies of `command` started at once: each prints "ready" once
    connected, starts on "go", then prints "<tasks> <seconds>"; the rate is all their tasks over
    the slowest one's time."""
    children = [subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True, env=env)
                for _ in range(clients)]
    try:
        for child in children:
            if child.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a {system} client process failed to connect")
        for child in children:
            child.stdin.write("go\n")
            child.stdin.flush()
        tasks, slowest = 0, 0.0
        for child in children:
            n, taken = child.stdout.readline().split()
            tasks += int(n)
            slowest = max(slowest, float(taken))
    finally:
        for child in children:
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                child.kill()
    return tasks / slowest


def summarize(rates: List[float]) -> Dict[str, float]:
    return {"rate": statistics.mean(rates),
            "stddev": statistics.stdev(rates) if len(rates) > 1 else 0.0,
            "best": max(rates), "trials": len(rates)}


class Recorder:
    """Runs the selected loops, prints one line each, keeps the figures for --json."""

    def __init__(self, sizes: Sizes, only: Optional[List[str]]) -> None:
        self.sizes = sizes
        self.only = set(only) if only else None
        self.results: Dict[str, dict] = {}

    def wanted(self, name: str) -> bool:
        return self.only is None or name in self.only

    def add(self, name: str, figures: Dict[str, float], unit: str, how: str) -> None:
        self.results[name] = dict(figures, unit=unit, how=how)
        print(f"{name} {figures['rate']:.6g} {unit}", flush=True)
        print(f"  {name}: mean {figures['rate']:,.2f} ± {figures['stddev']:,.2f}, best trial "
              f"{figures['best']:,.2f} {unit} ({how})", file=sys.stderr, flush=True)

    def time(self, name: str, fn: Callable[[], object], multiplier: float, unit: str,
             how: str) -> None:
        if self.wanted(name):
            self.add(name, timeit(fn, multiplier, self.sizes), unit, how)

    def write_json(self, path: Optional[str], meta: dict) -> None:
        if not path:
            return
        meta = dict(meta, quick=self.sizes.quick, nproc=os.cpu_count(),
                    load_average=os.getloadavg(), python=platform.python_version(),
                    time=time.strftime("%Y-%m-%d %H:%M:%S"))
        with open(path, "w") as out:
            json.dump({"meta": meta, "results": self.results}, out, indent=2)


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true",
                   help="1%% sizes and short trials (the smoke test)")
    p.add_argument("--json", help="also write the figures to this file")
    p.add_argument("--only", action="append", metavar="NAME",
                   help="run only this loop (repeatable)")
    p.add_argument("--settle", type=float, default=None,
                   help="seconds to wait after the cluster starts (default 1, --quick 0)")
    return p

#!/usr/bin/python3
"""CPU spent per task and per actor call, driver and workers together, from /proc (the measure
of docs/benchmarks.md, "CPU per call"): a one-node local cluster (2 CPUs), a warm-up, then
`--calls` no-op tasks (or calls on one actor) submitted in batches of 1000 and got, while the
user and system CPU time of every process is read from /proc/<pid>/stat before and after.

Processes: the driver (this one), the workers (every process whose environment names the
cluster's state folder and whose command line is a worker's), and the cluster's daemons (head
and node agent). The figure of the issue is driver + workers, per call; the daemons' share is
printed beside it (they do no per-task work on the data path: the owner pushes tasks straight to
its leased workers).

Usage: PYTHONPATH=build/python TESSERA_BIN=build/bin/tessera /usr/bin/python3
       bench/python/task_cpu.py [--calls N] [--repeats R]
Output: one line per loop and repeat: `name driver_us workers_us daemons_us total_us wall_us`
(µs per call), and a median line per loop.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Dict, List, Optional, Tuple

import tessera

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
BATCH = 1000


@tessera.remote
def noop(*_):
    return 0


@tessera.remote
class Pinger:
    def ping(self, *_):
        return 0


def cpu_seconds(pid: int) -> Optional[float]:
    """utime + stime of `pid` (all its threads), in seconds; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # fields 14 and 15 of stat


def cluster_processes(state_dir: str) -> Dict[str, List[int]]:
    """The cluster's processes other than this one: workers and daemons."""
    found: Dict[str, List[int]] = {"workers": [], "daemons": []}
    marker = state_dir.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if marker not in environ and marker not in cmdline:
            continue
        worker = b"TESSERA_WORKER_MODE=1" in environ
        found["workers" if worker else "daemons"].append(int(entry))
    return found


def measure(name: str, loop, calls: int, state_dir: str) -> Tuple[float, ...]:
    loop(BATCH)  # warm: workers up and leased, code cached
    processes = cluster_processes(state_dir)
    before = {pid: cpu_seconds(pid) for group in processes.values() for pid in group}
    driver_before = cpu_seconds(os.getpid())
    start = time.perf_counter()
    done = 0
    while done < calls:
        loop(BATCH)
        done += BATCH
    wall = time.perf_counter() - start
    driver = cpu_seconds(os.getpid()) - driver_before
    # A process that exited during the loop (an idle worker let go) counts for nothing: its
    # last CPU time is not readable any more. The warm-up leaves no such worker behind.
    per_group = {group: sum((cpu_seconds(pid) or before[pid]) - before[pid] for pid in pids
                            if before[pid] is not None)
                 for group, pids in processes.items()}
    figures = tuple(1e6 * x / done for x in (driver, per_group["workers"], per_group["daemons"],
                                              driver + per_group["workers"], wall))
    print(f"{name} " + " ".join(f"{x:.1f}" for x in figures), flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    tessera.init(num_cpus=2, object_store_memory=64 * 2**20)
    try:
        from tessera._private import worker
        state_dir = worker._state.state_dir
        actor = Pinger.remote()
        loops = {
            "tasks_async": lambda n: tessera.get([noop.remote() for _ in range(n)]),
            "actor_calls_async": lambda n: tessera.get([actor.ping.remote() for _ in range(n)]),
        }
        print("loop driver_us workers_us daemons_us total_us wall_us  (per call)", flush=True)
        for name, loop in loops.items():
            runs = [measure(name, loop, args.calls, state_dir) for _ in range(args.repeats)]
            medians = [statistics.median(run[i] for run in runs) for i in range(5)]
            print(f"{name} median " + " ".join(f"{x:.1f}" for x in medians), flush=True)
    finally:
        tessera.shutdown()


if __name__ == "__main__":
    sys.exit(main())

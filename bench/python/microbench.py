#!/usr/bin/python3
"""Ray's core microbenchmark loops (ray/_private/ray_perf.py) from Python against
a local Tessera cluster; bench/python/dask_microbench.py runs the same loops on Dask distributed
and bench/python/compare.py puts both beside Ray's published figures (docs/benchmarks.md,
"Python API (microbenchmarks)").

Clusters (started and stopped here):
  single-node loops  tessera.init(num_cpus=2, object_store_memory=384 MiB; 32 MiB with --quick):
                     a head and one node agent, 2 CPUs (the size of the Dask peer's 2 workers)
  cross_node_get     `tessera up` of two simulated 2-core nodes, 448 MiB stores (32 MiB --quick),
                     after the one-node cluster is stopped; shared memory stays under 1 GiB
Loops (timing and sizes: _harness.py; --quick is 1 % of every size):
  single_client_tasks_sync      submit one no-op task, get it
  single_client_tasks_async     submit 1000 no-op tasks, get all (x1000)
  multi_client_tasks_async      4 driver processes (this script, --client-process) connected to
                                the cluster each submit batches of 1000 and get them, at one
                                signal, for 3 s: all tasks over the slowest client's time
  1_1_actor_calls_sync          one call on one actor, get
  1_1_actor_calls_async         1000 calls on one actor, get all (x1000)
  n_n_actor_calls_async         4 tasks (as in the peer's loop) each make 1000 calls round-robin
                                over 8 target actors (named, 0 CPU) and get them (x4000)
  single_client_put_calls       put(0)
  single_client_get_calls       get of one pre-stored put(0)
  single_client_put_gigabytes   put of a 200 MiB int64 NumPy array (ref dropped), bytes/1e9
  memcpy_gigabytes              np.copyto of the same array into a preallocated one (ceiling)
  cross_node_get_gigabytes      a 200 MiB array made by a task on node A; a task pinned to node B
                                takes it as argument (fetched to B) and returns its size; the
                                time of that task, fresh object each repeat, bytes/1e9

CPU per call (--cpu-per-call N, instead of the loops; docs/benchmarks.md "CPU per call"): on a
one-node local cluster (2 CPUs), N no-op tasks and N calls on one actor in batches of 1000, got,
after a warm-up, while the user and system CPU of the driver (this process), of every worker and
of the daemons (head, node agent) is read from /proc/<pid>/stat before and after; --repeats R
runs of each. A worker that exits during a run (an idle one let go) counts for nothing.

Usage: PYTHONPATH=build/python TESSERA_BIN=build/bin/tessera /usr/bin/python3
       bench/python/microbench.py [--quick] [--json FILE] [--only NAME]... [--check]
       bench/python/microbench.py --cpu-per-call 20000 [--repeats 3]
Output: one line per loop, `name rate unit`; details on stderr. With --cpu-per-call: per run
`name driver_us workers_us daemons_us total_us wall_us` (µs per call; total is driver + workers),
then a median line per loop.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness  # noqa: E402

import tessera  # noqa: E402
from tessera.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

SINGLE_NODE_LOOPS = (
    "single_client_tasks_sync", "single_client_tasks_async", "multi_client_tasks_async",
    "1_1_actor_calls_sync", "1_1_actor_calls_async", "n_n_actor_calls_async",
    "single_client_put_calls", "single_client_get_calls", "single_client_put_gigabytes",
    "memcpy_gigabytes",
)
CROSS_NODE_LOOP = "cross_node_get_gigabytes"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
BATCH = 1000  # tasks or calls per block of --cpu-per-call

TWO_NODES = """# Two simulated 2-core nodes for cross_node_get_gigabytes (written by microbench.py).
node_groups:
  - name: bench
    count: 2
    hardware:
      host: {sockets: 1, cores_per_socket: 2, memory: 8GiB}
"""


@tessera.remote
def noop(*_):
    return 0


@tessera.remote
class Pinger:
    """The peer's no-op actor."""

    def ping(self, *_):
        return 0


@tessera.remote
def call_actors(targets, calls):
    """An n:n client task: calls round-robin over the target actors and gets them all."""
    return len(tessera.get([targets[i % len(targets)].ping.remote() for i in range(calls)]))


@tessera.remote
def make_array(nbytes):
    return np.ones(nbytes // 8, dtype=np.int64)


@tessera.remote
def size_of(array):
    return array.nbytes


def client_process(state_dir: str, seconds: float, batch: int) -> None:
    """One driver of multi_client_tasks_async, its own process (--client-process)."""
    tessera.init(_state_dir=state_dir)
    tessera.get([noop.remote() for _ in range(batch)])
    print("ready", flush=True)
    sys.stdin.readline()
    start = time.perf_counter()
    tasks = 0
    while True:
        tessera.get([noop.remote() for _ in range(batch)])
        tasks += batch
        if time.perf_counter() - start >= seconds:
            break
    print(f"{tasks} {time.perf_counter() - start:.6f}", flush=True)
    tessera.shutdown()


def multi_client(state_dir: str, sizes: _harness.Sizes) -> dict:
    """Tasks/s of `sizes.clients` driver processes submitting at once (per trial: all clients'
    tasks over the slowest one's time)."""
    rates = []
    env = dict(os.environ, TESSERA_STATE_DIR=state_dir)
    for _ in range(sizes.multi_client_trials):
        command = [sys.executable, os.path.abspath(__file__), "--client-process", state_dir,
                   str(sizes.multi_client_seconds), str(sizes.batch)]
        rates.append(_harness.race_clients(command, sizes.clients, "Tessera", env=env))
    return _harness.summarize(rates)


def single_node_loops(rec: _harness.Recorder, sizes: _harness.Sizes, settle: float) -> None:
    store = 32 * _harness.MIB if sizes.quick else 384 * _harness.MIB
    context = tessera.init(num_cpus=2, object_store_memory=store)
    try:
        time.sleep(settle)
        batch = sizes.batch
        rec.time("single_client_tasks_sync", lambda: tessera.get(noop.remote()), 1, "tasks/s",
                 "submit one no-op task, get it")
        rec.time("single_client_tasks_async",
                 lambda: tessera.get([noop.remote() for _ in range(batch)]), batch, "tasks/s",
                 f"submit {batch} no-op tasks, get all")
        if rec.wanted("multi_client_tasks_async"):
            rec.add("multi_client_tasks_async", multi_client(context["state_dir"], sizes),
                    "tasks/s", f"{sizes.clients} driver processes each submit batches of "
                    f"{batch} no-op tasks and get them, at once, for "
                    f"{sizes.multi_client_seconds:g} s")

        actor = Pinger.remote()
        tessera.get(actor.ping.remote())
        rec.time("1_1_actor_calls_sync", lambda: tessera.get(actor.ping.remote()), 1, "calls/s",
                 "one call on one actor, get it")
        rec.time("1_1_actor_calls_async",
                 lambda: tessera.get([actor.ping.remote() for _ in range(batch)]), batch,
                 "calls/s", f"{batch} calls on one actor, get all")
        del actor

        if rec.wanted("n_n_actor_calls_async"):
            tag = os.getpid()
            targets = [Pinger.options(name=f"bench-target-{tag}-{i}").remote()
                       for i in range(sizes.target_actors)]
            callers, calls = sizes.clients, sizes.calls_per_client
            tessera.get([t.ping.remote() for t in targets])  # up before their names are looked up
            tessera.get([call_actors.remote(targets, len(targets)) for _ in range(callers)])
            rec.time("n_n_actor_calls_async",
                     lambda: tessera.get([call_actors.remote(targets, calls)
                                          for _ in range(callers)]),
                     callers * calls, "calls/s",
                     f"{callers} tasks x {calls} calls round-robin over {len(targets)} actors")
            del targets

        rec.time("single_client_put_calls", lambda: tessera.put(0), 1, "puts/s", "put(0)")
        stored = tessera.put(0)
        rec.time("single_client_get_calls", lambda: tessera.get(stored), 1, "gets/s",
                 "get of one pre-stored put(0)")

        nbytes = sizes.large_bytes
        array = np.ones(nbytes // 8, dtype=np.int64)
        rec.time("single_client_put_gigabytes", lambda: tessera.put(array), nbytes / 1e9, "GB/s",
                 f"put of a {nbytes // _harness.MIB} MiB int64 array, ref dropped")
        if rec.wanted("memcpy_gigabytes"):
            copy = np.empty_like(array)
            copy.fill(0)  # touch every page first: the loop measures the copy, not faults
            rec.time("memcpy_gigabytes", lambda: np.copyto(copy, array), nbytes / 1e9, "GB/s",
                     f"np.copyto of the same {nbytes // _harness.MIB} MiB into a "
                     "preallocated array")
            del copy
        del array
    finally:
        tessera.shutdown()


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


def measure_cpu(name: str, loop, calls: int, state_dir: str) -> Tuple[float, ...]:
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


def cpu_per_call(calls: int, repeats: int) -> None:
    tessera.init(num_cpus=2, object_store_memory=64 * _harness.MIB)
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
            runs = [measure_cpu(name, loop, calls, state_dir) for _ in range(repeats)]
            medians = [statistics.median(run[i] for run in runs) for i in range(5)]
            print(f"{name} median " + " ".join(f"{x:.1f}" for x in medians), flush=True)
    finally:
        tessera.shutdown()


def tessera_cli(*args: str, timeout: float) -> None:
    done = subprocess.run([os.environ.get("TESSERA_BIN", "tessera"), *args], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"tessera {' '.join(args)} failed: {done.stderr.strip()[-2000:]}")


def cross_node_loop(rec: _harness.Recorder, sizes: _harness.Sizes, settle: float) -> None:
    state = Path(tempfile.mkdtemp(prefix="tmb-"))
    # Room for two 200 MiB copies: with one (320 MiB) the next repeat's pull into B waits ~20 s
    # while B's copy of the previous object is still being freed (docs/benchmarks.md).
    store = "32MiB" if sizes.quick else "448MiB"
    try:
        (state / "two_nodes.yaml").write_text(TWO_NODES)
        tessera_cli("up", str(state / "two_nodes.yaml"), "--state-dir", str(state),
                    "--object-store-memory", store, timeout=180)
        tessera.init(_state_dir=str(state))
        try:
            time.sleep(settle)
            node_a, node_b = sorted(p.name for p in (state / "nodes").iterdir() if p.is_dir())[:2]
            on_a = NodeAffinitySchedulingStrategy(node_a, soft=False)
            on_b = NodeAffinitySchedulingStrategy(node_b, soft=False)
            nbytes = sizes.large_bytes
            read_on_b = size_of.options(scheduling_strategy=on_b)
            tessera.get(read_on_b.remote(np.zeros(1)))  # a warm worker on B
            noop_on_b = noop.options(scheduling_strategy=on_b)
            start = time.perf_counter()
            tessera.get(noop_on_b.remote())
            pinned_noop_s = time.perf_counter() - start
            rates = []
            for _ in range(sizes.cross_node_repeats):
                made = make_array.options(scheduling_strategy=on_a).remote(nbytes)
                tessera.wait([made], num_returns=1, timeout=120)
                start = time.perf_counter()
                assert tessera.get(read_on_b.remote(made)) == nbytes
                rates.append(nbytes / 1e9 / (time.perf_counter() - start))
                del made
                time.sleep(0.2)  # the object's copies freed before the next one
            figures = _harness.summarize(rates)
            figures["pinned_noop_task_s"] = pinned_noop_s
            rec.add(CROSS_NODE_LOOP, figures, "GB/s",
                    f"a {nbytes // _harness.MIB} MiB array made by a task on node A, taken as "
                    f"argument by a task pinned to node B (a pinned no-op takes "
                    f"{pinned_noop_s * 1e3:.1f} ms)")
        finally:
            tessera.shutdown()
    finally:
        try:
            tessera_cli("down", "--state-dir", str(state), timeout=90)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
            # Kept, so that `tessera down --state-dir` can still stop what it names.
            print(f"microbench: tessera down failed ({e}); {state} is kept", file=sys.stderr)
        else:
            shutil.rmtree(state, ignore_errors=True)


def main() -> None:
    parser = _harness.parser(__doc__.split("\n\n")[0])
    parser.add_argument("--client-process", nargs=3, metavar=("STATE_DIR", "SECONDS", "BATCH"),
                        help=__import__("argparse").SUPPRESS)
    parser.add_argument("--cpu-per-call", type=int, metavar="N",
                        help="instead of the loops: CPU per call over N tasks and N actor calls")
    parser.add_argument("--repeats", type=int, default=3, help="runs of --cpu-per-call")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 unless every selected loop printed a positive rate (the "
                             "smoke test; asserts nothing about speed)")
    args = parser.parse_args()
    if args.client_process:
        client_process(args.client_process[0], float(args.client_process[1]),
                       int(args.client_process[2]))
        return
    if args.cpu_per_call:
        cpu_per_call(args.cpu_per_call, args.repeats)
        return
    known = set(SINGLE_NODE_LOOPS) | {CROSS_NODE_LOOP}
    unknown = sorted(set(args.only or ()) - known)
    if unknown:
        parser.error(f"unknown loop(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    sizes = _harness.Sizes(args.quick)
    settle = args.settle if args.settle is not None else (0.0 if args.quick else 1.0)
    rec = _harness.Recorder(sizes, args.only)
    if any(rec.wanted(name) for name in SINGLE_NODE_LOOPS):
        single_node_loops(rec, sizes, settle)
    if rec.wanted(CROSS_NODE_LOOP):
        cross_node_loop(rec, sizes, settle)
    rec.write_json(args.json, {"system": "tessera", "version": tessera.__version__,
                               "cpus": 2})
    if args.check:
        missing = [name for name in (*SINGLE_NODE_LOOPS, CROSS_NODE_LOOP) if rec.wanted(name)
                   and not rec.results.get(name, {}).get("rate", 0) > 0]
        if missing:
            sys.exit(f"microbench: no positive rate from {', '.join(missing)}")
        print(f"microbench: all {len(rec.results)} loops gave a positive rate")


if __name__ == "__main__":
    main()

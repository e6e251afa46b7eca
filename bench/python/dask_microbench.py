#!/usr/bin/python3
"""The loops of bench/python/microbench.py (Ray's core microbenchmark loops) on Dask distributed, with the same sizes, timing and output (_harness.py), so
that the Python API's figures have a peer measured on the same machine in the same run
(bench/python/compare.py, docs/benchmarks.md "Python API (microbenchmarks)").

Why a separate file from bench/peers/dask_loops.py: that one feeds the C++ API's table
(make_table.py reads its keys and its 800 MiB / 1 GiB sizes); these loops follow the Python
benchmark's sizes (200 MiB), its --only and its one-line output.

Cluster: LocalCluster(n_workers=2, threads_per_worker=1, processes=True), the size of
microbench.py's num_cpus=2. Nearest Dask equivalents, said in each loop's `how`:
  task = client.submit(noop, pure=False) + result()/gather; actor = client.submit(cls,
  actor=True), method call + result(); put = client.scatter(hash=False); get = result() of a
  scattered value; n:n callers are tasks (as in the peer's loop) calling the target actors;
  cross-node get = an array scattered to worker A, read by a task pinned to worker B.

Usage: /usr/bin/python3 bench/python/dask_microbench.py [--quick] [--json FILE] [--only NAME]...
Needs Debian's python3-distributed.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness  # noqa: E402

try:
    import distributed
    from distributed import Client, LocalCluster
except ImportError:  # pragma: no cover - a plain message instead of a trace
    sys.exit("dask_microbench: Dask distributed is not installed (apt-get install "
             "python3-distributed); run it with /usr/bin/python3")

LOOPS = (
    "single_client_tasks_sync", "single_client_tasks_async", "multi_client_tasks_async",
    "1_1_actor_calls_sync", "1_1_actor_calls_async", "n_n_actor_calls_async",
    "single_client_put_calls", "single_client_get_calls", "single_client_put_gigabytes",
    "memcpy_gigabytes", "cross_node_get_gigabytes",
)


def noop(*_):
    return 0


def size_of(array):
    return array.nbytes


class Pinger:
    """The peer's no-op actor."""

    def ping(self, *_):
        return 0


def call_actors(targets, calls):
    """An n:n client task: calls round-robin over the target actors and waits for them all.
    (A task, as in the peer's loop; a Dask actor calling actors of its own worker deadlocks, as
    a worker runs its actors' methods on one thread.)"""
    futures = [targets[i % len(targets)].ping() for i in range(calls)]
    return len([f.result() for f in futures])


def client_process(address: str, seconds: float, batch: int) -> None:
    """One client of multi_client_tasks_async, its own process (--client-process)."""
    client = Client(address)
    client.gather([client.submit(noop, i, pure=False) for i in range(batch)])
    print("ready", flush=True)
    sys.stdin.readline()
    start = time.perf_counter()
    tasks = 0
    while True:
        client.gather([client.submit(noop, i, pure=False) for i in range(batch)])
        tasks += batch
        if time.perf_counter() - start >= seconds:
            break
    print(f"{tasks} {time.perf_counter() - start:.6f}", flush=True)
    client.close()


def multi_client(address: str, sizes: _harness.Sizes) -> dict:
    rates = []
    for _ in range(sizes.multi_client_trials):
        command = [sys.executable, os.path.abspath(__file__), "--client-process", address,
                   str(sizes.multi_client_seconds), str(sizes.batch)]
        rates.append(_harness.race_clients(command, sizes.clients, "Dask"))
    return _harness.summarize(rates)


def cross_worker_get(client: Client, sizes: _harness.Sizes) -> dict:
    workers = sorted(client.scheduler_info()["workers"])
    nbytes = sizes.large_bytes
    client.submit(size_of, np.zeros(1), workers=[workers[1]], pure=False).result()
    rates = []
    for _ in range(sizes.cross_node_repeats):
        made = client.scatter(np.ones(nbytes // 8, dtype=np.int64), workers=[workers[0]],
                              hash=False)
        start = time.perf_counter()
        assert client.submit(size_of, made, workers=[workers[1]], allow_other_workers=False,
                             pure=False).result() == nbytes
        rates.append(nbytes / 1e9 / (time.perf_counter() - start))
        del made
    return _harness.summarize(rates)


def main() -> None:
    parser = _harness.parser(__doc__.split("\n\n")[0])
    parser.add_argument("--client-process", nargs=3, metavar=("ADDRESS", "SECONDS", "BATCH"),
                        help=__import__("argparse").SUPPRESS)
    args = parser.parse_args()
    if args.client_process:
        client_process(args.client_process[0], float(args.client_process[1]),
                       int(args.client_process[2]))
        return
    unknown = sorted(set(args.only or ()) - set(LOOPS))
    if unknown:
        parser.error(f"unknown loop(s) {', '.join(unknown)}; known: {', '.join(LOOPS)}")
    sizes = _harness.Sizes(args.quick)
    rec = _harness.Recorder(sizes, args.only)
    batch = sizes.batch

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=None)
    client = Client(cluster)
    try:
        time.sleep(args.settle if args.settle is not None else (0.0 if args.quick else 1.0))
        rec.time("single_client_tasks_sync", lambda: client.submit(noop, pure=False).result(), 1,
                 "tasks/s", "client.submit one no-op task, result()")
        rec.time("single_client_tasks_async",
                 lambda: client.gather([client.submit(noop, i, pure=False)
                                        for i in range(batch)]),
                 batch, "tasks/s", f"client.submit {batch} no-op tasks, gather all")
        if rec.wanted("multi_client_tasks_async"):
            rec.add("multi_client_tasks_async", multi_client(cluster.scheduler_address, sizes),
                    "tasks/s", f"{sizes.clients} client processes each submit batches of "
                    f"{batch} no-op tasks and gather them, at once, for "
                    f"{sizes.multi_client_seconds:g} s")

        actor = client.submit(Pinger, actor=True, pure=False).result()
        rec.time("1_1_actor_calls_sync", lambda: actor.ping().result(), 1, "calls/s",
                 "one call on one Dask actor, result()")

        def actor_async():
            for future in [actor.ping() for _ in range(batch)]:
                future.result()
        rec.time("1_1_actor_calls_async", actor_async, batch, "calls/s",
                 f"{batch} calls on one Dask actor, then result() of each")

        if rec.wanted("n_n_actor_calls_async"):
            targets = [client.submit(Pinger, actor=True, pure=False).result()
                       for _ in range(sizes.target_actors)]
            callers, calls = sizes.clients, sizes.calls_per_client

            def n_n():
                client.gather([client.submit(call_actors, targets, calls, pure=False)
                               for _ in range(callers)])
            rec.time("n_n_actor_calls_async", n_n, callers * calls, "calls/s",
                     f"{callers} tasks x {calls} calls round-robin over {len(targets)} actors")
            del targets

        rec.time("single_client_put_calls", lambda: client.scatter(0, hash=False), 1, "puts/s",
                 "client.scatter(0, hash=False)")
        stored = client.scatter(0, hash=False)
        rec.time("single_client_get_calls", lambda: stored.result(), 1, "gets/s",
                 "result() of a scattered small value")

        nbytes = sizes.large_bytes
        array = np.ones(nbytes // 8, dtype=np.int64)

        def put_large():
            client.scatter(array, hash=False).release()
        rec.time("single_client_put_gigabytes", put_large, nbytes / 1e9, "GB/s",
                 f"client.scatter of a {nbytes // _harness.MIB} MiB int64 array, released")
        if rec.wanted("memcpy_gigabytes"):
            copy = np.empty_like(array)
            copy.fill(0)
            rec.time("memcpy_gigabytes", lambda: np.copyto(copy, array), nbytes / 1e9, "GB/s",
                     f"np.copyto of the same {nbytes // _harness.MIB} MiB into a "
                     "preallocated array")
            del copy
        del array
        if rec.wanted("cross_node_get_gigabytes"):
            rec.add("cross_node_get_gigabytes", cross_worker_get(client, sizes), "GB/s",
                    f"a {nbytes // _harness.MIB} MiB array scattered to worker A, taken as "
                    "argument by a task pinned to worker B")
    finally:
        client.close()
        cluster.close()
    rec.write_json(args.json, {"system": "dask", "version": distributed.__version__,
                               "workers": 2})


if __name__ == "__main__":
    main()

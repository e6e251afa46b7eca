#!/usr/bin/python3
"""The loops of the peers' published microbenchmarks (Ray's core microbenchmark loops)
run on Dask distributed, so that Tessera's figures have a peer measured on the same machine in the
same run (docs/benchmarks.md).

Dask runs as a LocalCluster of N worker processes with one thread each (default 2, one per core of
the 2-core CI machines). Each loop is timed as the peer's harness does: a warm-up of `warmup_s`
counting calls c, then `trials` trials that run blocks of c // 10 + 1 calls until `trial_s` has
passed; the rate is multiplier x calls / elapsed, reported as mean and standard deviation.

Where Dask has no direct equivalent the nearest is used and said in `how`:
  put = Client.scatter(hash=False), get = Future.result() of a scattered value, actors =
  Client.submit(cls, actor=True), clients inside the cluster = worker_client() in tasks.
multi_client_tasks_async is N separate client processes (default 4, --clients) connected to the
same scheduler, which at one signal submit batches of 1000 no-op tasks and gather each batch for
a fixed time: all clients' tasks over the slowest client's time (connecting is not timed), the
loop bench/task_bench.cc runs with N driver processes.

Usage: /usr/bin/python3 bench/peers/dask_loops.py [--quick] [--workers N] [--clients N] [--json FILE]
Needs Debian's python3-distributed (scripts/setup installs it). Prints one table; with --json
also writes {metric: {"rate": r, "stddev": s, "unit": u, "how": text}}.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

try:
    import distributed
    from distributed import Client, LocalCluster, worker_client
except ImportError:  # pragma: no cover - a plain message instead of a trace
    sys.exit("dask_loops: Dask distributed is not installed (apt-get install python3-distributed, "
             "or scripts/setup); run it with /usr/bin/python3")


def noop(*_):
    return 0


class Pinger:
    """The peer's no-op actor."""

    def ping(self, *_):
        return 0


def timeit(fn, multiplier, warmup_s, trials, trial_s):
    start = time.perf_counter()
    calls = 0
    while time.perf_counter() - start < warmup_s:
        fn()
        calls += 1
    step = calls // 10 + 1
    rates = []
    for _ in range(trials):
        start = time.perf_counter()
        done = 0
        while time.perf_counter() - start < trial_s:
            for _ in range(step):
                fn()
            done += step
        rates.append(multiplier * done / (time.perf_counter() - start))
    return statistics.mean(rates), (statistics.stdev(rates) if len(rates) > 1 else 0.0)


def submit_and_gather(n):
    """Runs inside a task: a client within the cluster submits n no-op tasks and waits."""
    with worker_client() as client:
        futures = [client.submit(noop, i, pure=False) for i in range(n)]
        client.gather(futures)
    return n


def client_process(address, seconds):
    """One client of multi_client_tasks_async, run as its own process (--client-process)."""
    client = Client(address)
    client.submit(noop, 0, pure=False).result()
    print("ready", flush=True)
    sys.stdin.readline()
    start = time.perf_counter()
    tasks = 0
    while True:
        client.gather([client.submit(noop, i, pure=False) for i in range(1000)])
        tasks += 1000
        if time.perf_counter() - start >= seconds:
            break
    print(f"{tasks} {time.perf_counter() - start:.6f}", flush=True)
    client.close()


def multi_client_processes(address, clients, seconds, trials):
    """Tasks/s of `clients` client processes submitting at once (mean and stddev over trials)."""
    rates = []
    for _ in range(trials):
        children = [subprocess.Popen([sys.executable, os.path.abspath(__file__),
                                      "--client-process", address, str(seconds)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                    for _ in range(clients)]
        for child in children:
            if child.stdout.readline().strip() != "ready":
                raise RuntimeError("a Dask client process failed to connect")
        for child in children:
            child.stdin.write("go\n")
            child.stdin.flush()
        tasks, slowest = 0, 0.0
        for child in children:
            n, taken = child.stdout.readline().split()
            tasks += int(n)
            slowest = max(slowest, float(taken))
            child.wait()
        rates.append(tasks / slowest)
    return statistics.mean(rates), (statistics.stdev(rates) if len(rates) > 1 else 0.0)


def cross_worker_get(client, nbytes, repeats):
    """GB/s of moving one object of nbytes from worker A to worker B (a fresh copy each time)."""
    workers = sorted(client.scheduler_info()["workers"])
    if len(workers) < 2:
        return None
    seconds = []
    for _ in range(repeats):
        data = client.scatter(bytes(nbytes), workers=[workers[0]], hash=False)
        start = time.perf_counter()
        client.submit(len, data, workers=[workers[1]], allow_other_workers=False,
                      pure=False).result()
        seconds.append(time.perf_counter() - start)
        del data
    rates = [nbytes / 1e9 / s for s in seconds]
    return statistics.mean(rates), (statistics.stdev(rates) if len(rates) > 1 else 0.0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="1 warm-up s, 2 trials of 1 s")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds before measuring")
    parser.add_argument("--clients", type=int, default=4,
                        help="client processes of multi_client_tasks_async")
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--client-process", nargs=2, metavar=("ADDRESS", "SECONDS"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client_process:
        client_process(args.client_process[0], float(args.client_process[1]))
        return
    warmup_s, trials, trial_s = (1.0, 2, 1.0) if args.quick else (1.0, 4, 2.0)

    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                           dashboard_address=None)
    client = Client(cluster)
    time.sleep(args.settle)
    results = {}

    def record(metric, fn, multiplier, unit, how):
        rate, stddev = timeit(fn, multiplier, warmup_s, trials, trial_s)
        results[metric] = {"rate": rate, "stddev": stddev, "unit": unit, "how": how}
        print(f"{metric:40s} {rate:12.2f} ± {stddev:8.2f} {unit}   ({how})", flush=True)

    record("single_client_tasks_sync", lambda: client.submit(noop, pure=False).result(), 1,
           "tasks/s", "submit one no-op task, wait for its result")

    def tasks_async():
        client.gather([client.submit(noop, i, pure=False) for i in range(1000)])
    record("single_client_tasks_async", tasks_async, 1000, "tasks/s",
           "submit 1000 no-op tasks, gather all")

    clients_inside = 4
    def multi_client_tasks():
        futures = [client.submit(submit_and_gather, 1000, pure=False)
                   for _ in range(clients_inside)]
        client.gather(futures)
    record("multi_client_tasks_in_tasks", multi_client_tasks, clients_inside * 1000, "tasks/s",
           f"{clients_inside} tasks each submit 1000 no-op tasks with worker_client and gather")

    rate, stddev = multi_client_processes(cluster.scheduler_address, args.clients,
                                          1.0 if args.quick else 3.0, trials // 2 or 1)
    how = (f"{args.clients} client processes each submit batches of 1000 no-op tasks and "
           f"gather, for a fixed time")
    results["multi_client_tasks_async"] = {"rate": rate, "stddev": stddev, "unit": "tasks/s",
                                           "how": how}
    print(f"{'multi_client_tasks_async':40s} {rate:12.2f} ± {stddev:8.2f} tasks/s   ({how})",
          flush=True)

    actor = client.submit(Pinger, actor=True).result()
    record("1_1_actor_calls_sync", lambda: actor.ping().result(), 1, "calls/s",
           "one call on one actor, wait for it")

    def actor_async():
        for future in [actor.ping() for _ in range(1000)]:
            future.result()
    record("1_1_actor_calls_async", actor_async, 1000, "calls/s",
           "1000 calls on one actor, then wait for all")

    actors = [client.submit(Pinger, actor=True, pure=False).result() for _ in range(8)]
    callers, calls_each = 4, 250
    def n_n_actor_calls():
        def caller(offset):
            futures = [actors[(offset + i) % len(actors)].ping() for i in range(calls_each)]
            for future in futures:
                future.result()
        threads = [threading.Thread(target=caller, args=(k,)) for k in range(callers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    record("n_n_actor_calls_async", n_n_actor_calls, callers * calls_each, "calls/s",
           f"{callers} driver threads x {calls_each} calls round-robin over {len(actors)} actors")

    record("single_client_put_calls", lambda: client.scatter(0, hash=False), 1, "puts/s",
           "scatter one small value")
    stored = client.scatter(0, hash=False)
    record("single_client_get_calls", lambda: stored.result(), 1, "gets/s",
           "result() of a scattered small value")

    big = bytes(800 * 2**20)
    def put_large():
        future = client.scatter(big, hash=False)
        future.release()
    record("single_client_put_gigabytes", put_large, 0.8, "GB/s",
           "scatter one 800 MiB bytes object (the peer's unit: 0.8 per 800 MiB)")
    del big

    moved = cross_worker_get(client, 2**30, 2 if args.quick else 4)
    if moved is not None:
        results["cross_node_get_gigabytes"] = {"rate": moved[0], "stddev": moved[1],
                                               "unit": "GB/s",
                                               "how": "1 GiB scattered to worker A, read by a "
                                                      "task pinned to worker B"}
        print(f"{'cross_node_get_gigabytes':40s} {moved[0]:12.2f} ± {moved[1]:8.2f} GB/s",
              flush=True)

    client.close()
    cluster.close()
    meta = {"dask": distributed.__version__, "workers": args.workers,
            "trials": trials, "trial_s": trial_s}
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"meta": meta, "results": results}, out, indent=2)


if __name__ == "__main__":
    main()

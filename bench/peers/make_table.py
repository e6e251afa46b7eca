#!/usr/bin/python3
"""Prints the markdown table of Tessera against Dask and the machine's ceilings from the JSON
files bench/peers/compare_with_dask.sh leaves in one folder (Google Benchmark JSON for Tessera
and the ceilings, dask_loops.py's JSON for Dask)."""

import json
import os
import platform
import sys


def load_gbench(folder, name):
    path = os.path.join(folder, name + ".json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        data = json.load(f)
    runs = {}
    for b in data.get("benchmarks", []):
        if b.get("run_type") == "aggregate" or b.get("error_occurred"):
            continue
        runs[b["name"]] = b
    return runs


def find(runs, prefix):
    for name, run in runs.items():
        if name.startswith(prefix):
            return run
    return None


def rate(run, key):
    if run is None:
        return None
    if key == "time_us":
        unit = {"ns": 1e-3, "us": 1, "ms": 1e3, "s": 1e6}[run.get("time_unit", "ns")]
        return run["real_time"] * unit
    value = run.get(key)
    if value is None and key == "items_per_second" and run.get("real_time"):
        return 1e6 / rate(run, "time_us")  # one item per iteration
    return None if value is None else float(value)


def fmt(value, unit):
    if value is None:
        return "—"
    if unit == "GB/s":
        return f"{value:.2f} GB/s"
    if unit == "µs":
        return f"{value:.0f} µs"
    return f"{value:,.0f}/s"


def main():
    folder = sys.argv[1]
    tasks = load_gbench(folder, "tasks")
    store = load_gbench(folder, "store")
    transfer = load_gbench(folder, "transfer")
    ceilings = load_gbench(folder, "ceilings")
    dask = {}
    dask_path = os.path.join(folder, "dask.json")
    if os.path.exists(dask_path):
        with open(dask_path) as f:
            dask = json.load(f)["results"]

    def d(metric):
        return dask.get(metric, {}).get("rate")

    gb = 1e9
    rows = [
        ("single_client_tasks_sync", "one no-op task, wait (round trip)",
         rate(find(tasks, "BM_TaskSync"), "items_per_second"), d("single_client_tasks_sync"), "/s"),
        ("single_client_tasks_async", "1000 no-op tasks, then wait for all",
         rate(find(tasks, "BM_TaskAsync/1000"), "items_per_second"),
         d("single_client_tasks_async"), "/s"),
        ("multi_client_tasks_async", "4 driver processes each submit batches of 1000 no-op "
         "tasks and wait, at once",
         rate(find(tasks, "BM_MultiClientTasksAsync"), "items_per_second"),
         d("multi_client_tasks_async"), "/s"),
        ("1_1_actor_calls_sync", "one call on one actor, wait",
         rate(find(tasks, "BM_ActorCallSync"), "items_per_second"), d("1_1_actor_calls_sync"), "/s"),
        ("1_1_actor_calls_async", "1000 calls on one actor, wait for all",
         rate(find(tasks, "BM_ActorCallAsync"), "items_per_second"),
         d("1_1_actor_calls_async"), "/s"),
        ("n_n_actor_calls_async", "4 callers round-robin over several actors",
         rate(find(tasks, "BM_ActorCallsNToN"), "items_per_second"),
         d("n_n_actor_calls_async"), "/s"),
        ("small put + get", "Tessera: create, seal, get, release, delete in the node store; "
         "Dask: scatter, then result()",
         rate(find(store, "BM_SmallPutGet"), "items_per_second"),
         (lambda p, g: None if p is None or g is None else 1 / (1 / p + 1 / g))(
             d("single_client_put_calls"), d("single_client_get_calls")), "/s"),
        ("single_client_put_gigabytes", "one 800 MiB object into the node store (GB/s)",
         (lambda r: None if r is None else r / gb)(
             rate(find(store, "BM_LargePut800MiB/0"), "bytes_per_second")),
         d("single_client_put_gigabytes"), "GB/s"),
        ("cross_node_get_gigabytes", "1 GiB from one node's store to another's (GB/s)",
         (lambda r: None if r is None else r / gb)(
             rate(find(transfer, "BM_PullObject"), "bytes_per_second")),
         d("cross_node_get_gigabytes"), "GB/s"),
    ]
    print(f"Machine: {platform.node()}, {os.cpu_count()} cores. Dask: "
          f"{json.load(open(dask_path))['meta'] if dask else 'not run'}.")
    print()
    print("| loop | what one call is | Tessera | Dask | Tessera / Dask |")
    print("|:--|:--|--:|--:|--:|")
    for metric, what, ours, theirs, unit in rows:
        ratio = "—" if ours is None or not theirs else f"{ours / theirs:.1f}×"
        shown_unit = "GB/s" if unit == "GB/s" else "/s"
        print(f"| {metric} | {what} | {fmt(ours, shown_unit)} | {fmt(theirs, shown_unit)} | {ratio} |")
    print()
    memcpy = rate(find(ceilings, "BM_Memcpy"), "bytes_per_second")
    rtt = rate(find(ceilings, "BM_LoopbackTcpRoundTrip"), "time_us")
    tcp = rate(find(ceilings, "BM_LoopbackTcpThroughput/"), "bytes_per_second")
    tcp_buffers = rate(find(ceilings, "BM_LoopbackTcpThroughputBufferToBuffer"), "bytes_per_second")
    sync = rate(find(tasks, "BM_TaskSync"), "time_us")
    actor = rate(find(tasks, "BM_ActorCallSync"), "time_us")
    put = rate(find(store, "BM_LargePut800MiB/0"), "bytes_per_second")
    pull = rate(find(transfer, "BM_PullObject"), "bytes_per_second")
    print("| ceiling (same run) | figure | Tessera against it |")
    print("|:--|--:|:--|")
    print(f"| memcpy, 800 MiB, one thread | {fmt(memcpy and memcpy / gb, 'GB/s')} | large put "
          f"{'—' if not (put and memcpy) else f'{put / memcpy:.0%}'} of it (target ≥ 50 %) |")
    print(f"| loopback TCP round trip, 100 B | {fmt(rtt, 'µs')} | task round trip "
          f"{fmt(sync, 'µs')} (target < 200 µs), actor call {fmt(actor, 'µs')} (target < 100 µs) |")
    print(f"| loopback TCP throughput, 1 GiB | {fmt(tcp and tcp / gb, 'GB/s')} | cross-node get "
          f"{'—' if not (pull and tcp) else f'{pull / tcp:.0%}'} of it (target ≥ 50 %) |")
    print(f"| loopback TCP, 1 GiB buffer to 1 GiB buffer | {fmt(tcp_buffers and tcp_buffers / gb, 'GB/s')} "
          f"| cross-node get {'—' if not (pull and tcp_buffers) else f'{pull / tcp_buffers:.0%}'} "
          f"of it |")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""What one synchronous round trip costs on a local one-node cluster (2 CPUs): N sync no-op tasks
and N sync calls on one actor (submit one, get it), each reported as calls/s, the thread
switches per call of every thread of the driver and of the workers (voluntary + nonvoluntary,
from /proc/<pid>/task/*/status, by thread name) and their user and system CPU per call (from
/proc/<pid>/stat). docs/benchmarks.md, "Sync round trips", reads it.

    PYTHONPATH=build/python TESSERA_BIN=build/bin/tessera \\
      /usr/bin/python3 bench/python/round_trip_costs.py --calls 3000
"""
import argparse
import collections
import glob
import os
import time

import tessera


@tessera.remote
def noop():
    return 0


@tessera.remote
class Pinger:
    def ping(self):
        return 0


def processes():
    """This driver and every Python worker on the machine: {pid: name}."""
    found = {os.getpid(): "driver"}
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(path, "rb") as f:
                command = f.read()
        except OSError:
            continue
        if b"tessera._private.worker_main" in command:
            pid = int(path.split("/")[2])
            found[pid] = f"worker {pid}"
    return found


def switches(pids):
    """{(process name, thread name): context switches so far}."""
    counts = collections.Counter()
    for pid, name in pids.items():
        for task in glob.glob(f"/proc/{pid}/task/*"):
            try:
                with open(f"{task}/comm") as f:
                    thread = f.read().strip()
                with open(f"{task}/status") as f:
                    total = sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
            except OSError:
                continue
            counts[(name, thread)] += total
    return counts


def cpu(pids):
    """{pid: (user s, system s)}."""
    ticks = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[pid] = (int(fields[11]) / ticks, int(fields[12]) / ticks)
    return out


def measure(name, call, calls):
    pids = processes()
    switches_before, cpu_before = switches(pids), cpu(pids)
    start = time.perf_counter()
    for _ in range(calls):
        call()
    elapsed = time.perf_counter() - start
    switches_after, cpu_after = switches(pids), cpu(pids)
    print(f"{name}: {calls / elapsed:,.0f}/s, {elapsed / calls * 1e6:.0f} µs per round trip")
    total = 0.0
    for key in sorted(switches_after):
        per_call = (switches_after[key] - switches_before.get(key, 0)) / calls
        total += per_call
        if per_call >= 0.01:
            print(f"  switches per call  {key[0]:>14} {key[1]:<16} {per_call:.2f}")
    print(f"  switches per call  {'all':>14} {'':<16} {total:.2f}")
    for who, keep in (("driver", lambda pid: pid == os.getpid()),
                      ("workers", lambda pid: pid != os.getpid())):
        user = sum(cpu_after[p][0] - cpu_before[p][0] for p in cpu_after
                   if keep(p) and p in cpu_before)
        system = sum(cpu_after[p][1] - cpu_before[p][1] for p in cpu_after
                     if keep(p) and p in cpu_before)
        print(f"  cpu per call       {who:>14} user {user / calls * 1e6:.0f} µs, "
              f"system {system / calls * 1e6:.0f} µs")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=3000, help="round trips per loop")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each loop")
    args = parser.parse_args()
    tessera.init(num_cpus=2, object_store_memory=64 * 1024 * 1024)
    try:
        actor = Pinger.remote()
        for _ in range(300):  # the workers are up and warm
            tessera.get(noop.remote())
            tessera.get(actor.ping.remote())
        for _ in range(args.repeats):
            measure("sync tasks", lambda: tessera.get(noop.remote()), args.calls)
            measure("sync actor calls", lambda: tessera.get(actor.ping.remote()), args.calls)
    finally:
        tessera.shutdown()


if __name__ == "__main__":
    main()

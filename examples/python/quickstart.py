"""Tessera from Python, as a Ray user would write it: tasks, an object in the shared-memory
store, an actor, and a whole TPU slice with one actor per host.

    scripts/run-example python quickstart      (brings up examples/clusters/demo.yaml)

or, on a cluster already up (`tessera up examples/clusters/demo.yaml`), `python3 quickstart.py`.
"""
import numpy as np

import tessera
from tessera.util.scheduling_strategies import PlacementGroupSchedulingStrategy
from tessera.util.tpu import slice_placement_group


@tessera.remote
def square(x):
    return x * x


@tessera.remote
def total(array):
    return float(array.sum())


@tessera.remote
class Counter:
    def __init__(self):
        self.count = 0

    def add(self, amount):
        self.count += amount
        return self.count


@tessera.remote(resources={"TPU": 4})
class SliceHost:
    def describe(self):
        import os
        context = tessera.get_runtime_context()
        return (context.get_node_id(), os.environ.get("TPU_WORKER_ID"),
                context.get_accelerator_ids()["TPU"])


def main():
    tessera.init(address="auto")
    print("squares:", tessera.get([square.remote(i) for i in range(8)]))

    array = np.ones(1 << 20)                 # 8 MiB: stored once, read zero-copy on its node
    print("total of a stored array:", tessera.get(total.remote(tessera.put(array))))

    counter = Counter.remote()
    print("counter:", tessera.get([counter.add.remote(1) for _ in range(5)])[-1])

    reserved = slice_placement_group("4x4", "v6e")   # every host of the slice, or nothing
    hosts = [SliceHost.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
        reserved.placement_group, placement_group_bundle_index=i)).remote()
        for i in range(reserved.num_hosts)]
    for node, worker, chips in tessera.get([h.describe.remote() for h in hosts]):
        print(f"slice host {node}: TPU_WORKER_ID={worker} chips={chips}")
    reserved.shutdown()
    print("cluster CPUs:", tessera.cluster_resources().get("CPU"))
    tessera.shutdown()


if __name__ == "__main__":
    main()

"""The object store cannot leak or lie (docs/objects.md, "Owners, spilling, full stores"): a
driver that dies or exits holding refs leaves nothing in its node's store; a full store spills
primary copies to disk and reads them back, or refuses a put with ObjectStoreFullError naming
the sizes (never the driver's heap instead); a task whose result does not fit fails once with
that error. One node with a 24 MiB store, so "full" is cheap."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import tessera
from tessera import _core, exceptions

from conftest import HERE, wait_for

MiB = 1 << 20


@pytest.fixture(scope="module")
def small_store(make_cluster):
    made = make_cluster(HERE / "one_node.yaml", "--object-store-memory", "24MiB")
    tessera.init(_state_dir=str(made.state))
    yield made
    tessera.shutdown()


def stats():
    return _core.object_store_stats()


def spill_files(cluster):
    (node,) = cluster.node_ids()
    folder = cluster.state / "nodes" / node / "spill"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


DRIVER = """
import os, sys, time
import numpy as np
import tessera

tessera.init()

@tessera.remote
def make(n):
    return np.ones(n, dtype=np.uint8)

held = [tessera.put(np.full(3 << 20, i, dtype=np.uint8)) for i in range(2)]
result = make.remote(3 << 20)  # stored by its worker, owned by this driver
tessera.wait([result], timeout=60)
print("ready", flush=True)
ENDING
"""


def start_driver(cluster, ending):
    env = dict(cluster.env)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(tessera.__file__).resolve().parent.parent)]
        + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    return subprocess.Popen([sys.executable, "-c", DRIVER.replace("ENDING", ending)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("ending", ["time.sleep(600)", "os._exit(3)", "sys.exit(0)"],
                         ids=["killed", "crashed", "clean"])
def test_a_driver_that_goes_leaves_nothing_in_the_store(small_store, ending):
    before = stats()
    driver = start_driver(small_store, ending)
    try:
        line = driver.stdout.readline()
        assert line.strip() == "ready", driver.stderr.read() if driver.poll() is not None else line
        if ending.startswith("time.sleep"):
            # Its two puts and its task's result (written by a worker) are there while it lives.
            assert stats()["num_objects"] >= before["num_objects"] + 3
            driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=60)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    wait_for(lambda: stats()["num_objects"] == before["num_objects"]
             and stats()["allocated_bytes"] == before["allocated_bytes"],
             timeout=15, what=f"the store to free what the driver owned (now {stats()})")
    assert spill_files(small_store) == []


def test_a_put_larger_than_the_store_is_refused_with_the_sizes(small_store):
    with pytest.raises(exceptions.ObjectStoreFullError,
                       match=r"32\.0 MiB can never fit: the object store holds 24\.0 MiB"):
        tessera.put(np.zeros(32 * MiB, dtype=np.uint8))


def test_a_full_store_spills_primaries_to_disk_and_reads_them_back(small_store):
    before = stats()
    refs = [tessera.put(np.full(7 * MiB, i, dtype=np.uint8)) for i in range(5)]  # 35 MiB > 24
    after = stats()
    assert after["spills"] > before["spills"]
    assert after["num_spilled"] >= 2
    assert len(spill_files(small_store)) == after["num_spilled"]
    for i, ref in enumerate(refs):
        value = tessera.get(ref)
        assert value.shape == (7 * MiB,) and int(value[0]) == i and int(value[-1]) == i
        del value
    assert stats()["restores"] > before["restores"]
    del refs, ref
    wait_for(lambda: stats()["num_objects"] == before["num_objects"], timeout=10,
             what="the dropped refs' objects to go")
    assert spill_files(small_store) == []


def test_a_full_store_of_pinned_values_refuses_a_put_with_the_sizes(small_store):
    refs = [tessera.put(np.full(9 * MiB, i, dtype=np.uint8)) for i in range(2)]
    views = [tessera.get(ref) for ref in refs]  # zero-copy views pin both in the store
    with pytest.raises(exceptions.ObjectStoreFullError) as caught:
        tessera.put(np.zeros(9 * MiB, dtype=np.uint8))
    message = str(caught.value)
    assert "needs 9.0 MiB; capacity 24.0 MiB" in message
    assert "used" in message and "nothing more can be spilled" in message
    del views, refs


def test_a_task_whose_result_does_not_fit_fails_once_with_the_sizes(small_store, tmp_path):
    runs = tmp_path / "runs"

    @tessera.remote(max_retries=3)
    def huge(path):
        with open(path, "a") as f:
            f.write("run\n")
        return np.zeros(32 * MiB, dtype=np.uint8)

    start = time.monotonic()
    with pytest.raises(exceptions.ObjectStoreFullError,
                       match=r"result was not stored: .*32\.0 MiB can never fit"):
        tessera.get(huge.remote(str(runs)), timeout=60)
    assert time.monotonic() - start < 30
    assert runs.read_text().count("run") == 1  # not retried as a system failure

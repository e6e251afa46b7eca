"""Objects whose owner is another process, read as Ray programs read them, and gets that fail at
the first failure (Ray's semantics, docs/python.md "Objects and owners"), on a two-node simulated
cluster: a ref a task made (a put, a subtask) returned to the driver and read there, small and
large, from either node; an actor's objects read by the driver and by other tasks; a failure
behind such a ref raised with its own type; an owner that is gone raising OwnerDiedError; and
`get` on a list raising the first failure while other refs are still pending."""
import os
import time

import numpy as np
import pytest

import tessera
from conftest import pid_alive, wait_for
from tessera import exceptions


@tessera.remote
def put_and_return(value):
    return tessera.put(value)


@tessera.remote
def square(x):
    return x * x


@tessera.remote
def submit_and_return(x):
    return square.remote(x)


@tessera.remote
def refs_in_a_dict(n):
    return {"refs": [tessera.put(i) for i in range(n)], "note": "made here"}


@tessera.remote
def fail(text):
    raise ValueError(text)


@tessera.remote
def submit_failing_and_return(text):
    return fail.remote(text)


@tessera.remote
def sleep_then(value, seconds):
    time.sleep(seconds)
    return value


@tessera.remote
def read_ref(box):
    return tessera.get(box[0])


@tessera.remote
class Keeper:
    def __init__(self):
        self.kept = []

    def put(self, value):
        ref = tessera.put(value)
        self.kept.append(ref)
        return [ref]

    def put_unkept(self, value):
        return [tessera.put(value)]

    def pid(self):
        return os.getpid()


def test_the_driver_reads_a_put_a_task_made_and_returned(cluster):
    inner = tessera.get(put_and_return.remote({"a": 1}))
    assert isinstance(inner, tessera.ObjectRef)
    assert inner.owner_address() != tessera._core.owner_address()
    assert tessera.get(inner) == {"a": 1}


def test_the_driver_reads_the_result_of_a_subtask_a_task_returned(cluster):
    inner = tessera.get(submit_and_return.remote(12))
    assert tessera.get(inner) == 144
    assert tessera.get([inner, inner]) == [144, 144]


def test_refs_inside_a_returned_value_are_read_from_their_owner(cluster):
    value = tessera.get(refs_in_a_dict.remote(5))
    assert value["note"] == "made here"
    assert tessera.get(value["refs"]) == [0, 1, 2, 3, 4]


def test_a_large_value_a_task_put_on_either_node_is_read_here(cluster):
    array = np.arange(400_000, dtype=np.int64)  # 3.2 MB: through the store
    for node in cluster.node_ids():
        strategy = tessera.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
            node, soft=False)
        inner = tessera.get(put_and_return.options(scheduling_strategy=strategy).remote(array))
        got = tessera.get(inner)
        assert np.array_equal(got, array), node


def test_a_failure_behind_a_returned_ref_raises_with_its_own_type(cluster):
    inner = tessera.get(submit_failing_and_return.remote("deep"))
    with pytest.raises(ValueError, match="deep") as raised:
        tessera.get(inner)
    assert isinstance(raised.value, exceptions.RayTaskError)


def test_an_actors_objects_are_read_by_the_driver_and_by_tasks(cluster):
    keeper = Keeper.remote()
    [ref] = tessera.get(keeper.put.remote("kept by the actor"))
    assert tessera.get(ref) == "kept by the actor"
    # A task on any node reads it from the actor, its owner, too.
    assert tessera.get(read_ref.remote([ref])) == "kept by the actor"
    # Returned without the actor keeping a ref of its own: still readable.
    [unkept] = tessera.get(keeper.put_unkept.remote(7))
    assert tessera.get(unkept) == 7
    tessera.kill(keeper)


def test_reading_an_object_whose_owner_died_raises_owner_died_error(cluster):
    keeper = Keeper.remote()
    pid = tessera.get(keeper.pid.remote())
    [ref] = tessera.get(keeper.put.remote("gone with its owner"))
    assert tessera.get(ref) == "gone with its owner"
    tessera.kill(keeper)
    wait_for(lambda: not pid_alive(pid), 30, "the killed actor's process to exit")
    with pytest.raises(exceptions.OwnerDiedError) as raised:
        tessera.get(ref, timeout=60)
    assert isinstance(raised.value, exceptions.ObjectLostError)
    assert ref.hex() in str(raised.value)


def test_get_of_a_list_raises_the_first_failure_while_others_are_pending(cluster):
    slow = sleep_then.remote("slow", 60)
    # Half a CPU: a worker of its own, not queued behind the slow task on the same worker.
    failed = fail.options(num_cpus=0.5).remote("fast failure")
    started = time.monotonic()
    with pytest.raises(ValueError, match="fast failure"):
        tessera.get([slow, failed])
    # Well before the slow task's minute: the failure ended the wait.
    assert time.monotonic() - started < 30
    tessera.cancel(slow, force=True)


def test_get_of_a_list_raises_the_first_failed_ref_in_order(cluster):
    a = fail.remote("first")
    b = fail.remote("second")
    tessera.wait([a, b], num_returns=2)
    with pytest.raises(ValueError, match="first"):
        tessera.get([square.remote(2), a, b])


@tessera.remote
def submit_slow_and_return(value, seconds):
    return sleep_then.remote(value, seconds)


def test_wait_on_a_ref_another_process_owns_waits_until_its_owner_has_it(cluster):
    inner = tessera.get(submit_slow_and_return.remote("late", 3))
    assert inner.owner_address() != tessera._core.owner_address()
    ready, not_ready = tessera.wait([inner], timeout=0.5)
    assert (ready, not_ready) == ([], [inner])
    ready, not_ready = tessera.wait([inner], timeout=60)
    assert (ready, not_ready) == ([inner], [])
    assert tessera.get(inner) == "late"

"""Objects from Python: put/get/wait with Ray's checks and messages, and the zero-copy path:
a large NumPy array is written once into the node's shared-memory store and read back as a view
of the store's memory, on its node, and fetched to another node on demand."""
import numpy as np
import pytest

import tessera
from tessera import _core, exceptions
from tessera.util.scheduling_strategies import NodeAffinitySchedulingStrategy


def test_put_and_get_round_trip_python_values(cluster):
    for value in [1, "text", {"a": [1, 2.5, None]}, (1, 2), b"\x00bytes", {1, 2}]:
        assert tessera.get(tessera.put(value)) == value


def test_a_large_array_is_read_zero_copy_from_the_store(cluster):
    array = np.arange(1 << 18, dtype=np.float64)  # 2 MiB
    ref = tessera.put(array)
    before = _core.object_path_stats()
    first = tessera.get(ref)
    second = tessera.get(ref)
    after = _core.object_path_stats()
    assert np.array_equal(first, array)
    # Both reads are views of the same store bytes, not copies of them.
    assert after["zero_copy_reads"] == before["zero_copy_reads"] + 2
    assert np.shares_memory(first, second)
    assert not np.shares_memory(first, array)
    assert first.flags.writeable is False
    with pytest.raises(ValueError, match="read-only"):
        first[0] = 1.0
    # The array's memory lies inside the Buffer the core returned for the stored value.
    buffer = _core.get([ref])[0]
    assert buffer.zero_copy
    start = buffer._address
    address = first.__array_interface__["data"][0]
    other = np.frombuffer(buffer, dtype=np.uint8)
    assert np.shares_memory(other, first) or start <= address < start + len(buffer)


def test_a_small_array_stays_inline(cluster):
    ref = tessera.put(np.arange(10))
    buffer = _core.get([ref])[0]
    assert not buffer.zero_copy
    assert list(tessera.get(ref)) == list(range(10))


def test_a_task_reads_a_large_argument_from_the_store_and_returns_a_large_result(cluster):
    @tessera.remote
    def double(a):
        return a * 2

    array = np.ones(1 << 18)
    result = tessera.get(double.remote(tessera.put(array)))
    assert float(result.sum()) == 2.0 * array.size
    assert result.flags.writeable is False  # the result came back through the store


def test_a_value_made_on_one_node_is_fetched_on_another(cluster):
    nodes = cluster.node_ids()
    assert len(nodes) == 2

    @tessera.remote
    def make(n):
        return np.full(n, 7, dtype=np.int32)

    @tessera.remote
    def where_and_sum(a):
        return tessera.get_runtime_context().get_node_id(), int(a.sum())

    made = make.options(scheduling_strategy=NodeAffinitySchedulingStrategy(nodes[0], soft=False))
    read = where_and_sum.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(nodes[1], soft=False))
    assert tessera.get(read.remote(made.remote(1 << 18))) == (nodes[1], 7 * (1 << 18))


def test_a_large_torch_tensor_round_trips_through_the_store(cluster):
    torch = pytest.importorskip("torch")
    tensor = torch.arange(1 << 16, dtype=torch.float32)

    @tessera.remote
    def total(t):
        return float(t.sum())

    assert tessera.get(total.remote(tessera.put(tensor))) == float(tensor.sum())
    assert torch.equal(tessera.get(tessera.put(tensor)), tensor)


def test_refs_inside_a_value_keep_their_objects(cluster):
    inner = tessera.put("inside")
    outer = tessera.put([inner])
    del inner
    (ref,) = tessera.get(outer)
    assert tessera.get(ref) == "inside"


def test_put_of_a_ref_is_a_type_error(cluster):
    with pytest.raises(TypeError, match="Calling 'put' on an tessera.ObjectRef is not allowed"):
        tessera.put(tessera.put(1))


def test_get_rejects_a_tuple(cluster):
    with pytest.raises(ValueError, match="not a tuple"):
        tessera.get((tessera.put(1),))


def test_wait_returns_ready_and_not_ready_in_the_order_given(cluster):
    @tessera.remote
    def sleep_then(seconds, value):
        import time
        time.sleep(seconds)
        return value

    slow = sleep_then.remote(30, "slow")
    fast = [tessera.put(i) for i in range(3)]
    ready, not_ready = tessera.wait([slow] + fast, num_returns=3, timeout=10)
    assert ready == fast and not_ready == [slow]
    ready, not_ready = tessera.wait([slow] + fast, num_returns=4, timeout=0.2)
    assert ready == fast and not_ready == [slow]
    ready, not_ready = tessera.wait(fast, num_returns=1)
    assert ready == fast[:1] and not_ready == fast[1:]
    assert tessera.wait([]) == ([], [])


def test_wait_checks_its_arguments(cluster):
    ref = tessera.put(1)
    with pytest.raises(TypeError):
        tessera.wait(ref)
    with pytest.raises(ValueError, match="unique"):
        tessera.wait([ref, ref])
    with pytest.raises(ValueError, match="greater than the number of objects"):
        tessera.wait([ref], num_returns=2)
    with pytest.raises(ValueError, match="Invalid number of objects to return 0"):
        tessera.wait([ref], num_returns=0)


def test_an_errored_ref_counts_as_ready(cluster):
    @tessera.remote
    def fail():
        raise KeyError("x")

    ref = fail.remote()
    ready, _ = tessera.wait([ref], timeout=30)
    assert ready == [ref]
    with pytest.raises(KeyError):
        tessera.get(ref)


def test_a_value_that_cannot_be_pickled_is_a_type_error(cluster):
    import threading
    with pytest.raises(TypeError, match="lock"):
        tessera.put(threading.Lock())
    with pytest.raises(exceptions.RayTaskError) as info:
        tessera.get(tessera.remote(lambda: threading.Lock()).remote())
    assert "lock" in str(info.value)

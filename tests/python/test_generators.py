"""Streaming generators (Ray's num_returns="streaming", ObjectRefGenerator) on a two-node simulated
cluster: each value a task or actor method yields is a ref the caller reads while the task goes
on; generator functions stream by default; a failure mid-stream is the ref after the last value;
cancelling ends the stream; a worker that dies mid-stream is retried without repeating values;
sync and async actor generators, `async for`, and large values through the store."""
import asyncio
import os
import time
from pathlib import Path

import numpy as np
import pytest

import tessera
from tessera import exceptions


@tessera.remote
def count(n):
    for i in range(n):
        yield i


@tessera.remote
def wait_between(flag):
    yield "first"
    deadline = time.monotonic() + 60
    while not os.path.exists(flag) and time.monotonic() < deadline:
        time.sleep(0.02)
    yield "second"


@tessera.remote
def fail_after(n):
    for i in range(n):
        yield i
    raise ValueError(f"failed after {n}")


@tessera.remote
def forever(step_s):
    i = 0
    while True:
        yield i
        i += 1
        time.sleep(step_s)


@tessera.remote(max_retries=1)
def die_once_mid_stream(marker):
    yield "a"
    yield "b"
    if not os.path.exists(marker):
        Path(marker).write_text("died once")
        os._exit(1)
    yield "c"


@tessera.remote(num_returns="streaming")
def not_a_generator():
    return [1, 2]


@tessera.remote
def arrays(n, size):
    for i in range(n):
        yield np.full(size, float(i))


@tessera.remote
class Streamer:
    def values(self, n):
        for i in range(n):
            yield f"sync {i}"


@tessera.remote
class AsyncStreamer:
    async def values(self, n):
        for i in range(n):
            await asyncio.sleep(0)
            yield f"async {i}"

    async def ping(self):
        return "pong"


def test_a_generator_function_streams_its_values_by_default(cluster):
    generator = count.remote(5)
    assert isinstance(generator, tessera.ObjectRefGenerator)
    refs = list(generator)
    assert all(isinstance(ref, tessera.ObjectRef) for ref in refs)
    assert tessera.get(refs) == [0, 1, 2, 3, 4]
    assert generator.is_finished()
    assert tessera.get(generator.completed()) is None


def test_values_are_read_while_the_task_still_runs(cluster, tmp_path):
    flag = tmp_path / "go on"
    generator = wait_between.remote(str(flag))
    deadline = time.monotonic() + 30
    while not generator.next_ready() and time.monotonic() < deadline:
        time.sleep(0.02)
    # The task waits for the flag before its second value: the first is here without it.
    assert tessera.get(next(generator)) == "first"
    assert not tessera.wait([generator.completed()], timeout=0)[0]
    flag.write_text("go")
    assert tessera.get(next(generator)) == "second"
    with pytest.raises(StopIteration):
        next(generator)


def test_a_failure_mid_stream_is_the_ref_after_the_last_value(cluster):
    generator = fail_after.remote(2)
    assert tessera.get(next(generator)) == 0
    assert tessera.get(next(generator)) == 1
    failed = next(generator)
    with pytest.raises(ValueError, match="failed after 2") as raised:
        tessera.get(failed)
    assert isinstance(raised.value, exceptions.RayTaskError)
    with pytest.raises(StopIteration):
        next(generator)
    with pytest.raises(ValueError):
        tessera.get(generator.completed())


def test_cancelling_ends_the_stream_with_task_cancelled_error(cluster):
    generator = forever.remote(0.05)
    assert tessera.get(next(generator)) == 0
    assert tessera.get(next(generator)) == 1
    tessera.cancel(generator)
    refs = list(generator)  # ends: the values made before the cancel, then the failure
    with pytest.raises(exceptions.TaskCancelledError):
        tessera.get(refs[-1])
    assert all(tessera.get(ref) == i + 2 for i, ref in enumerate(refs[:-1]))


def test_a_worker_dying_mid_stream_is_retried_without_repeating_values(cluster, tmp_path):
    generator = die_once_mid_stream.remote(str(tmp_path / "died"))
    assert [tessera.get(ref) for ref in generator] == ["a", "b", "c"]
    assert (tmp_path / "died").read_text() == "died once"


def test_streaming_a_function_that_is_no_generator_is_a_type_error(cluster):
    refs = list(not_a_generator.remote())
    assert len(refs) == 1
    with pytest.raises(TypeError, match="not a generator"):
        tessera.get(refs[0])


def test_large_values_travel_through_the_store_from_either_node(cluster):
    for node in cluster.node_ids():
        strategy = tessera.util.scheduling_strategies.NodeAffinitySchedulingStrategy(node, False)
        values = [tessera.get(ref) for ref in
                  arrays.options(scheduling_strategy=strategy).remote(3, 200_000)]
        assert [float(v[0]) for v in values] == [0.0, 1.0, 2.0]
        assert all(v.shape == (200_000,) for v in values)


def test_actor_generator_methods_stream_sync_and_async(cluster):
    streamer = Streamer.remote()
    assert [tessera.get(r) for r in streamer.values.remote(3)] == ["sync 0", "sync 1", "sync 2"]
    async_streamer = AsyncStreamer.remote()
    assert [tessera.get(r) for r in async_streamer.values.remote(2)] == ["async 0", "async 1"]
    assert tessera.get(async_streamer.ping.remote()) == "pong"


def test_async_for_reads_a_generator_in_an_event_loop(cluster):
    async def consume():
        return [tessera.get(ref) async for ref in count.remote(4)]

    assert asyncio.run(consume()) == [0, 1, 2, 3]


def test_num_returns_streaming_is_explicit_too_and_dynamic_is_refused(cluster):
    @tessera.remote
    def plain_generator():
        yield "x"

    assert tessera.get(next(plain_generator.options(num_returns="streaming").remote())) == "x"
    with pytest.raises(ValueError, match="num_returns='dynamic'"):
        plain_generator.options(num_returns="dynamic")


def test_a_generator_cannot_leave_its_caller(cluster):
    import pickle

    generator = count.remote(1)
    with pytest.raises(TypeError, match="cannot be passed to another process"):
        pickle.dumps(generator)
    assert tessera.get(next(generator)) == 0


def test_wait_takes_a_generator_ready_once_its_next_value_is_there(cluster, tmp_path):
    flag = tmp_path / "go on"
    generator = wait_between.remote(str(flag))
    ready, not_ready = tessera.wait([generator], timeout=30)
    assert (ready, not_ready) == ([generator], [])
    assert tessera.get(next(generator)) == "first"
    # The second value waits for the flag: not ready; a plain ref beside it is.
    plain = tessera.put("here")
    ready, not_ready = tessera.wait([generator, plain], num_returns=1, timeout=0.3)
    assert (ready, not_ready) == ([plain], [generator])
    ready, not_ready = tessera.wait([generator], timeout=0.3)
    assert (ready, not_ready) == ([], [generator])
    flag.write_text("go")
    ready, _ = tessera.wait([generator], timeout=30)
    assert ready == [generator]
    assert tessera.get(next(generator)) == "second"

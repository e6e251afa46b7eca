"""Actors from Python: state kept between calls in order, errors from methods, named actors found
from another driver, kill, a killed actor restarted (its state reset) or dead with its cause."""
import os
import signal
import textwrap

import pytest

import tessera
from tessera import exceptions


@tessera.remote
class Counter:
    def __init__(self, start=0):
        self.value = start

    def add(self, amount=1):
        self.value += amount
        return self.value

    def pid(self):
        return os.getpid()

    def fail(self):
        raise RuntimeError("method failed")

    def die(self):
        os.kill(os.getpid(), signal.SIGKILL)


def test_an_actor_keeps_its_state_and_runs_calls_in_order(cluster):
    counter = Counter.remote(10)
    refs = [counter.add.remote(1) for _ in range(300)]
    assert tessera.get(refs) == list(range(11, 311))


@tessera.remote
class Sleeper:
    def sleep(self, seconds):
        import time
        time.sleep(seconds)
        return seconds

    def echo(self, value):
        return value


def test_calls_sent_in_many_batches_while_the_actor_is_busy_all_run_in_order(cluster):
    # While the actor sleeps, its owner sends the calls in batches (64 at most to a busy worker)
    # that pile up in the worker's stream; when it is free its main thread reads them, several in
    # one read: every call must still run, in order (the frames read along with the first once
    # stayed unread while the thread waited for the socket, and the calls hung).
    sleeper = Sleeper.remote()
    tessera.get(sleeper.echo.remote(0))
    for _ in range(3):
        busy = sleeper.sleep.remote(0.5)
        refs = [sleeper.echo.remote(i) for i in range(600)]
        ready, _ = tessera.wait(refs, num_returns=len(refs), timeout=30)
        assert len(ready) == len(refs), "calls sent while the actor was busy never ran"
        assert tessera.get(refs) == list(range(600))
        assert tessera.get(busy) == 0.5


def test_a_method_error_is_raised_in_the_caller_and_the_actor_lives_on(cluster):
    counter = Counter.remote()
    with pytest.raises(RuntimeError, match="method failed") as info:
        tessera.get(counter.fail.remote())
    assert "Counter.fail" in str(info.value)
    assert tessera.get(counter.add.remote()) == 1


def test_an_unknown_method_is_an_attribute_error(cluster):
    with pytest.raises(AttributeError, match="no method 'nope'"):
        Counter.remote().nope


def test_instantiating_an_actor_class_directly_is_a_type_error(cluster):
    with pytest.raises(TypeError, match=r"use 'Counter.remote\(\)'"):
        Counter()


def test_wrong_constructor_arguments_are_a_type_error_at_the_call(cluster, monkeypatch):
    def created(*args, **kwargs):
        raise AssertionError("_core.create_actor was called")

    monkeypatch.setattr(tessera._core, "create_actor", created)
    with pytest.raises(TypeError, match="^too many positional arguments$"):
        Counter.remote(1, 2)
    with pytest.raises(TypeError, match="^got an unexpected keyword argument 'begin'$"):
        Counter.options(name="never").remote(begin=3)


def test_wrong_method_arguments_are_a_type_error_at_the_call(cluster, monkeypatch):
    @tessera.remote
    class Methods:
        def pair(self, a, b):
            return a, b

        @staticmethod
        def static(a):
            return a

        @classmethod
        def klass(cls, a):
            return a

    handle = Methods.remote()
    assert tessera.get(handle.pair.remote(1, b=2)) == (1, 2)
    assert tessera.get(handle.static.remote(3)) == 3
    assert tessera.get(handle.klass.remote(4)) == 4

    def submitted(*args, **kwargs):
        raise AssertionError("_core.submit_actor_task was called")

    monkeypatch.setattr(tessera._core, "submit_actor_task", submitted)
    with pytest.raises(TypeError, match="^missing a required argument: 'b'$"):
        handle.pair.remote(1)
    with pytest.raises(TypeError, match="^too many positional arguments$"):
        handle.pair.remote(1, 2, 3)
    with pytest.raises(TypeError, match="^too many positional arguments$"):
        handle.static.remote(1, 2)
    with pytest.raises(TypeError, match="^missing a required argument: 'a'$"):
        handle.klass.remote()


def test_a_killed_actor_without_restarts_is_dead_with_its_cause(cluster):
    counter = Counter.remote()
    tessera.get(counter.add.remote())
    with pytest.raises(exceptions.RayActorError):
        tessera.get(counter.die.remote())
    with pytest.raises(exceptions.ActorDiedError) as info:
        tessera.get(counter.add.remote())
    assert "SIGKILL" in str(info.value)


def test_a_killed_actor_with_restarts_comes_back_with_fresh_state(cluster):
    counter = Counter.options(max_restarts=1).remote(100)
    first_pid = tessera.get(counter.pid.remote())
    assert tessera.get(counter.add.remote(5)) == 105
    os.kill(first_pid, signal.SIGKILL)
    # The constructor runs again on a new process: the state starts over.
    value = None
    for _ in range(100):
        try:
            value = tessera.get(counter.add.remote(1))
            break
        except exceptions.RayActorError:
            continue  # the call that raced the death
    assert value == 101
    assert tessera.get(counter.pid.remote()) != first_pid


def test_kill_ends_the_actor(cluster):
    counter = Counter.remote()
    tessera.get(counter.add.remote())
    tessera.kill(counter)
    with pytest.raises(exceptions.ActorDiedError):
        tessera.get(counter.add.remote())
    with pytest.raises(ValueError, match="For tasks, try tessera.cancel"):
        tessera.kill("not a handle")


def test_a_named_actor_is_found_by_another_driver(cluster):
    # Each job has a namespace of its own unless init names one (as Ray): the other driver
    # looks in the actor's.
    counter = Counter.options(name="shared-counter", namespace="counters").remote()
    tessera.get(counter.add.remote(41))
    script = textwrap.dedent("""
        import tessera
        tessera.init(address="auto", namespace="counters")
        handle = tessera.get_actor("shared-counter")
        print(tessera.get(handle.add.remote(1)))
        tessera.shutdown()
    """)
    result = cluster.python(script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "42"
    assert tessera.get(
        tessera.get_actor("shared-counter", namespace="counters").add.remote(0)) == 42


def test_an_actor_name_is_unique_and_free_again_after_kill(cluster):
    first = Counter.options(name="unique-name").remote()
    tessera.get(first.add.remote())
    with pytest.raises(ValueError, match="already taken"):
        Counter.options(name="unique-name").remote()
    tessera.kill(first)
    second = Counter.options(name="unique-name").remote(7)
    assert tessera.get(second.add.remote(0)) == 7


def test_get_actor_of_an_unknown_name_is_a_value_error(cluster):
    with pytest.raises(ValueError, match="Failed to look up actor with name 'nobody'"):
        tessera.get_actor("nobody")


def test_a_named_actor_handle_passed_to_a_task_reaches_the_actor(cluster):
    counter = Counter.options(name="passed-counter").remote()

    @tessera.remote
    def bump(handle):
        return tessera.get(handle.add.remote(2))

    assert tessera.get(bump.remote(counter)) == 2
    assert tessera.get(counter.add.remote(0)) == 2


def test_an_actor_process_ends_when_its_handle_goes(cluster):
    from conftest import pid_alive, wait_for
    counter = Counter.remote()
    pid = tessera.get(counter.pid.remote())
    del counter
    wait_for(lambda: not pid_alive(pid), 30, f"actor process {pid} to exit")


def test_a_threaded_actor_runs_calls_at_once(cluster):
    @tessera.remote(max_concurrency=4)
    class Gate:
        def __init__(self):
            import threading
            self.barrier = threading.Barrier(4, timeout=20)

        def meet(self):
            return self.barrier.wait() >= 0

    gate = Gate.remote()
    assert tessera.get([gate.meet.remote() for _ in range(4)], timeout=60) == [True] * 4


def test_an_unnamed_actor_handle_passed_to_tasks_reaches_the_actor(cluster):
    counter = Counter.remote()

    @tessera.remote
    def bump_many(handle, times):
        return tessera.get([handle.add.remote(1) for _ in range(times)])[-1]

    assert sorted(tessera.get([bump_many.remote(counter, 5) for _ in range(3)])) [-1] == 15
    assert tessera.get(counter.add.remote(0)) == 15


def test_a_handle_returned_from_a_task_reaches_the_actor_it_made(cluster):
    @tessera.remote
    def make():
        handle = Counter.remote(5)
        tessera.get(handle.add.remote(1))
        return handle

    @tessera.remote
    def make_and_keep():
        import time
        handle = make.remote()
        inner = tessera.get(handle)
        value = tessera.get(inner.add.remote(1))
        return value

    assert tessera.get(make_and_keep.remote(), timeout=120) in (7,)


def test_ray_terminate_ends_the_actor_after_its_calls_and_it_is_not_restarted(cluster):
    from conftest import pid_alive, wait_for
    counter = Counter.options(max_restarts=2).remote()
    pid = tessera.get(counter.pid.remote())
    pending = [counter.add.remote(1) for _ in range(3)]
    done = counter.__ray_terminate__.remote()
    assert tessera.get(pending) == [1, 2, 3]  # the calls before it ran
    tessera.get(done, timeout=30)
    wait_for(lambda: not pid_alive(pid), 30, "the actor's process to end")
    with pytest.raises(exceptions.ActorDiedError):
        tessera.get(counter.add.remote(1), timeout=30)


def test_a_handle_used_by_a_task_before_the_actor_is_constructed_waits_for_it(cluster):
    @tessera.remote
    class Slow:
        def __init__(self):
            import time
            time.sleep(2)  # the task below reaches the actor's process before this ends
            self.ready = True

        def ready_now(self):
            return self.ready

    slow = Slow.remote()

    @tessera.remote
    def call(handle):
        return tessera.get(handle.ready_now.remote())

    assert tessera.get(call.remote(slow), timeout=60) is True


@tessera.remote
class Pair:
    @tessera.method(num_returns=2)
    def split(self, x):
        return x, -x

    def three(self):
        return 1, 2, 3


def test_an_actor_method_returns_several_objects(cluster):
    pair = Pair.remote()
    a, b = pair.split.remote(4)
    assert tessera.get([a, b]) == [4, -4]
    refs = pair.three.options(num_returns=3).remote()
    assert isinstance(refs, list) and tessera.get(refs) == [1, 2, 3]
    assert pair.three.options(num_returns=0).remote() is None
    wrong = pair.three.options(num_returns=2).remote()
    for ref in wrong:
        with pytest.raises(ValueError, match=r"Task returned 3 objects, but num_returns=2\."):
            tessera.get(ref)
    # The actor goes on: a failed split is the call's, not the actor's.
    assert tessera.get(pair.split.remote(1)[1]) == -1

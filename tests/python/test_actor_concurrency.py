"""Actors as Ray users rely on them: per-method options (`@tessera.method`, `.options` on a
call), async actors (one event loop, Ray's default of 1000 calls in flight without a thread per
call), concurrency groups of threaded and async actors, namespaces for named actors
(`init(namespace=)`, `get_actor(name, namespace=)`, `get_if_exists`), and the death of an
actor's process failing its calls in flight at once with Ray's ActorDiedError text.
Concurrency is shown with barriers and events, never with timing."""
import os
import signal
import textwrap
import uuid

import pytest

import tessera
from tessera import exceptions
from conftest import wait_for


def test_method_options_are_checked_when_declared_and_called(cluster):
    with pytest.raises(ValueError, match="Invalid option keyword bogus for actor methods"):
        tessera.method(bogus=1)
    with pytest.raises(ValueError, match="max_task_retries"):
        tessera.method(max_task_retries=-2)

    with pytest.raises(ValueError, match="concurrency group 'io', which the class does not"):
        @tessera.remote
        class NoGroups:
            @tessera.method(concurrency_group="io")
            def read(self):
                return 1

    @tessera.remote(concurrency_groups={"io": 1})
    class Grouped:
        @tessera.method(concurrency_group="io")
        def read(self):
            return "read"

    actor = Grouped.remote()
    with pytest.raises(ValueError, match="concurrency group 'nope' is not defined"):
        actor.read.options(concurrency_group="nope")
    with pytest.raises(ValueError, match="Invalid option keyword bogus"):
        actor.read.options(bogus=True)
    assert tessera.get(actor.read.remote(), timeout=60) == "read"
    with pytest.raises(ValueError, match="concurrency_groups must be a dict"):
        tessera.remote(concurrency_groups=["io"])(type("C", (), {}))


def test_a_threaded_actor_runs_each_concurrency_group_on_its_own_pool(cluster):
    @tessera.remote(concurrency_groups={"io": 2, "compute": 3})
    class Groups:
        def __init__(self):
            import threading
            self.io_barrier = threading.Barrier(2, timeout=30)
            self.compute_barrier = threading.Barrier(3, timeout=30)
            self.release = threading.Event()
            self.lock = threading.Lock()
            self.in_io = 0
            self.peak_io = 0

        @tessera.method(concurrency_group="io")
        def io_meet(self):
            return self.io_barrier.wait() >= 0

        @tessera.method(concurrency_group="compute")
        def compute_meet(self):
            return self.compute_barrier.wait() >= 0

        @tessera.method(concurrency_group="io")
        def io_hold(self):
            with self.lock:
                self.in_io += 1
                self.peak_io = max(self.peak_io, self.in_io)
            self.release.wait(30)
            with self.lock:
                self.in_io -= 1
            return self.peak_io

        def in_io_now(self):
            return self.in_io

        def let_go(self):
            self.release.set()

    actor = Groups.remote()
    # Two io calls and three compute calls meet: each group runs that many at once.
    io = [actor.io_meet.remote() for _ in range(2)]
    compute = [actor.compute_meet.remote() for _ in range(3)]
    assert tessera.get(io + compute, timeout=60) == [True] * 5
    # A compute-declared method sent to io by the call's options meets io's barrier.
    io_barrier_call = actor.compute_meet.options(concurrency_group="io")
    assert io_barrier_call._options == {"concurrency_group": "io"}
    # Three io calls that hold their thread: two run, the third waits for room; the default
    # group (max_concurrency 1) answers meanwhile, on its own thread.
    held = [actor.io_hold.remote() for _ in range(3)]
    wait_for(lambda: tessera.get(actor.in_io_now.remote(), timeout=30) == 2, 60,
             "two io calls running")
    ready, _ = tessera.wait(held, num_returns=3, timeout=0.5)
    assert ready == []
    tessera.get(actor.let_go.remote(), timeout=30)
    assert max(tessera.get(held, timeout=60)) == 2


def test_a_call_options_concurrency_group_overrides_the_methods(cluster):
    @tessera.remote(concurrency_groups={"io": 2})
    class Meet:
        def __init__(self):
            import threading
            self.barrier = threading.Barrier(2, timeout=30)

        def meet(self):  # the default group allows one at a time
            return self.barrier.wait() >= 0

    actor = Meet.remote()
    calls = [actor.meet.options(concurrency_group="io").remote() for _ in range(2)]
    assert tessera.get(calls, timeout=60) == [True, True]


def test_an_async_actor_runs_1000_calls_in_flight_by_default_without_a_thread_each(cluster):
    @tessera.remote
    class Gather:
        def __init__(self):
            import asyncio
            self.arrived = 0
            self.all_here = asyncio.Event()

        async def meet(self, expected):
            import asyncio
            self.arrived += 1
            if self.arrived == expected:
                self.all_here.set()
            await asyncio.wait_for(self.all_here.wait(), timeout=60)
            return self.arrived

        def plain(self):
            return "sync methods work too"

        async def threads(self):
            import threading
            with open(f"/proc/{os.getpid()}/status") as status:
                native = next(int(line.split()[1]) for line in status
                              if line.startswith("Threads:"))
            return threading.active_count(), native

    actor = Gather.remote()
    # Ray's default max_concurrency of an async actor is 1000: all of them wait on one another.
    calls = [actor.meet.remote(1000) for _ in range(1000)]
    python_threads, native_threads = tessera.get(actor.threads.remote(), timeout=60)
    assert tessera.get(calls, timeout=120) == [1000] * 1000
    # The 1000 calls were in flight together on the loop, holding no thread each.
    assert python_threads < 20
    assert native_threads < 200
    assert tessera.get(actor.plain.remote()) == "sync methods work too"


def test_an_async_actors_concurrency_groups_limit_calls_on_its_loop(cluster):
    @tessera.remote(concurrency_groups={"io": 2})
    class AsyncGroups:
        def __init__(self):
            import asyncio
            self.release = asyncio.Event()
            self.in_io = 0
            self.peak = 0

        @tessera.method(concurrency_group="io")
        async def hold(self):
            self.in_io += 1
            self.peak = max(self.peak, self.in_io)
            import asyncio
            await asyncio.wait_for(self.release.wait(), timeout=30)
            self.in_io -= 1
            return self.peak

        async def in_io_now(self):
            return self.in_io

        async def let_go(self):
            self.release.set()

    actor = AsyncGroups.remote()
    held = [actor.hold.remote() for _ in range(3)]
    # Two io coroutines run, the third waits for the group's room; the default group answers.
    wait_for(lambda: tessera.get(actor.in_io_now.remote(), timeout=30) == 2, 60,
             "two io coroutines running")
    ready, _ = tessera.wait(held, num_returns=3, timeout=0.5)
    assert ready == []
    tessera.get(actor.let_go.remote(), timeout=30)
    assert tessera.get(held, timeout=60) == [2, 2, 2]


@tessera.remote
class Named:
    def __init__(self, tag):
        self.tag = tag

    def get_tag(self):
        return self.tag

    def pid(self):
        return os.getpid()


def test_the_same_name_lives_in_two_namespaces(cluster):
    name = f"svc-{uuid.uuid4().hex[:8]}"
    a = Named.options(name=name, namespace="team-a").remote("a")
    b = Named.options(name=name, namespace="team-b").remote("b")
    assert tessera.get([a.get_tag.remote(), b.get_tag.remote()], timeout=60) == ["a", "b"]
    assert tessera.get(tessera.get_actor(name, namespace="team-a").get_tag.remote()) == "a"
    assert tessera.get(tessera.get_actor(name, namespace="team-b").get_tag.remote()) == "b"
    # Neither is in this job's own (anonymous) namespace.
    with pytest.raises(ValueError, match="Failed to look up actor with name"):
        tessera.get_actor(name)
    with pytest.raises(ValueError, match=rf"The name {name} \(namespace=team-a\) is already taken"):
        Named.options(name=name, namespace="team-a").remote("again")


def test_a_job_without_a_namespace_gets_an_anonymous_one_its_tasks_share(cluster):
    namespace = tessera.get_runtime_context().namespace
    assert namespace and uuid.UUID(namespace)
    name = f"own-{uuid.uuid4().hex[:8]}"
    mine = Named.options(name=name).remote("mine")  # noqa: F841 - kept alive

    @tessera.remote
    def look_up(name):
        import tessera
        return (tessera.get_runtime_context().namespace,
                tessera.get(tessera.get_actor(name).get_tag.remote()))

    assert tessera.get(look_up.remote(name), timeout=60) == (namespace, "mine")
    # Another driver without a namespace has its own anonymous one: the name is not there.
    script = textwrap.dedent(f"""
        import tessera
        tessera.init(address="auto")
        try:
            tessera.get_actor("{name}")
            print("found")
        except ValueError:
            print("not found")
        print(tessera.get(tessera.get_actor("{name}", namespace="{namespace}").get_tag.remote()))
    """)
    r = cluster.python(script)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines() == ["not found", "mine"]


@tessera.remote(concurrency_groups={"io": 1})
class Described:
    @tessera.method(num_returns=2)
    def pair(self):
        return "left", "right"

    def count_to(self, n):
        yield from range(n)

    @tessera.method(concurrency_group="io")
    def read(self):
        return "read"


def test_a_handle_found_by_name_calls_methods_with_their_declared_options(cluster):
    # get_actor's handle, in this driver and in another, knows what the creator's does: a
    # num_returns=2 method gives two refs, a generator method streams, the class's methods and
    # concurrency groups are checked.
    name = f"described-{uuid.uuid4().hex[:8]}"
    made = Described.options(name=name, namespace="docs").remote()  # noqa: F841 - kept alive
    found = tessera.get_actor(name, namespace="docs")
    left, right = found.pair.remote()
    assert tessera.get([left, right], timeout=60) == ["left", "right"]
    assert [tessera.get(ref) for ref in found.count_to.remote(3)] == [0, 1, 2]
    assert tessera.get(found.read.remote()) == "read"
    with pytest.raises(AttributeError, match="'Described' actor has no method 'nope'"):
        found.nope
    with pytest.raises(ValueError, match="concurrency group 'cpu' is not defined"):
        found.read.options(concurrency_group="cpu")
    script = textwrap.dedent(f"""
        import tessera
        tessera.init(address="auto", namespace="docs")
        found = tessera.get_actor("{name}")
        print(tessera.get(list(found.pair.remote())))
        print([tessera.get(ref) for ref in found.count_to.remote(4)])
    """)
    r = cluster.python(script)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines() == ["['left', 'right']", "[0, 1, 2, 3]"]


def test_drivers_of_one_namespace_share_named_actors_and_get_if_exists(cluster):
    name = f"shared-{uuid.uuid4().hex[:8]}"
    made = Named.options(name=name, namespace="shared", lifetime="detached").remote("first")
    pid = tessera.get(made.pid.remote(), timeout=60)
    again = Named.options(name=name, namespace="shared", get_if_exists=True).remote("second")
    assert tessera.get(again.pid.remote(), timeout=60) == pid
    assert tessera.get(again.get_tag.remote()) == "first"
    script = textwrap.dedent(f"""
        import tessera
        tessera.init(address="auto", namespace="shared")
        print(tessera.get_runtime_context().namespace)
        print(tessera.get(tessera.get_actor("{name}").get_tag.remote()))
        other = tessera.remote(type("Other", (), {{"pid": lambda self: __import__("os").getpid()}}))
        print(tessera.get(other.options(name="{name}", get_if_exists=True).remote().pid.remote()))
    """)
    r = cluster.python(script)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["shared", "first", str(pid)]
    tessera.kill(made)
    with pytest.raises(TypeError, match="namespace must be None or a string"):
        tessera.get_actor(name, namespace=3)


def test_a_method_max_task_retries_reruns_a_call_its_process_died_in(cluster, tmp_path):
    marker = tmp_path / "died-once"

    @tessera.remote(max_restarts=2)
    class Fragile:
        @tessera.method(max_task_retries=1)
        def survive(self, marker):
            if not os.path.exists(marker):
                open(marker, "w").close()
                os.kill(os.getpid(), signal.SIGKILL)
            return "ran again"

        def die(self):
            os.kill(os.getpid(), signal.SIGKILL)

    actor = Fragile.remote()
    assert tessera.get(actor.survive.remote(str(marker)), timeout=120) == "ran again"
    # Without the method's option the actor's max_task_retries (0) applies: the call fails at
    # once with the death, although the actor restarts.
    with pytest.raises(exceptions.ActorDiedError):
        tessera.get(actor.die.remote(), timeout=120)
    # A call's own options override the method's.
    marker.unlink()
    with pytest.raises(exceptions.ActorDiedError):
        tessera.get(actor.survive.options(max_task_retries=0).remote(str(marker)), timeout=120)


def test_a_method_retry_exceptions_runs_it_again_on_the_same_actor(cluster):
    @tessera.remote
    class Flaky:
        def __init__(self):
            self.calls = 0

        @tessera.method(max_task_retries=2, retry_exceptions=[ValueError])
        def flaky(self):
            self.calls += 1
            if self.calls < 3:
                raise ValueError(f"attempt {self.calls}")
            return self.calls

        def fails_once(self):
            self.calls += 1
            raise ValueError("not retried")

    actor = Flaky.remote()
    assert tessera.get(actor.flaky.remote(), timeout=60) == 3
    with pytest.raises(ValueError, match="not retried"):
        tessera.get(actor.fails_once.remote(), timeout=60)


def test_calls_in_flight_when_the_process_dies_fail_at_once_with_rays_text(cluster):
    @tessera.remote(max_restarts=1)
    class Slow:
        def __init__(self, marker):
            # Its restart never completes within the test: the calls must fail before it.
            if os.path.exists(marker):
                import time
                time.sleep(600)
            open(marker, "w").close()

        def pid(self):
            return os.getpid()

        def wait(self):
            import time
            time.sleep(600)

    marker = f"/tmp/tessera-slow-{uuid.uuid4().hex}"
    name = f"slow-{uuid.uuid4().hex[:8]}"
    actor = Slow.options(name=name, namespace="deaths").remote(marker)
    pid = tessera.get(actor.pid.remote(), timeout=60)
    in_flight = actor.wait.remote()
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(exceptions.ActorDiedError) as info:
        tessera.get(in_flight, timeout=60)
    text = str(info.value)
    assert text.startswith("The actor died unexpectedly before finishing this task.\n")
    assert "\tclass_name: Slow\n" in text
    assert f"\tactor_id: {actor._actor_id}\n" in text
    assert f"\tpid: {pid}\n" in text
    assert f"\tname: {name}\n" in text
    assert "\tnamespace: deaths\n" in text
    assert "SIGKILL" in text
    assert info.value.actor_id == actor._actor_id
    os.unlink(marker)

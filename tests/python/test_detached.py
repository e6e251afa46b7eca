"""Actor lifetimes across drivers: an actor dies with the driver that made it unless detached; a
detached one outlives it, is found by name and killed from another driver, and, with no owner
left, is dead (its name free) once its process dies."""
import os
import signal
import textwrap

import pytest

import tessera
from conftest import pid_alive, wait_for

MAKE_ACTORS = textwrap.dedent("""
    import os
    import tessera

    @tessera.remote
    class Keeper:
        def __init__(self):
            self.value = 0

        def add(self, amount):
            self.value += amount
            return self.value

        def pid(self):
            return os.getpid()

    tessera.init(address="auto", namespace="detached")
    mortal = Keeper.options(name="{prefix}-mortal").remote()
    kept = Keeper.options(name="{prefix}-kept", lifetime="detached").remote()
    tessera.get(kept.add.remote(5))
    print(tessera.get(mortal.pid.remote()), tessera.get(kept.pid.remote()))
    tessera.shutdown()
""")


def make_actors_in_another_driver(cluster, prefix):
    """Runs a driver that makes a plain and a detached named actor and exits; their pids."""
    result = cluster.python(MAKE_ACTORS.format(prefix=prefix))
    assert result.returncode == 0, result.stderr
    mortal, kept = (int(pid) for pid in result.stdout.split()[-2:])
    return mortal, kept


def name_is_free(name):
    try:
        tessera.get_actor(name, namespace="detached")
        return False
    except ValueError:
        return True


def test_a_detached_actor_outlives_its_driver_and_is_killed_from_another(cluster):
    mortal, kept = make_actors_in_another_driver(cluster, "a")
    # The plain actor died with the driver that made it, and its name is free.
    wait_for(lambda: not pid_alive(mortal), 30, f"the plain actor's process {mortal} to end")
    wait_for(lambda: name_is_free("a-mortal"), 30, "the plain actor's name to be freed")
    # The detached one lives on with its state, reached by name.
    assert pid_alive(kept)
    handle = tessera.get_actor("a-kept", namespace="detached")
    assert tessera.get(handle.add.remote(1), timeout=60) == 6
    assert tessera.get(handle.pid.remote(), timeout=60) == kept

    tessera.kill(handle)
    wait_for(lambda: not pid_alive(kept), 30, f"the detached actor's process {kept} to end")
    assert name_is_free("a-kept")
    with pytest.raises(tessera.exceptions.ActorDiedError):
        tessera.get(handle.add.remote(1), timeout=60)


def test_a_detached_actor_with_no_owner_is_dead_once_its_process_dies(cluster):
    _, kept = make_actors_in_another_driver(cluster, "b")
    assert tessera.get(tessera.get_actor("b-kept", namespace="detached").add.remote(0),
                       timeout=60) == 5
    os.kill(kept, signal.SIGKILL)
    # Its node agent tells the head; nobody restarts it, and the name is free again.
    wait_for(lambda: name_is_free("b-kept"), 30, "the dead detached actor's name to be freed")


def test_a_detached_actor_killed_by_its_creator_ends(cluster):
    @tessera.remote
    class Service:
        def pid(self):
            return os.getpid()

    service = Service.options(name="c-kept", lifetime="detached").remote()
    pid = tessera.get(service.pid.remote(), timeout=60)
    tessera.kill(service)
    wait_for(lambda: not pid_alive(pid), 30, f"the detached actor's process {pid} to end")
    assert name_is_free("c-kept")


def test_a_detached_actor_must_be_named(cluster):
    @tessera.remote
    class Unnamed:
        pass

    with pytest.raises(ValueError, match="A detached actor must be named"):
        Unnamed.options(lifetime="detached").remote()

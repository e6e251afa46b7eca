"""Borrower reference counting (Ray's semantics, docs/objects.md "Borrowing"), on a two-node
simulated cluster: an object lives while its owner or any process holding a ref to it (a
borrower: a task or actor it was passed to inside a value, a process that read it out of
another object, the caller of a task that returned it) does, and is freed once the last of them
lets go; an unnamed actor ends once every handle to it, in any process, has gone. The owner's
table size (`_core.owned_object_count`, in each process) shows what is held (a remote
function's or actor class's code is put once at its first call and kept: tests call it first)."""
import gc
import os
import textwrap

import numpy as np

import tessera
from tessera import _core
from conftest import pid_alive, wait_for


def owned_here():
    gc.collect()
    return _core.owned_object_count()


def wait_owned(expected, what):
    wait_for(lambda: owned_here() == expected, 30, what)


def wait_owned_by(actor, expected, what):
    gc.collect()
    wait_for(lambda: tessera.get(actor.owned.remote()) == expected, 30, what)


@tessera.remote
class Holder:
    """Keeps the refs it is given inside a value, and lets them go when asked."""

    def __init__(self):
        self.kept = []

    def keep(self, box):
        self.kept.extend(box)
        return len(self.kept)

    def read(self):
        return tessera.get(self.kept)

    def forget(self):
        self.kept.clear()
        gc.collect()
        return True

    def make(self, n):
        # Refs this actor owns, returned inside a value: the caller borrows them.
        return [tessera.put(np.full(4, i)) for i in range(n)]

    def owned(self):
        gc.collect()
        return _core.owned_object_count()

    def pid(self):
        return os.getpid()

    def call(self, method):
        return tessera.get(getattr(self.kept[0], method).remote())


@tessera.remote
def read_first(box):
    return tessera.get(box[0])


def test_an_object_passed_inside_a_value_lives_while_the_borrower_holds_it(cluster):
    holder = Holder.remote()
    tessera.get(holder.owned.remote())  # started
    before = owned_here()
    ref = tessera.put("kept by a borrower")
    assert tessera.get(holder.keep.remote([ref])) == 1
    del ref
    # The driver let go; the actor's borrow keeps it.
    assert owned_here() == before + 1
    assert tessera.get(holder.read.remote()) == ["kept by a borrower"]
    # The borrower lets go: the owner frees it.
    assert tessera.get(holder.forget.remote())
    wait_owned(before, "the object to be freed after its borrower let go")


def test_a_task_that_only_reads_its_argument_leaves_nothing_behind(cluster):
    tessera.get(read_first.remote([tessera.put(1)]))  # its code is put once, and kept
    before = owned_here()
    ref = tessera.put(np.arange(10))
    assert tessera.get(read_first.remote([ref])).tolist() == list(range(10))
    del ref
    wait_owned(before, "the object read by a task to be freed")


def test_a_put_keeps_the_objects_inside_it(cluster):
    before = owned_here()
    inner = tessera.put("inner")
    outer = tessera.put([inner])
    del inner
    assert owned_here() == before + 2
    [inner_again] = tessera.get(outer)
    assert tessera.get(inner_again) == "inner"
    del inner_again
    del outer
    wait_owned(before, "a put and the put inside it to be freed")


def test_refs_a_task_returned_are_freed_when_the_caller_lets_go(cluster):
    holder = Holder.remote()
    base = tessera.get(holder.owned.remote())
    refs = tessera.get(holder.make.remote(3))
    # The actor keeps none itself: the caller's borrow holds them.
    assert tessera.get(holder.owned.remote()) == base + 3
    assert [r.tolist() for r in tessera.get(refs)] == [[0] * 4, [1] * 4, [2] * 4]
    # Passed on to a task on either node while the caller still holds them.
    assert tessera.get(read_first.remote([refs[2]])).tolist() == [2] * 4
    del refs
    wait_owned_by(holder, base, "the actor's objects to be freed once the caller let go")


def test_a_result_nobody_read_gives_back_what_it_lent(cluster):
    holder = Holder.remote()
    base = tessera.get(holder.owned.remote())
    result = holder.make.remote(2)
    tessera.wait([result])
    del result
    wait_owned_by(holder, base, "objects inside an unread result to be freed with it")


def test_an_unnamed_actor_ends_when_its_last_handle_anywhere_goes(cluster):
    holder = Holder.remote()
    counter = Holder.remote()
    pid = tessera.get(counter.pid.remote())
    assert tessera.get(holder.keep.remote([counter])) == 1
    del counter
    gc.collect()
    # The holder's copy keeps the actor alive and usable.
    assert tessera.get(holder.call.remote("pid")) == pid
    assert pid_alive(pid)
    tessera.get(holder.forget.remote())
    wait_for(lambda: not pid_alive(pid), 30,
             "the actor to end after its last handle (in another process) went")


def test_a_named_actor_outlives_its_handles(cluster):
    named = Holder.options(name="borrowing-named").remote()
    pid = tessera.get(named.pid.remote())
    del named
    gc.collect()
    again = tessera.get_actor("borrowing-named")
    assert tessera.get(again.pid.remote()) == pid
    tessera.kill(again)


def test_a_borrower_that_dies_gives_back_what_it_held(cluster):
    holder = Holder.remote()
    pid = tessera.get(holder.pid.remote())
    before = owned_here()
    ref = tessera.put("held by an actor that will die")
    assert tessera.get(holder.keep.remote([ref])) == 1
    del ref
    assert owned_here() == before + 1
    tessera.kill(holder)
    wait_for(lambda: not pid_alive(pid), 30, "the killed actor's process to exit")
    # Its owner finds it gone (probed every few seconds) and forgets its count.
    wait_owned(before, "the object a dead borrower held to be freed")


def test_a_task_worker_whose_objects_are_borrowed_outlives_its_idle_timeout(cluster):
    # A driver whose idle workers go after half a second: the worker that made the returned
    # object stays while the driver holds a ref to it, then goes once the driver lets go.
    script = textwrap.dedent("""
        import gc, os, time
        import tessera

        tessera.init(address="auto", _worker_idle_timeout_s=0.5)

        @tessera.remote
        def make():
            return [tessera.put("made by a task"), os.getpid()]

        [ref, pid] = tessera.get(make.remote())
        time.sleep(2.5)
        print(tessera.get(ref, timeout=30))
        os.kill(pid, 0)  # still there
        del ref
        gc.collect()
        for _ in range(200):
            time.sleep(0.1)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                print("let go")
                break
    """)
    r = cluster.python(script)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines() == ["made by a task", "let go"]


@tessera.remote
def make_box(value):
    return [tessera.put(value)]


def test_refs_inside_an_actor_calls_ref_argument_live_while_the_actor_holds_them(cluster):
    holder = Holder.remote()
    # The box's ref is the caller's only until the call has it: then the actor's borrow.
    assert tessera.get(holder.keep.remote(make_box.remote("boxed"))) == 1
    gc.collect()
    assert tessera.get(holder.read.remote()) == ["boxed"]


@tessera.remote
class HandleKeeper:
    def __init__(self, box):
        self.box = box

    def pid_of_kept(self):
        return tessera.get(self.box[0].pid.remote())


def test_an_actor_passed_to_another_actors_constructor_ends_after_both_are_gone(cluster):
    counter = Holder.remote()
    pid = tessera.get(counter.pid.remote())
    keeper = HandleKeeper.remote([counter])
    assert tessera.get(keeper.pid_of_kept.remote()) == pid
    del counter
    gc.collect()
    assert pid_alive(pid)  # the keeper's copy, and its constructor's argument, hold it
    tessera.kill(keeper)
    wait_for(lambda: not pid_alive(pid), 60,
             "the actor to end once the actor holding its handle died")

"""tessera.cancel: a queued task never runs, a running one is interrupted (also while it waits
in get) and ends TaskCancelledError, the tasks it submitted are cancelled with it (a whole chain,
and only that task's own, not other tasks' of the same worker), force kills its worker
(WorkerCrashedError), and a cancelled task is never retried."""
import os
import time
from pathlib import Path

import pytest

import tessera
from tessera import exceptions
from tessera.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from conftest import pid_alive, wait_for


@tessera.remote(max_retries=3)
def sleeper(seconds, marker=None):
    if marker:
        with open(marker, "a") as f:
            f.write(f"{os.getpid()}\n")
    time.sleep(seconds)
    return "finished"


def started(marker):
    return os.path.exists(marker) and open(marker).read().strip()


def test_a_running_task_is_interrupted_and_never_retried(cluster, tmp_path):
    marker = tmp_path / "ran"
    ref = sleeper.remote(60, str(marker))
    wait_for(lambda: started(marker), 60, "the task to start")
    before = tessera._core.task_stats()["retries"]
    tessera.cancel(ref)
    with pytest.raises(exceptions.TaskCancelledError):
        tessera.get(ref, timeout=30)
    assert tessera._core.task_stats()["retries"] == before
    assert len(open(marker).read().split()) == 1  # ran once


def test_a_task_blocked_in_get_is_interrupted_and_its_subtasks_cancelled(cluster, tmp_path):
    marker = tmp_path / "child"

    @tessera.remote
    def parent(path):
        return tessera.get(sleeper.remote(120, path))

    ref = parent.remote(str(marker))
    child_pid = int(wait_for(lambda: started(marker), 60, "the child task to start"))
    tessera.cancel(ref, recursive=True)
    with pytest.raises(exceptions.TaskCancelledError):
        tessera.get(ref, timeout=30)
    # The child was interrupted too: its worker is free again (or gone), not sleeping 120 s.
    wait_for(lambda: not pid_alive(child_pid) or "sleep" not in _stack(child_pid), 30,
             "the child task to stop")


def _stack(pid):
    try:
        return open(f"/proc/{pid}/wchan").read()
    except OSError:
        return ""


def test_a_queued_task_never_runs(cluster, tmp_path):
    pinned = sleeper.options(num_cpus=4, scheduling_strategy=tessera.util.scheduling_strategies
                             .NodeAffinitySchedulingStrategy(cluster.node_ids()[0], soft=False))
    first_marker = tmp_path / "first"
    second_marker = tmp_path / "second"
    first = pinned.remote(5, str(first_marker))
    wait_for(lambda: started(first_marker), 60, "the first task to start")
    second = pinned.remote(0, str(second_marker))  # waits: the node's 4 CPUs are taken
    tessera.cancel(second)
    with pytest.raises(exceptions.TaskCancelledError):
        tessera.get(second, timeout=30)
    assert tessera.get(first, timeout=60) == "finished"
    assert not second_marker.exists()


def test_force_kills_the_worker(cluster, tmp_path):
    marker = tmp_path / "forced"
    ref = sleeper.remote(60, str(marker))
    pid = int(wait_for(lambda: started(marker), 60, "the task to start"))
    tessera.cancel(ref, force=True)
    with pytest.raises(exceptions.WorkerCrashedError):
        tessera.get(ref, timeout=30)
    wait_for(lambda: not pid_alive(pid), 30, f"worker {pid} to die")


def test_cancelling_a_finished_task_changes_nothing(cluster):
    ref = sleeper.remote(0)
    assert tessera.get(ref) == "finished"
    tessera.cancel(ref)
    assert tessera.get(ref) == "finished"


def test_cancel_checks_its_argument(cluster):
    with pytest.raises(TypeError, match="For actors, try tessera.kill"):
        tessera.cancel("not a ref")
    with pytest.raises(ValueError, match="not a task's result"):
        tessera.cancel(tessera.put(1))


@tessera.remote
def chain(depth, marker_dir):
    if depth == 0:
        time.sleep(60)
        return 0
    Path(marker_dir, f"depth{depth}").write_text("started")
    return tessera.get(chain.remote(depth - 1, marker_dir))


def test_cancelling_the_head_of_a_chain_ends_every_link(cluster, tmp_path):
    ref = chain.remote(3, str(tmp_path))
    wait_for(lambda: (tmp_path / "depth1").exists(), 60, "the chain to reach its last link")
    tessera.cancel(ref)
    with pytest.raises(exceptions.TaskCancelledError):
        tessera.get(ref, timeout=30)


@tessera.remote
def spawn_then_return(seconds, marker):
    # A child left running after this task returned: not part of the next task's work.
    child = sleep_then_mark.remote(seconds, marker)
    return [child], os.getpid()


@tessera.remote
def sleep_then_mark(seconds, marker):
    time.sleep(seconds)
    Path(marker).write_text("finished")
    return "finished"


@tessera.remote
def wait_for_a_child(marker_dir):
    Path(marker_dir, "parent started").write_text(str(os.getpid()))
    return tessera.get(sleep_then_mark.remote(60, str(Path(marker_dir, "own child"))))


def test_a_recursive_cancel_reaches_only_the_cancelled_tasks_children(cluster, tmp_path):
    # One worker runs both tasks in turn (one CPU each, pinned to the same node, in order): the
    # first leaves a child running, the second is cancelled recursively.
    node = cluster.node_ids()[0]
    pinned = NodeAffinitySchedulingStrategy(node, soft=False)
    unrelated_marker = tmp_path / "unrelated child"
    [unrelated], first_pid = tessera.get(
        spawn_then_return.options(scheduling_strategy=pinned).remote(10, str(unrelated_marker)))
    ref = wait_for_a_child.options(scheduling_strategy=pinned).remote(str(tmp_path))
    wait_for(lambda: (tmp_path / "parent started").exists(), 60, "the second task to start")
    # The same worker process: its runtime submitted both children.
    assert int((tmp_path / "parent started").read_text()) == first_pid
    time.sleep(0.5)  # its child submitted
    tessera.cancel(ref, recursive=True)
    with pytest.raises(exceptions.TaskCancelledError):
        tessera.get(ref, timeout=30)
    # The first task's child was not the cancelled task's: it runs to its end.
    assert tessera.get(unrelated, timeout=60) == "finished"
    assert unrelated_marker.read_text() == "finished"

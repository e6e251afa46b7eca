"""tessera.cancel: a queued task never runs, a running one is interrupted (also while it waits
in get) and ends TaskCancelledError, the tasks it submitted are cancelled with it, force kills
its worker (WorkerCrashedError), and a cancelled task is never retried."""
import os
import time

import pytest

import tessera
from tessera import exceptions

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

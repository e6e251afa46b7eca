"""Remote functions from Python on a two-node simulated cluster: values in and out, arguments by
reference, nested tasks, options, remote exceptions with their type and traceback, and a worker
killed mid-task (retried, or reported with its exit cause)."""
import os
import signal

import pytest

import tessera
from tessera import exceptions


@tessera.remote
def square(x):
    return x * x


@tessera.remote
def add(a, b=0, *, c=0):
    return a + b + c


@tessera.remote
def first(items):
    return items[0]


@tessera.remote
def fail(text):
    raise ValueError(text)


def test_a_task_returns_its_value(cluster):
    assert tessera.get(square.remote(7)) == 49


def test_many_tasks_come_back_in_order(cluster):
    refs = [square.remote(i) for i in range(200)]
    assert tessera.get(refs) == [i * i for i in range(200)]


def test_keyword_and_default_arguments(cluster):
    assert tessera.get(add.remote(1)) == 1
    assert tessera.get(add.remote(1, 2, c=3)) == 6
    assert tessera.get(add.remote(a=4, b=5)) == 9


def test_a_top_level_ref_is_passed_as_its_value(cluster):
    ref = square.remote(3)
    assert tessera.get(add.remote(ref, tessera.put(10))) == 19


def test_a_ref_nested_in_a_list_stays_a_ref(cluster):
    inner = tessera.put("kept")

    @tessera.remote
    def kind(items):
        return type(items[0]).__name__, tessera.get(items[0])

    assert tessera.get(kind.remote([inner])) == ("ObjectRef", "kept")


def test_large_arguments_travel_through_the_store(cluster):
    import numpy as np
    array = np.arange(200_000, dtype=np.int64)  # 1.6 MB: the call is put and passed by ref

    @tessera.remote
    def total(a):
        return int(a.sum()), a.flags.writeable

    assert tessera.get(total.remote(array)) == (int(array.sum()), False)


def test_closures_and_lambdas_defined_here_run_remotely(cluster):
    offset = 5
    shifted = tessera.remote(lambda x: x + offset)
    assert tessera.get(shifted.remote(1)) == 6


def test_a_task_submits_tasks_of_its_own(cluster):
    @tessera.remote
    def tree(depth):
        if depth == 0:
            return 1
        return sum(tessera.get([tree.remote(depth - 1), tree.remote(depth - 1)]))

    assert tessera.get(tree.remote(2)) == 4


def test_calling_a_remote_function_directly_is_a_type_error(cluster):
    with pytest.raises(TypeError, match=r"try 'square.remote\(\)'"):
        square(1)


def _nothing_submitted(monkeypatch, *names):
    """Makes the core's submit calls `names` fail the test if reached."""
    for name in names:
        def submitted(*args, _name=name, **kwargs):
            raise AssertionError(f"_core.{_name} was called")
        monkeypatch.setattr(tessera._core, name, submitted)


def test_wrong_arguments_are_a_type_error_at_the_call(cluster, monkeypatch):
    # Python's own binding message, as Ray raises it, before anything is submitted.
    _nothing_submitted(monkeypatch, "submit_task")
    with pytest.raises(TypeError, match="^missing a required argument: 'a'$"):
        add.remote()
    with pytest.raises(TypeError, match="^too many positional arguments$"):
        add.remote(1, 2, 3)
    with pytest.raises(TypeError, match="^got an unexpected keyword argument 'd'$"):
        add.remote(1, d=4)
    with pytest.raises(TypeError, match="^multiple values for argument 'a'$"):
        add.remote(1, a=2)
    with pytest.raises(TypeError, match="^too many positional arguments$"):
        square.options(name="sq").remote(1, 2)


def test_calls_that_bind_are_submitted(cluster):
    @tessera.remote
    def anything(*args, **kwargs):
        return len(args), sorted(kwargs)

    assert tessera.get(anything.remote(1, 2, x=3)) == (2, ["x"])
    assert tessera.get(add.remote(1, c=2)) == 3


def test_options_override_the_decorator(cluster):
    assert tessera.get(square.options(num_cpus=2, max_retries=0).remote(4)) == 16
    with pytest.raises(ValueError, match="Invalid option keyword bogus"):
        square.options(bogus=1)


def test_an_exception_is_raised_as_its_own_type_and_as_a_task_error(cluster):
    ref = fail.remote("boom")
    with pytest.raises(ValueError) as info:
        tessera.get(ref)
    error = info.value
    assert isinstance(error, exceptions.RayTaskError)
    assert isinstance(error, exceptions.TesseraTaskError)
    assert error.args == (error.cause,)
    assert isinstance(error.cause, ValueError) and str(error.cause) == "boom"
    with pytest.raises(exceptions.RayTaskError):
        tessera.get(ref)


def test_the_remote_traceback_names_the_task_and_the_raising_line(cluster):
    with pytest.raises(ValueError) as info:
        tessera.get(fail.remote("deep"))
    text = str(info.value)
    assert text.startswith("tessera::fail() (pid=")
    assert 'raise ValueError(text)' in text
    assert text.rstrip().endswith("ValueError: deep")
    assert "_private" not in text  # the runtime's own frames are dropped


def test_a_failed_argument_fails_the_task_with_the_cause(cluster):
    with pytest.raises(ValueError, match="upstream"):
        tessera.get(square.remote(fail.remote("upstream")))


def test_an_exception_in_a_nested_task_reaches_the_driver(cluster):
    @tessera.remote
    def outer():
        return tessera.get(fail.remote("inner"))

    with pytest.raises(ValueError, match="inner"):
        tessera.get(outer.remote())


def test_a_worker_killed_mid_task_is_reported_with_its_exit_cause(cluster):
    @tessera.remote(max_retries=0)
    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    with pytest.raises(exceptions.WorkerCrashedError) as info:
        tessera.get(die.remote())
    assert "SIGKILL" in str(info.value)


def test_a_killed_worker_is_retried_on_a_new_worker(cluster, tmp_path):
    marker = tmp_path / "attempted"

    @tessera.remote(max_retries=1)
    def die_once(path):
        if not os.path.exists(path):
            open(path, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return "second attempt"

    before = tessera._core.task_stats()["retries"]
    assert tessera.get(die_once.remote(str(marker))) == "second attempt"
    assert tessera._core.task_stats()["retries"] == before + 1


def test_a_get_timeout_raises_get_timeout_error(cluster):
    @tessera.remote
    def slow():
        import time
        time.sleep(30)

    ref = slow.remote()
    with pytest.raises(exceptions.GetTimeoutError):
        tessera.get(ref, timeout=0.2)
    with pytest.raises(TimeoutError):
        tessera.get(ref, timeout=0)


def test_worker_output_reaches_the_driver_with_the_worker_and_node(cluster):
    import textwrap
    result = cluster.python(textwrap.dedent("""
        import sys, tessera
        tessera.init(address="auto")
        @tessera.remote
        def talk():
            import os
            print("hello from a task")
            print("and its stderr", file=sys.stderr)
            return os.getpid()
        pid = tessera.get(talk.remote())
        tessera.shutdown()
        print("worker pid", pid)
    """))
    assert result.returncode == 0, result.stderr
    pid = result.stdout.strip().splitlines()[-1].split()[-1]
    assert f"(pid={pid}, node=cpu-" in result.stdout
    line = next(l for l in result.stdout.splitlines() if "hello from a task" in l)
    assert line.startswith(f"(pid={pid}, node=cpu-") and line.endswith(") hello from a task")
    assert any(l.startswith(f"(pid={pid}, ") and l.endswith("and its stderr")
               for l in result.stderr.splitlines())


class Flaky(Exception):
    pass


def test_retry_exceptions_runs_the_task_again_for_the_listed_exceptions(cluster, tmp_path):
    counter = tmp_path / "runs"

    @tessera.remote(max_retries=2, retry_exceptions=[Flaky])
    def flaky(path):
        with open(path, "a") as f:
            f.write("x")
        if len(open(path).read()) < 3:
            raise Flaky("not yet")
        return "third time"

    assert tessera.get(flaky.remote(str(counter))) == "third time"
    assert len(counter.read_text()) == 3

    other = tmp_path / "other"

    @tessera.remote(max_retries=2, retry_exceptions=[Flaky])
    def wrong_kind(path):
        with open(path, "a") as f:
            f.write("x")
        raise KeyError("not listed")

    with pytest.raises(KeyError):
        tessera.get(wrong_kind.remote(str(other)))
    assert len(other.read_text()) == 1  # not retried: not a Flaky

    again = tmp_path / "again"

    @tessera.remote(max_retries=1, retry_exceptions=True)
    def always(path):
        with open(path, "a") as f:
            f.write("x")
        raise ValueError("always")

    with pytest.raises(ValueError):
        tessera.get(always.remote(str(again)))
    assert len(again.read_text()) == 2  # the first run and one retry


@tessera.remote(num_returns=2)
def two_values(x):
    return x, x * 10


@tessera.remote
def write_marker(path):
    with open(path, "w") as f:
        f.write("ran")
    return "ignored"


def test_num_returns_gives_one_ref_per_returned_value(cluster):
    a, b = two_values.remote(3)
    assert tessera.get([a, b]) == [3, 30]
    # Each is an object of its own: one can be read, dropped or passed on without the other.
    del a
    assert tessera.get(square.remote(b)) == 900
    refs = first.options(num_returns=3).remote([[1, 2, 3]])
    assert isinstance(refs, list) and len(refs) == 3
    assert tessera.get(refs) == [1, 2, 3]


def test_large_returns_travel_through_the_store_one_object_each(cluster):
    import numpy as np

    @tessera.remote(num_returns=3)
    def arrays(n):
        return np.full(n, 1.0), "small", np.full(n, 2.0)

    for node in cluster.node_ids():
        strategy = tessera.util.scheduling_strategies.NodeAffinitySchedulingStrategy(node, False)
        big_a, small, big_b = arrays.options(scheduling_strategy=strategy).remote(50_000)
        assert tessera.get(small) == "small"
        assert float(tessera.get(big_a).sum()) == 50_000.0
        assert float(tessera.get(big_b).sum()) == 100_000.0


def test_num_returns_zero_gives_none_and_still_runs_the_task(cluster, tmp_path):
    marker = tmp_path / "ran"
    assert write_marker.options(num_returns=0).remote(str(marker)) is None
    import time
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.read_text() == "ran"


def test_a_wrong_number_of_returned_values_fails_every_return(cluster):
    refs = first.options(num_returns=2).remote([[1, 2, 3]])
    for ref in refs:
        with pytest.raises(ValueError, match=r"Task returned 3 objects, but num_returns=2\."):
            tessera.get(ref)
    with pytest.raises(ValueError, match="not a sequence, but num_returns=2"):
        tessera.get(first.options(num_returns=2).remote([5])[1])


def test_an_exception_fails_every_return_with_its_type(cluster):
    refs = fail.options(num_returns=2).remote("both")
    for ref in refs:
        with pytest.raises(ValueError, match="both"):
            tessera.get(ref)


def test_num_returns_is_checked_when_given(cluster):
    with pytest.raises(ValueError, match="num_returns must be an int between 0 and"):
        square.options(num_returns=-1)
    with pytest.raises(ValueError, match="num_returns='dynamic'"):
        square.options(num_returns="dynamic")


@tessera.remote
def raise_from(text):
    try:
        try:
            raise KeyError(text)
        except KeyError:
            raise OSError("while handling")  # chained as the context
    except OSError as e:
        raise ValueError("outer") from e  # chained as the cause


def test_an_exceptions_cause_chain_reaches_the_caller(cluster):
    with pytest.raises(ValueError, match="outer") as raised:
        tessera.get(raise_from.remote("innermost"))
    cause = raised.value.cause
    assert isinstance(cause.__cause__, OSError) and str(cause.__cause__) == "while handling"
    assert isinstance(cause.__cause__.__context__, KeyError)
    assert cause.__cause__.__context__.args == ("innermost",)
    # The remote traceback shows the chain too.
    assert "The above exception was the direct cause" in str(raised.value)

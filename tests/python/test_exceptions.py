"""Tests of tessera.exceptions: the dual task-error classes, remote traceback rendering,
pickling, and the mapping from core error kinds to exception classes."""

import os
import pickle

import pytest

from tessera import exceptions as E
from tessera._private import serialization


def raise_value_error():
    raise ValueError("boom")


def caught(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return e
    raise AssertionError("no exception")


def task_error(cause=None, **kw):
    cause = cause if cause is not None else caught(raise_value_error)
    text = E.format_remote_traceback(cause, "f", 1234, "10.0.0.1")
    return E.TesseraTaskError("f", text, cause, pid=1234, ip="10.0.0.1", **kw)


def test_instanceof_cause_is_caught_as_the_cause_and_as_a_task_error():
    error = task_error().as_instanceof_cause()
    with pytest.raises(ValueError):
        raise error
    with pytest.raises(E.TesseraTaskError):
        raise error
    assert isinstance(error, E.RayTaskError) and isinstance(error, E.RayError)
    assert type(error).__name__ == "TesseraTaskError(ValueError)"
    assert error.args == (error.cause,)
    assert repr(error) == "TesseraTaskError(ValueError)(ValueError('boom'))"


def test_instanceof_cause_reads_the_causes_attributes_and_reuses_its_class():
    class Detailed(Exception):
        def __init__(self, code):
            super().__init__(code)
            self.code = code

    first = task_error(Detailed(7)).as_instanceof_cause()
    assert first.code == 7
    assert type(task_error(Detailed(8)).as_instanceof_cause()) is type(first)


def test_str_is_the_rendered_traceback_with_the_cause_line():
    text = str(task_error().as_instanceof_cause())
    assert text.startswith("tessera::f() (pid=1234, ip=10.0.0.1)\n")
    assert "in raise_value_error" in text
    assert text.endswith("ValueError: boom")


def test_traceback_drops_private_frames_and_keeps_user_frames():
    private_file = os.path.join(os.path.dirname(E.__file__), "_private", "worker.py")
    namespace = {"user": raise_value_error}
    exec(compile("def run_task():\n    user()\n", private_file, "exec"), namespace)
    text = E.format_remote_traceback(caught(namespace["run_task"]), "f", 1, "ip")
    assert "Traceback (most recent call last)" not in text
    assert text.splitlines()[0] == "tessera::f() (pid=1, ip=ip)"
    assert "run_task" not in text and private_file not in text
    assert "raise_value_error" in text


def test_traceback_keeps_its_header_when_every_frame_is_private():
    private_file = os.path.join(os.path.dirname(E.__file__), "_private", "worker.py")
    namespace = {}
    source = (
        "def resolve():\n"
        "    try:\n"
        "        raise KeyError('x')\n"
        "    except KeyError as e:\n"
        "        return e\n"
    )
    exec(compile(source, private_file, "exec"), namespace)
    text = E.format_remote_traceback(namespace["resolve"](), "f", 1, "ip")
    assert text == "tessera::f() (pid=1, ip=ip)\nKeyError: 'x'\n"


def test_actor_traceback_header_names_the_actor():
    text = E.format_remote_traceback(caught(raise_value_error), "A.m", 1, "ip", "ab12", "A(3)")
    assert text.splitlines()[0] == "tessera::A.m() (pid=1, ip=ip, actor_id=ab12, repr=A(3))"


def test_chained_exceptions_get_a_header_per_traceback():
    def chained():
        try:
            raise_value_error()
        except ValueError as e:
            raise KeyError("k") from e

    text = E.format_remote_traceback(caught(chained), "f", 1, "ip")
    assert text.count("tessera::f() (pid=1, ip=ip)") == 2


def test_task_errors_pickle_round_trip():
    plain = task_error()
    again = pickle.loads(pickle.dumps(plain))
    assert type(again) is E.TesseraTaskError
    assert (again.function_name, again.pid, again.ip) == ("f", 1234, "10.0.0.1")
    assert str(again) == str(plain)

    dual = plain.as_instanceof_cause()
    dual_again = pickle.loads(pickle.dumps(dual))
    assert type(dual_again) is type(dual)
    assert isinstance(dual_again, ValueError)
    assert str(dual_again) == str(dual)


def test_task_error_survives_the_value_format():
    dual = task_error().as_instanceof_cause()
    again = serialization.deserialize(serialization.serialize(dual).to_bytes())
    assert type(again) is type(dual) and repr(again) == repr(dual)


def test_unsubclassable_cause_falls_back_to_a_plain_task_error():
    class Final(Exception):
        def __init_subclass__(cls, **kw):
            raise TypeError("Final cannot be subclassed")

    plain = task_error(Final("x"))
    result = plain.as_instanceof_cause()
    assert result is plain
    assert isinstance(result.cause, Final)


def test_tessera_error_causes_are_not_wrapped():
    plain = task_error(E.TaskCancelledError(error_message="stop"))
    assert plain.as_instanceof_cause() is plain


def test_get_timeout_error_is_a_timeout_error():
    assert issubclass(E.GetTimeoutError, TimeoutError)
    assert issubclass(E.GetTimeoutError, E.TesseraError)


def test_hierarchy_and_aliases():
    assert E.RayError is E.TesseraError
    assert E.RayActorError is E.TesseraActorError
    assert E.RaySystemError is E.TesseraSystemError
    assert issubclass(E.ActorDiedError, E.RayActorError)
    assert issubclass(E.ActorUnavailableError, E.RayActorError)
    for lost in (E.OwnerDiedError, E.ObjectFetchTimedOutError, E.ObjectFreedError):
        assert issubclass(lost, E.ObjectLostError)


CAUSE = "task f: its worker died: killed by signal 9 (SIGKILL)"
WORKER_DIED = "The worker died unexpectedly while executing this task."
ACTOR_DIED = "The actor died unexpectedly before finishing this task."
MAY_HAVE_RUN = "The task may or may not have been executed on the actor."
ALL_COPIES_LOST = "All copies of the object have been lost due to node failure."
PG_REMOVED = "The placement group corresponding to this {} has been removed."


@pytest.mark.parametrize(
    "kind, cls, text",
    [
        ("WORKER_CRASHED", E.WorkerCrashedError, f"{WORKER_DIED} {{m}}"),
        ("ACTOR_DIED", E.ActorDiedError, f"{ACTOR_DIED}\n{{m}}"),
        (
            "ACTOR_UNAVAILABLE",
            E.ActorUnavailableError,
            f"The actor is unavailable: {{m}}. {MAY_HAVE_RUN}",
        ),
        ("TASK_CANCELLED", E.TaskCancelledError, "{m}"),
        ("GET_TIMEOUT", E.GetTimeoutError, "{m}"),
        ("TASK_UNSCHEDULABLE", E.TaskUnschedulableError, "The task is not schedulable: {m}"),
        ("ACTOR_UNSCHEDULABLE", E.ActorUnschedulableError, "The actor is not schedulable: {m}"),
        (
            "OBJECT_LOST",
            E.ObjectLostError,
            f"Failed to retrieve the object.\n\n{ALL_COPIES_LOST} {{m}}",
        ),
        ("OWNER_DIED", E.OwnerDiedError, None),
        ("TASK_PG_REMOVED", E.TaskPlacementGroupRemoved, f"{PG_REMOVED.format('task')} {{m}}"),
        ("ACTOR_PG_REMOVED", E.ActorPlacementGroupRemoved, f"{PG_REMOVED.format('Actor')} {{m}}"),
        ("OBJECT_STORE_FULL", E.ObjectStoreFullError, None),
        ("INVALID", ValueError, "{m}"),
        ("SYSTEM", E.TesseraSystemError, "System error: {m}"),
        ("SOMETHING_NEW", E.TesseraSystemError, "System error: {m}"),
        ("TASK_ERROR", E.TesseraTaskError, "{m}"),
    ],
)
def test_from_core_error_kinds(kind, cls, text):
    error = E.from_core_error(kind, CAUSE, None, "")
    assert type(error) is cls
    if text is not None:
        assert str(error) == text.format(m=CAUSE)
    assert CAUSE in str(error)
    assert type(pickle.loads(pickle.dumps(error))) is cls
    assert str(pickle.loads(pickle.dumps(error))) == str(error)


def test_from_core_error_rebuilds_the_workers_exception():
    data = serialization.serialize(task_error()).to_bytes()
    error = E.from_core_error("TASK_ERROR", "task f raised", data, "")
    assert isinstance(error, ValueError) and isinstance(error, E.TesseraTaskError)
    assert str(error).endswith("ValueError: boom")


def test_from_core_error_for_a_failed_constructor_is_actor_died():
    data = serialization.serialize(task_error()).to_bytes()
    error = E.from_core_error("ACTOR_DIED", "constructor raised", data, "")
    assert type(error) is E.ActorDiedError and error.actor_init_failed
    assert str(error).startswith("The actor died because of an error raised in its creation task")


def test_from_core_error_with_an_undeserializable_exception():
    error = E.from_core_error("TASK_ERROR", "task f raised", b"garbage", "Traceback text")
    assert type(error) is E.TesseraError
    assert str(error).startswith("task f raised (the exception could not be deserialized: ")
    assert str(error).endswith("\nTraceback text")


@pytest.mark.parametrize(
    "error",
    [
        E.ActorDiedError(actor_id="ab12", class_name="Counter", pid=7, error_message="killed"),
        E.ActorUnavailableError("restarting", "ab12"),
        E.ObjectLostError("ff00", None, "f.py:3"),
        E.OwnerDiedError("ff00"),
        E.TaskCancelledError("t1"),
        E.CrossLanguageError("CPP", "std::runtime_error: x"),
        E.RuntimeEnvSetupError("pip failed"),
        E.OutOfMemoryError("node n1 is out of memory"),
        E.NodeDiedError("node n1 died"),
        E.TesseraSystemError("lost the head", "tb"),
    ],
    ids=lambda error: type(error).__name__,
)
def test_errors_pickle_with_their_text(error):
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error)
    assert str(again) == str(error)


def test_actor_died_lists_the_actors_fields():
    error = E.ActorDiedError(actor_id="ab12", class_name="Counter", pid=7, error_message="killed")
    assert str(error) == (
        "The actor died unexpectedly before finishing this task.\n"
        "\tclass_name: Counter\n\tactor_id: ab12\n\tpid: 7\nkilled"
    )
    assert error.actor_id == "ab12" and not error.actor_init_failed

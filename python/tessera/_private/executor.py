"""Runs the tasks a Python worker is pushed: loads the function or class from its code ref
(cached per object id), decodes the arguments, calls it, and answers the core with the
serialized result or the raised exception (a TesseraTaskError holding the cause and the remote
traceback, so the caller re-raises it with its own type).

Plain tasks and actors with max_concurrency 1 run on the main thread, in order; an actor allowing
more runs its calls on a pool of that many threads; an async actor's coroutines run on one event
loop thread, each waited for by a pool thread (so up to max_concurrency are in flight).

Threading: `run` is called from the main thread; results are answered from whichever thread ran
the call.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import inspect
import os
import socket
import sys
import threading
from typing import Any, Dict, Optional

from tessera import _core
from tessera import exceptions
from tessera._private import arguments, serialization

_node_ip: Optional[str] = None


def node_ip() -> str:
    global _node_ip
    if _node_ip is None:
        try:
            _node_ip = socket.gethostbyname(socket.gethostname())
        except OSError:
            _node_ip = "127.0.0.1"
    return _node_ip


class _CurrentTask(threading.local):
    task_id: Optional[bytes] = None
    name: Optional[str] = None


current = _CurrentTask()


class _Placement:
    """The placement group this worker's task or actor runs in ("" none) and whether what it
    submits with no scheduling strategy goes there too: set by each task and actor creation (a
    worker leased in a group runs only that group's work)."""

    group: str = ""
    capture_child_tasks: bool = False


placement = _Placement()
# The worker's Executor (set by worker_main; None in a driver).
active: Optional["Executor"] = None


class Executor:
    def __init__(self) -> None:
        self._code: Dict[bytes, Any] = {}
        self._instance: Any = None
        self._actor_id: Optional[bytes] = None
        self._class_name: str = ""
        self._pool: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None

    def actor_id(self) -> Optional[bytes]:
        return self._actor_id

    def _load(self, task: "_core.Task") -> Any:
        ref = task.code
        if ref is None:
            raise ValueError(f"task {task.function} carries no code")
        key = ref.binary()
        code = self._code.get(key)
        if code is None:
            code = serialization.deserialize(_core.get([ref])[0])
            self._code[key] = code
        return code

    def run(self, task: "_core.Task") -> None:
        if task.kind == _core.ACTOR_METHOD and self._pool is not None:
            self._pool.submit(self._run, task)
        else:
            self._run(task)

    def _run(self, task: "_core.Task") -> None:
        current.task_id = task.task_id
        current.name = task.function
        if task.kind != _core.ACTOR_METHOD:
            placement.group = task.placement_group
            placement.capture_child_tasks = task.capture_child_tasks
        result: Any = None
        error: Optional[BaseException] = None
        try:
            result = self._execute(task)
        except BaseException as e:  # noqa: B036 - the caller gets every exception
            error = e
        finally:
            # From here on a cancel no longer interrupts this task (its answer is on the way).
            _core.task_returned(task)
            current.task_id = None
            current.name = None
        if isinstance(error, SystemExit) and task.kind == _core.ACTOR_METHOD:
            self._answer_surely(task, lambda: self._answer(task, None))
            _flush_and_exit(error.code if isinstance(error.code, int) else 0)
        if error is not None:
            self._answer_surely(task, lambda: self._fail(task, error))
        else:
            self._answer_surely(task, lambda: self._answer(task, result))

    @staticmethod
    def _answer_surely(task: "_core.Task", answer) -> None:
        """Runs `answer`; a cancel's interrupt that lands while it runs (sent just before the task
        returned) must not leave the task unanswered, so it is run again, and in the end the task
        is answered as cancelled."""
        for _ in range(3):
            try:
                answer()
                return
            except KeyboardInterrupt:
                continue
            except RuntimeError as e:
                if "already answered" in str(e):
                    return
                raise
        _core.task_failed(task, "TaskCancelledError", "cancelled", b"", "")

    def _execute(self, task: "_core.Task") -> Any:
        if task.kind == _core.TASK:
            function = self._load(task)
            args, kwargs = arguments.decode(task.args)
            return function(*args, **kwargs)
        if task.kind == _core.ACTOR_CREATE:
            cls = self._load(task)
            args, kwargs = arguments.decode(task.args)
            self._class_name = cls.__name__
            self._actor_id = task.actor_id
            self._instance = cls(*args, **kwargs)
            if task.max_concurrency > 1 and self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(task.max_concurrency)
            if _has_coroutines(cls) and self._loop is None:
                # An async actor: its coroutines run on one event loop, up to max_concurrency
                # at once (each waited for by one pool thread).
                self._loop = asyncio.new_event_loop()
                threading.Thread(target=self._loop.run_forever, name="tessera-actor-loop",
                                 daemon=True).start()
            return None
        return self._call_method(task)

    def _call_method(self, task: "_core.Task") -> Any:
        name = task.function
        if name == "__ray_terminate__":
            # Ray's graceful stop, after the calls before it: the exit handlers run here, and
            # the owner, once answered, ends the actor for good (no restart).
            atexit._run_exitfuncs()
            return None
        if self._instance is None:
            raise RuntimeError("the actor has no instance (its constructor did not run here)")
        args, kwargs = arguments.decode(task.args)
        result = getattr(self._instance, name)(*args, **kwargs)
        if inspect.iscoroutine(result):
            if self._loop is None:
                result.close()
                raise TypeError(f"{self._class_name}.{name} is a coroutine function, but the "
                                "actor has no event loop")
            result = asyncio.run_coroutine_threadsafe(result, self._loop).result()
        return result

    def _answer(self, task: "_core.Task", result: Any) -> None:
        try:
            serialized = serialization.serialize(result)
        except Exception as e:
            self._fail(task, e)
            return
        _core.task_done(task, serialized.parts)

    def _fail(self, task: "_core.Task", error: BaseException) -> None:
        name = task.function
        actor_id = self._actor_id.hex() if self._actor_id else None
        actor_repr = f"{self._class_name}" if actor_id else None
        display = f"{self._class_name}.{name}" if task.kind == _core.ACTOR_METHOD else name
        traceback_text = exceptions.format_remote_traceback(
            error, display, os.getpid(), node_ip(), actor_id, actor_repr)
        # A task error from a task this one waited for keeps its original cause (so the caller
        # can still catch its class); the traceback shows both tasks.
        cause = error.cause if isinstance(error, exceptions.TesseraTaskError) else error
        wrapped = exceptions.TesseraTaskError(display, traceback_text, cause, pid=os.getpid(),
                                              ip=node_ip(), actor_repr=actor_repr,
                                              actor_id=actor_id)
        try:
            payload = serialization.serialize(wrapped).to_bytes()
        except Exception as e:
            # The cause cannot be pickled: its text travels instead.
            stand_in = exceptions.TesseraError(
                f"{type(cause).__name__}: {cause} (the exception could not be serialized: {e})")
            wrapped = exceptions.TesseraTaskError(display, traceback_text, stand_in,
                                                  pid=os.getpid(), ip=node_ip())
            payload = serialization.serialize(wrapped).to_bytes()
        _core.task_failed(task, type(error).__name__, str(error), payload, traceback_text,
                          _retryable(task, cause))


def _has_coroutines(cls: type) -> bool:
    return any(inspect.iscoroutinefunction(member)
               for _, member in inspect.getmembers(cls, inspect.isfunction))


def _retryable(task: "_core.Task", error: BaseException) -> bool:
    """Whether the task's retry_exceptions asks to run it again after `error`."""
    if not task.retry_exceptions or isinstance(error, (KeyboardInterrupt, SystemExit)):
        return False
    wanted = set(task.retry_exception_types)
    return not wanted or any(f"{c.__module__}.{c.__qualname__}" in wanted
                             for c in type(error).__mro__)


def _flush_and_exit(code: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
        if serialized.contained_refs:
            # The caller reads them from this process, which owns them: they outlive this
            # task's own references (until the process ends: borrowers are not counted yet).
            _core.keep_owned(serialized.contained_refs)

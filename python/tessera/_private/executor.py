"""Runs the tasks a Python worker is pushed: loads the function or class from its code ref
(cached per object id), decodes the arguments, calls it, and answers the core with the
serialized result or the raised exception (a TesseraTaskError holding the cause and the remote
traceback, so the caller re-raises it with its own type).

Plain tasks and actors with max_concurrency 1 (and no concurrency groups) run on the main
thread, in order. A threaded actor runs each call on its concurrency group's pool: the default
group's holds max_concurrency threads, each named group (`concurrency_groups={"io": 2}`) its own
limit's. An async actor (one with a coroutine method) runs every call on its one event loop
thread, coroutines interleaved: each group admits up to its limit in flight (an asyncio
semaphore on the loop), and no thread waits for a call in flight. A call's group is the one it
was submitted with (`.options(concurrency_group=...)`), else the one its method was declared
with (`@tessera.method(concurrency_group=...)`), else the default group; a group the class did
not declare fails the call with a ValueError naming the declared ones.

Threading: `run` is called from the main thread; results are answered from whichever thread ran
the call (a pool's, or the event loop's).
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


def _report(task: "_core.Task", index: int, item: Any) -> bool:
    """Sends value `index` of a streaming generator to its caller, once it has it; False when
    the caller has let the generator go (nothing more is wanted)."""
    serialized = serialization.serialize(item)
    try:
        # The refs inside it are counted as the caller's before it has them.
        _core.report_generator_item(task, index, serialized.parts, serialized.contained_refs)
    except _core.CoreError as e:
        if e.args[0] == "NOT_FOUND":
            return False
        raise
    return True


def _not_a_generator(task: "_core.Task", result: Any) -> TypeError:
    return TypeError(f"{task.function} was called with num_returns='streaming' but returned a "
                     f"{type(result).__name__}, not a generator: yield its values instead")


def _stream(task: "_core.Task", result: Any) -> None:
    """A streaming generator task: each value it yields goes to the caller as it is made."""
    if not inspect.isgenerator(result):
        if inspect.isasyncgen(result):
            raise TypeError(f"{task.function} is an async generator: it runs on an async actor's "
                            "event loop only")
        raise _not_a_generator(task, result)
    for index, item in enumerate(result):
        if not _report(task, index, item):
            result.close()
            return


async def _stream_on_loop(task: "_core.Task", result: Any) -> None:
    """The same on an async actor's event loop: an async generator's values, or a plain one's;
    each report waits off the loop, so other calls go on meanwhile."""
    loop = asyncio.get_running_loop()
    if inspect.isasyncgen(result):
        index = 0
        async for item in result:
            if not await loop.run_in_executor(None, _report, task, index, item):
                await result.aclose()
                return
            index += 1
        return
    if not inspect.isgenerator(result):
        raise _not_a_generator(task, result)
    for index, item in enumerate(result):
        if not await loop.run_in_executor(None, _report, task, index, item):
            result.close()
            return


def _split_returns(result: Any, count: int) -> list:
    """The `count` values of a task with num_returns=count: the sequence it returned."""
    try:
        values = list(result)
    except TypeError:
        raise ValueError(f"Task returned a {type(result).__name__}, which is not a sequence, "
                         f"but num_returns={count}.") from None
    if len(values) != count:
        raise ValueError(f"Task returned {len(values)} objects, but num_returns={count}.")
    return values


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
        # Threaded actors: a pool per concurrency group ("" the default group); none when the
        # actor runs its calls one at a time on the main thread.
        self._pools: Dict[str, concurrent.futures.ThreadPoolExecutor] = {}
        # Async actors: the loop, and each group's limit of calls in flight on it.
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._limits: Dict[str, asyncio.Semaphore] = {}
        # {method: the concurrency group `@tessera.method` declared it in}.
        self._declared_groups: Dict[str, str] = {}

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
        if task.kind == _core.ACTOR_METHOD and (self._loop is not None or self._pools):
            try:
                group = self._group_of(task)
            except ValueError as e:
                self._answer_surely(task, lambda: self._fail(task, e))
                return
            if self._loop is not None:
                asyncio.run_coroutine_threadsafe(self._run_on_loop(task, self._limits[group]),
                                                 self._loop)
            else:
                self._pools[group].submit(self._run, task)
        else:
            self._run(task)

    def _group_of(self, task: "_core.Task") -> str:
        """The concurrency group the call runs in ("" the default group)."""
        group = task.concurrency_group
        if not group and task.function in self._declared_groups:
            group = self._declared_groups[task.function]
        known = self._limits if self._loop is not None else self._pools
        if group and group not in known:
            raise ValueError(
                f"{self._class_name}.{task.function}: concurrency group '{group}' is not "
                f"defined by the actor (its groups: {sorted(g for g in known if g)})")
        return group

    def _run(self, task: "_core.Task") -> None:
        result: Any = None
        error: Optional[BaseException] = None
        current.task_id = task.task_id
        current.name = task.function
        _core.set_running_task(task.task_id)
        if task.kind != _core.ACTOR_METHOD:
            placement.group = task.placement_group
            placement.capture_child_tasks = task.capture_child_tasks
        try:
            result = self._execute(task)
            if task.streaming:
                _stream(task, result)
                result = None
        except BaseException as e:  # noqa: B036 - the caller gets every exception
            error = e
        finally:
            # From here on a cancel no longer interrupts this task (its answer is on the way).
            _core.task_returned(task)
            _core.set_running_task(b"")
            current.task_id = None
            current.name = None
        self._finish(task, result, error)

    async def _run_on_loop(self, task: "_core.Task", limit: asyncio.Semaphore) -> None:
        """An async actor's call: waits for its group's room, then runs (a coroutine method
        awaited, a plain one called) on the loop."""
        result: Any = None
        error: Optional[BaseException] = None
        async with limit:
            try:
                result = self._call_method(task)
                if inspect.isawaitable(result):
                    result = await result
                if task.streaming:
                    await _stream_on_loop(task, result)
                    result = None
            except BaseException as e:  # noqa: B036 - the caller gets every exception
                error = e
            finally:
                _core.task_returned(task)
        self._finish(task, result, error)

    def _finish(self, task: "_core.Task", result: Any, error: Optional[BaseException]) -> None:
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
            self._declared_groups = _declared_groups(cls)
            self._start_groups(task, _has_coroutines(cls))
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
        if inspect.iscoroutine(result) and self._loop is None:
            result.close()
            raise TypeError(f"{self._class_name}.{name} is a coroutine function, but the "
                            "actor has no event loop")
        return result

    def _start_groups(self, task: "_core.Task", is_async: bool) -> None:
        """The actor's concurrency groups, once (a restart is a new process): the default
        group's limit is max_concurrency."""
        if self._loop is not None or self._pools:
            return
        limits = {"": max(1, task.max_concurrency), **task.concurrency_groups}
        if is_async:
            self._limits = {group: asyncio.Semaphore(limit) for group, limit in limits.items()}
            self._loop = asyncio.new_event_loop()
            threading.Thread(target=self._loop.run_forever, name="tessera-actor-loop",
                             daemon=True).start()
        elif len(limits) > 1 or limits[""] > 1:
            self._pools = {
                group: concurrent.futures.ThreadPoolExecutor(
                    limit, thread_name_prefix=f"tessera-actor-{group or 'default'}")
                for group, limit in limits.items()}

    def _answer(self, task: "_core.Task", result: Any) -> None:
        count = task.num_returns
        try:
            values = [result] if count == 1 else _split_returns(result, count)
            serialized = [serialization.serialize(value) for value in values]
        except Exception as e:
            self._fail(task, e)
            return
        # The refs inside the results are counted as the caller's (borrowed) before it has them.
        if count == 1:
            _core.task_done(task, serialized[0].parts, serialized[0].contained_refs)
        else:
            _core.task_done_returns(task, [one.parts for one in serialized],
                                    [one.contained_refs for one in serialized])

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


def _declared_groups(cls: type) -> Dict[str, str]:
    """{method name: the concurrency group `@tessera.method` declared it in}."""
    declared = {}
    for name, member in inspect.getmembers(cls, callable):
        group = (getattr(member, "__tessera_method_options__", None) or {}).get(
            "concurrency_group")
        if group:
            declared[name] = group
    return declared


def _has_coroutines(cls: type) -> bool:
    """An async actor: one with async methods or async generator methods (as Ray's)."""
    return any(inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member)
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

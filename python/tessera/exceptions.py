"""Tessera's exception classes, named and worded as Ray's (`ray.exceptions`), each with its Ray
name as an alias (RayError = TesseraError, ...), plus the two helpers the runtime uses:

  format_remote_traceback  renders a task's exception on the worker, with a
                           "tessera::f() (pid=..., ip=...)" header and tessera's own frames dropped;
  from_core_error          turns a core error (kind, message, serialized exception) into the
                           exception `get` raises.

TesseraTaskError.as_instanceof_cause() returns an instance of a class made on the fly with bases
(TesseraTaskError, type(cause)), so `except ValueError` and `except TesseraTaskError` both catch
a task's ValueError. Such classes are cached per cause type (never freed) and pickle by rebuilding
from a plain TesseraTaskError.

Threading: the class cache is filled under a lock; everything else is pure. Cost: nothing at
import; from_core_error deserializes one value.
"""

from __future__ import annotations

import functools
import os
import re
import socket
import threading
import traceback
from typing import Any, Optional

_PRIVATE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_private") + os.sep


class TesseraError(Exception):
    """The root of all tessera exceptions."""


class CrossLanguageError(TesseraError):
    """Raised from code in another language."""

    def __init__(self, language: str, formatted_exception: str) -> None:
        super().__init__(language, formatted_exception)
        self.language = language
        self.formatted_exception = formatted_exception

    def __str__(self) -> str:
        return f"An exception raised from {self.language}:\n{self.formatted_exception}"


class _StandardTextError(TesseraError):
    """An error whose text is a fixed sentence, then the core's cause when there is one."""

    _text = ""
    _separator = " "

    def __init__(self, error_message: Optional[str] = None) -> None:
        super().__init__(error_message)
        self.error_message = error_message

    def __str__(self) -> str:
        if not self.error_message:
            return self._text
        return f"{self._text}{self._separator}{self.error_message}"


class TaskCancelledError(TesseraError):
    """The task was cancelled (tessera.cancel)."""

    def __init__(self, task_id: Optional[str] = None, error_message: Optional[str] = None) -> None:
        super().__init__(task_id, error_message)
        self.task_id = task_id
        self.error_message = error_message

    def __str__(self) -> str:
        text = f"Task: {self.task_id} was cancelled. " if self.task_id else ""
        return text + (self.error_message or "")


@functools.lru_cache(maxsize=1)
def _node_ip() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def _traceback_header(
    function_name: str, pid: Any, ip: Any, actor_id: Any = None, actor_repr: Any = None
) -> str:
    header = f"tessera::{function_name}() (pid={pid}, ip={ip}"
    if actor_repr is not None:
        header += f", actor_id={actor_id}, repr={actor_repr}"
    return header + ")"


def _drop_private_frames(exc_info: traceback.TracebackException) -> None:
    seen = set()
    pending = [exc_info]
    while pending:
        te = pending.pop()
        if te is None or id(te) in seen:
            continue
        seen.add(id(te))
        te.stack = traceback.StackSummary.from_list(
            [frame for frame in te.stack if not frame.filename.startswith(_PRIVATE_DIR)]
        )
        pending += [te.__cause__, te.__context__]


def format_remote_traceback(
    exc: BaseException,
    function_name: str,
    pid: Any,
    ip: Any,
    actor_id: Any = None,
    actor_repr: Any = None,
) -> str:
    """`traceback.format_exception(exc)` with each "Traceback (most recent call last):" line
    replaced by "tessera::f() (pid=..., ip=...)" (actors add ", actor_id=..., repr=...") and the
    frames of tessera's _private package dropped. The text starts with the header even when
    no frame is left."""
    exc_info = traceback.TracebackException.from_exception(exc)
    _drop_private_frames(exc_info)
    header = _traceback_header(function_name, pid, ip, actor_id, actor_repr) + "\n"
    text = "".join(
        header if line == "Traceback (most recent call last):\n" else line
        for line in exc_info.format()
    )
    return text if text.startswith(header) else header + text


def _chain_links(error: BaseException, limit: int = 16) -> list:
    """The exceptions chained below `error` (each the __cause__, else the unsuppressed
    __context__, of the one before), as (exception, is_cause) pairs, up to the first that cannot
    be pickled."""
    import pickle

    links: list = []
    seen = {id(error)}
    current = error
    while len(links) < limit:
        is_cause = current.__cause__ is not None
        following = current.__cause__ if is_cause else (
            None if current.__suppress_context__ else current.__context__)
        if following is None or id(following) in seen:
            break
        try:
            pickle.dumps(following)
        except Exception:
            break
        links.append((following, is_cause))
        seen.add(id(following))
        current = following
    return links


def _rebuild_task_error(fields: tuple, links: list) -> "TesseraTaskError":
    error = TesseraTaskError(*fields)
    current = error.cause
    for following, is_cause in links:
        if is_cause:
            current.__cause__ = following
        else:
            current.__context__ = following
        current = following
    return error


class TesseraTaskError(TesseraError):
    """User code raised inside a task: `cause` is the exception, `traceback_str` its rendered
    remote traceback (format_remote_traceback)."""

    def __init__(
        self,
        function_name: str,
        traceback_str: str,
        cause: BaseException,
        proctitle: Optional[str] = None,
        pid: Optional[int] = None,
        ip: Optional[str] = None,
        actor_repr: Optional[str] = None,
        actor_id: Optional[str] = None,
    ) -> None:
        self.function_name = function_name
        self.traceback_str = traceback_str
        self.cause = cause
        self.proctitle = proctitle or f"tessera::{function_name}"
        self.pid = pid or os.getpid()
        self.ip = ip or _node_ip()
        self.actor_repr = actor_repr
        self.actor_id = actor_id
        self.args = (function_name, traceback_str, cause, self.proctitle, self.pid, self.ip)

    def _fields(self) -> tuple:
        return (
            self.function_name,
            self.traceback_str,
            self.cause,
            self.proctitle,
            self.pid,
            self.ip,
            self.actor_repr,
            self.actor_id,
        )

    def __reduce__(self) -> tuple:
        # The cause's chain (`raise ... from e`, or an exception raised while handling another)
        # travels with it: pickle keeps neither __cause__ nor __context__.
        return (_rebuild_task_error, (self._fields(), _chain_links(self.cause)))

    def __str__(self) -> str:
        text = self.traceback_str.rstrip("\n")
        if text:
            return text
        header = _traceback_header(
            self.function_name, self.pid, self.ip, self.actor_id, self.actor_repr
        )
        return f"{header}\n{type(self.cause).__name__}: {self.cause}"

    def as_instanceof_cause(self) -> "TesseraTaskError":
        """An exception that is both a TesseraTaskError and an instance of the cause's class
        (args == (cause,), other attributes read from the cause). Returns self when the cause
        is a tessera error, already a base of TesseraTaskError, or its class can't be
        subclassed."""
        cause_type = type(self.cause)
        if issubclass(TesseraTaskError, cause_type) or issubclass(cause_type, TesseraError):
            return self
        dual_type = _dual_type(cause_type)
        if dual_type is None:
            return self
        try:
            dual = dual_type(self.cause)
        except TypeError:
            return self
        dual.__dict__.update(self.__dict__)
        dual.args = (self.cause,)
        return dual


class _TaskErrorAsCause:
    """Methods of the classes as_instanceof_cause makes (mixed in before TesseraTaskError)."""

    def __init__(self, cause: BaseException) -> None:
        self.cause = cause
        self.args = (cause,)

    def __getattr__(self, name: str) -> Any:
        cause = self.__dict__.get("cause")
        if cause is None:
            raise AttributeError(name)
        return getattr(cause, name)

    def __reduce__(self) -> tuple:
        return (_rebuild_as_cause, self._fields())


def _rebuild_as_cause(*fields: Any) -> TesseraTaskError:
    return TesseraTaskError(*fields).as_instanceof_cause()


_dual_types: dict = {}  # cause type -> its dual class, or None when it can't be subclassed
_dual_types_lock = threading.Lock()


def _dual_type(cause_type: type) -> Optional[type]:
    with _dual_types_lock:
        if cause_type in _dual_types:
            return _dual_types[cause_type]
        name = f"TesseraTaskError({cause_type.__name__})"
        try:
            dual = type(
                name,
                (_TaskErrorAsCause, TesseraTaskError, cause_type),
                {"__module__": __name__, "__qualname__": name},
            )
        except TypeError:
            dual = None
        _dual_types[cause_type] = dual
        return dual


class WorkerCrashedError(_StandardTextError):
    """The worker died while running the task (retries spent), or the task was force-cancelled."""

    _text = "The worker died unexpectedly while executing this task."


class TesseraActorError(TesseraError):
    """The actor failed before finishing the task: ActorDiedError or ActorUnavailableError."""

    BASE_ERROR_MSG = "The actor experienced an error before finishing this task."

    def __init__(
        self,
        actor_id: Optional[str] = None,
        error_msg: str = BASE_ERROR_MSG,
        actor_init_failed: bool = False,
        preempted: bool = False,
    ) -> None:
        super().__init__(error_msg)
        self.actor_id = actor_id
        self.error_msg = error_msg
        self._actor_init_failed = actor_init_failed
        self._preempted = preempted

    @property
    def actor_init_failed(self) -> bool:
        return self._actor_init_failed

    @property
    def preempted(self) -> bool:
        return self._preempted

    def __str__(self) -> str:
        return self.error_msg


class ActorDiedError(TesseraActorError):
    """The actor is dead: killed, out of restarts, or its constructor raised (`cause` is then
    the constructor's TesseraTaskError)."""

    BASE_ERROR_MSG = "The actor died unexpectedly before finishing this task."

    def __init__(
        self,
        cause: Optional[TesseraTaskError] = None,
        *,
        actor_id: Optional[str] = None,
        class_name: Optional[str] = None,
        pid: Optional[int] = None,
        name: Optional[str] = None,
        namespace: Optional[str] = None,
        ip: Optional[str] = None,
        error_message: Optional[str] = None,
    ) -> None:
        if isinstance(cause, TesseraTaskError):
            super().__init__(
                actor_id or cause.actor_id,
                f"The actor died because of an error raised in its creation task, {cause}",
                actor_init_failed=True,
            )
            return
        if error_message and error_message.startswith(self.BASE_ERROR_MSG):
            # The core's text is Ray's whole message already: the actor's lines, then the cause.
            found = re.search(r"^\tactor_id: (\S+)$", error_message, re.MULTILINE)
            super().__init__(actor_id or (found.group(1) if found else None), error_message)
            return
        lines = [self.BASE_ERROR_MSG]
        for label, value in (
            ("class_name", class_name),
            ("actor_id", actor_id),
            ("pid", pid),
            ("name", name),
            ("namespace", namespace),
            ("ip", ip),
        ):
            if value:
                lines.append(f"\t{label}: {value}")
        if error_message:
            lines.append(error_message)
        super().__init__(actor_id, "\n".join(lines))


class ActorUnavailableError(TesseraActorError):
    """The actor can't be reached now (restarting, or its node is unreachable); it may come
    back."""

    def __init__(self, error_message: str, actor_id: Optional[str] = None) -> None:
        actor = f"The actor {actor_id}" if actor_id else "The actor"
        super().__init__(
            actor_id,
            f"{actor} is unavailable: {error_message}. "
            "The task may or may not have been executed on the actor.",
        )


class TesseraSystemError(TesseraError):
    """Tessera itself failed (a core error of no other kind)."""

    def __init__(self, client_exc: Any, traceback_str: Optional[str] = None) -> None:
        super().__init__(client_exc)
        self.client_exc = client_exc
        self.traceback_str = traceback_str

    def __str__(self) -> str:
        text = f"System error: {self.client_exc}"
        if self.traceback_str:
            text += f"\ntraceback: {self.traceback_str}"
        return text


class ObjectStoreFullError(_StandardTextError):
    """The object store is full of objects still in scope."""

    _text = (
        "The local object store is full of objects that are still in scope and cannot be evicted."
    )


class _MessageError(TesseraError):
    """An error whose text is the message it was given."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class OutOfMemoryError(_MessageError):
    """The node ran out of memory and the worker running the task was killed."""


class NodeDiedError(_MessageError):
    """The node is dead or unreachable."""


class ObjectLostError(TesseraError):
    """The object's value is gone from the cluster (node failure, owner death, ...)."""

    def __init__(
        self,
        object_ref_hex: str = "",
        owner_address: Any = None,
        call_site: str = "",
        *,
        error_message: Optional[str] = None,
    ) -> None:
        super().__init__(object_ref_hex)
        self.object_ref_hex = object_ref_hex
        self.owner_address = owner_address
        self.call_site = call_site
        self.error_message = error_message

    _reason = "All copies of the object have been lost due to node failure."

    def __str__(self) -> str:
        if self.object_ref_hex:
            text = f"Failed to retrieve object {self.object_ref_hex}."
        else:
            text = "Failed to retrieve the object."
        if self.call_site:
            text += f" The ObjectRef was created at: {self.call_site}"
        text += f"\n\n{self._reason}"
        if self.error_message:
            text += f" {self.error_message}"
        return text


class OwnerDiedError(ObjectLostError):
    """The process that owned the object (made it by .remote() or put) has exited."""

    _reason = (
        "The object's owner has exited. This is the Python worker that first created the "
        "ObjectRef via `.remote()` or `tessera.put()`."
    )


class ObjectFetchTimedOutError(ObjectLostError):
    """No location of the object was found in time."""

    _reason = "Fetch for the object timed out because no locations were found for the object."


class ObjectFreedError(ObjectLostError):
    """The object was freed explicitly while still referenced."""

    _reason = "The object was manually freed using the internal `free` call."


class GetTimeoutError(TesseraError, TimeoutError):
    """`get` timed out."""


class AsyncioActorExit(TesseraError):
    """An asyncio actor exits on purpose (exit_actor)."""


class PendingCallsLimitExceeded(TesseraError):
    """An actor handle has max_pending_calls calls in flight."""


class RuntimeEnvSetupError(_StandardTextError):
    """The task's runtime environment could not be set up."""

    _text = "Failed to set up runtime environment."
    _separator = "\n"


class TaskPlacementGroupRemoved(_StandardTextError):
    """The task's placement group was removed."""

    _text = "The placement group corresponding to this task has been removed."


class ActorPlacementGroupRemoved(ActorDiedError):
    """The actor's placement group was removed: the actor is dead (not restarted), so this is an
    ActorDiedError too, and its text says why."""

    _text = "The placement group corresponding to this Actor has been removed."

    def __init__(self, error_message: Optional[str] = None,
                 actor_id: Optional[str] = None) -> None:
        TesseraActorError.__init__(
            self, actor_id, f"{self._text} {error_message}" if error_message else self._text)
        self.error_message = error_message


class TaskUnschedulableError(_StandardTextError):
    """No node can ever run the task (e.g. hard affinity to a dead node)."""

    _text = "The task is not schedulable"
    _separator = ": "


class ActorUnschedulableError(_StandardTextError):
    """No node can ever run the actor."""

    _text = "The actor is not schedulable"
    _separator = ": "


def _undeserializable(message: str, why: str, traceback: str) -> TesseraError:
    text = f"{message} (the exception could not be deserialized: {why})"
    return TesseraError(f"{text}\n{traceback}" if traceback else text)


RayError = TesseraError
RayTaskError = TesseraTaskError
RayActorError = TesseraActorError
RaySystemError = TesseraSystemError

# Core error kind -> the exception for its one-line message (anything else: TesseraSystemError).
_KIND_ERRORS = {
    "WORKER_CRASHED": WorkerCrashedError,
    "ACTOR_DIED": lambda message: ActorDiedError(error_message=message),
    "ACTOR_UNAVAILABLE": ActorUnavailableError,
    "TASK_CANCELLED": lambda message: TaskCancelledError(error_message=message),
    "GET_TIMEOUT": GetTimeoutError,
    "TASK_UNSCHEDULABLE": TaskUnschedulableError,
    "ACTOR_UNSCHEDULABLE": ActorUnschedulableError,
    "OBJECT_LOST": lambda message: ObjectLostError(error_message=message),
    "OWNER_DIED": lambda message: OwnerDiedError(error_message=message),
    "TASK_PG_REMOVED": TaskPlacementGroupRemoved,
    "ACTOR_PG_REMOVED": ActorPlacementGroupRemoved,
    "OBJECT_STORE_FULL": ObjectStoreFullError,
    "INVALID": ValueError,
}


def from_core_error(
    kind: str,
    message: str,
    exception: Optional[bytes],
    traceback: str,
    function_name: str = "",
) -> BaseException:
    """The exception to raise for a core error. `kind` is the core's error kind word,
    `message` its one-line cause, `exception` the serialized exception the worker made (a task
    error, or an actor's constructor error for ACTOR_DIED) and `traceback` its rendered text."""
    if exception is not None:
        from ._private import serialization

        try:
            error = serialization.deserialize(exception)
        except Exception as e:
            return _undeserializable(message, f"{type(e).__name__}: {e}", traceback)
        if isinstance(error, TesseraTaskError):
            return ActorDiedError(error) if kind == "ACTOR_DIED" else error.as_instanceof_cause()
        if isinstance(error, BaseException):
            return error
        return _undeserializable(message, f"it is a {type(error).__name__}", traceback)

    if kind == "TASK_ERROR":
        return TesseraTaskError(function_name, traceback or message, TesseraError(message))
    return _KIND_ERRORS.get(kind, TesseraSystemError)(message)

"""The process's connection to a cluster: `init`, `shutdown`, `is_initialized`, and the object
calls (`put`, `get`, `wait`) with Ray's argument checks and messages. The runtime itself is
`tessera._core` (C++); this module decides which cluster to join, starts a local one when asked,
and turns values into bytes and core errors into `tessera.exceptions`.

Which cluster `init(address)` joins:
  None     $TESSERA_ADDRESS, else $RAY_ADDRESS, else the cluster of this user's state folder
           ($TESSERA_STATE_DIR, else ~/.local/state/tessera) when its head runs, else a new
           local one-node cluster (stopped at shutdown)
  "auto"   the same without starting one: ConnectionError when there is none
  "local"  always a new local cluster
  "HOST:PORT"  that head (the token from $TESSERA_TOKEN or the state folder)

Threading: init and shutdown from one thread; the other calls from any thread once initialized.
A process forked from an initialized one cannot use the runtime (os.register_at_fork marks it).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from tessera import _core
from tessera import exceptions
from tessera._private import runtime_env, serialization
from tessera._private.local_cluster import LocalCluster

ObjectRef = _core.ObjectRef

serialization.register_ref_type(ObjectRef, lambda ref: ref._ext_payload(),
                                ObjectRef._from_ext_payload)

# How long a leased Python worker waits for more work before its lease ends (starting one costs
# an interpreter and the extension, so they are kept longer than the C++ API's 1 s).
_WORKER_IDLE_TIMEOUT_S = 10.0

# The driver's namespace, in its workers' environment (their tasks' and actors' namespace).
NAMESPACE_ENV = "TESSERA_NAMESPACE"

_INIT_KEYWORDS = {
    "num_cpus", "num_gpus", "resources", "labels", "object_store_memory", "ignore_reinit_error",
    "namespace", "runtime_env", "log_to_driver", "include_dashboard", "dashboard_host",
    "dashboard_port", "configure_logging", "logging_level", "logging_format", "logging_config",
    "job_config", "local_mode", "_state_dir", "_worker_idle_timeout_s", "_record_task_events",
}


class _State:
    """What init set up; one per process."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.connected = False
        self.local: Optional[LocalCluster] = None
        self.state_dir: Optional[str] = None
        self.head_address: Optional[str] = None
        self.namespace: Optional[str] = None
        # The job's runtime_env (init's), merged under every task's and actor's.
        self.runtime_env: Optional[Dict[str, Any]] = None
        # Bumped by every init: objects of an earlier connection (functions' code refs) are stale.
        self.session = 0


_state = _State()


class TesseraContext:
    """What `init` returns: the cluster joined. `with tessera.init(): ...` shuts down on exit."""

    def __init__(self, address_info: Dict[str, Any]) -> None:
        self.address_info = address_info

    def __getitem__(self, key: str) -> Any:
        return self.address_info[key]

    def __enter__(self) -> "TesseraContext":
        return self

    def __exit__(self, *exc: Any) -> None:
        shutdown()

    def __repr__(self) -> str:
        return f"TesseraContext({self.address_info})"


def _default_state_dir() -> Path:
    from_env = os.environ.get("TESSERA_STATE_DIR")
    if from_env:
        return Path(from_env)
    return Path.home() / ".local" / "state" / "tessera"


def _running_head(state_dir: Path) -> Optional[str]:
    """The address of the head running from `state_dir`, if one does."""
    try:
        address = (state_dir / "head.address").read_text().strip()
        pid = int((state_dir / "head.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, another user's: the state folder check in the core refuses it
    return address or None


def _worker_environment() -> Dict[str, str]:
    """PYTHONPATH for the workers: this package's folder first, then the driver's sys.path
    entries that exist (its script's folder, as Ray gives workers), then what it already had."""
    package_root = str(Path(__file__).resolve().parent.parent.parent)
    paths = [package_root]
    for entry in sys.path:
        if entry and entry not in paths and os.path.isdir(entry):
            paths.append(entry)
    existing = os.environ.get("PYTHONPATH")
    if existing:
        paths.append(existing)
    return {"PYTHONPATH": os.pathsep.join(paths), "PYTHONUNBUFFERED": "1"}


def is_initialized() -> bool:
    """Whether this process is connected to a cluster (always True inside a worker)."""
    return _state.connected or _core.is_worker()


def init(address: Optional[str] = None, **kwargs: Any) -> TesseraContext:
    """Connects this process to a cluster as a driver (see the module's docstring for which)."""
    unknown = sorted(set(kwargs) - _INIT_KEYWORDS)
    if unknown:
        raise RuntimeError(f"Unknown keyword argument(s): {', '.join(unknown)}")
    with _state.lock:
        if _state.connected:
            if kwargs.get("ignore_reinit_error"):
                return _context()
            raise RuntimeError("Maybe you called tessera.init twice by accident? This error can "
                               "be suppressed by passing in 'ignore_reinit_error=True' or by "
                               "calling 'tessera.shutdown()' prior to 'tessera.init()'.")
        if _core.is_worker():
            return _context()
        namespace = kwargs.get("namespace")
        if namespace is not None and not isinstance(namespace, str):
            raise TypeError(f"namespace must be None or a string, not {type(namespace).__name__}")
        if namespace == "":
            raise ValueError("'namespace' must not be an empty string.")
        # Ray's anonymous namespace: one of this job's own when init names none.
        namespace = namespace or str(uuid.uuid4())
        job_runtime_env = kwargs.get("runtime_env")
        if job_runtime_env is not None:
            if not isinstance(job_runtime_env, dict):
                raise TypeError("runtime_env must be a dict, but received type "
                                f"{type(job_runtime_env)}")
            runtime_env.validate(job_runtime_env)
        node_kwargs = {k: kwargs.get(k) for k in
                       ("num_cpus", "num_gpus", "resources", "labels", "object_store_memory")}
        state_dir = Path(kwargs["_state_dir"]) if kwargs.get("_state_dir") else None
        head_address = None
        local = None
        if address is None:
            address = os.environ.get("TESSERA_ADDRESS") or os.environ.get("RAY_ADDRESS") or None
        if address in (None, "auto"):
            folder = state_dir or _default_state_dir()
            head_address = _running_head(folder)
            if head_address is not None:
                state_dir = folder
            elif address == "auto":
                raise ConnectionError(
                    "Could not find any running tessera instance. Please specify the one to "
                    "connect to by setting `address` or the `TESSERA_ADDRESS` environment "
                    f"variable (looked in the state folder {folder}).")
        elif address != "local":
            if "://" in address or address.count(":") != 1:
                raise ValueError(f"address {address!r} is not HOST:PORT, 'auto' or 'local'")
            head_address = address
        if head_address is not None:
            given = sorted(k for k, v in node_kwargs.items() if v is not None)
            if given:
                raise ValueError(f"When connecting to an existing cluster, {', '.join(given)} "
                                 "must not be provided.")
        else:
            local = LocalCluster.start(**node_kwargs)
            state_dir = local.state_dir
            head_address = (state_dir / "head.address").read_text().strip()
        options = {
            "state_dir": str(state_dir) if state_dir is not None else "",
            "head_address": head_address,
            "worker_command": [sys.executable, "-m", "tessera._private.worker_main"],
            "worker_env": {**_worker_environment(), NAMESPACE_ENV: namespace},
            "worker_idle_timeout_s": float(kwargs.get("_worker_idle_timeout_s")
                                           or _WORKER_IDLE_TIMEOUT_S),
            "forward_worker_output": kwargs.get("log_to_driver", True) is not False,
            "prefix_worker_output": True,
            "record_task_events": kwargs.get("_record_task_events", True) is not False,
        }
        try:
            _core.init(options)
        except _core.CoreError as e:
            if local is not None:
                local.stop()
            raise ConnectionError(f"cannot connect to the tessera cluster at {head_address}: "
                                  f"{e.args[1]}") from None
        except BaseException:
            if local is not None:
                local.stop()
            raise
        _state.connected = True
        _state.local = local
        _state.state_dir = str(state_dir) if state_dir is not None else None
        _state.head_address = head_address
        _state.namespace = namespace
        _state.runtime_env = dict(job_runtime_env) if job_runtime_env else None
        _state.session += 1
        return _context()


def namespace() -> str:
    """The namespace named actors are created in and looked up in by default: the one init
    gave (or made up), or in a worker its driver's."""
    if _core.is_worker():
        return os.environ.get(NAMESPACE_ENV, "")
    return _state.namespace or ""


def _context() -> TesseraContext:
    return TesseraContext({
        "address": _state.head_address,
        "state_dir": _state.state_dir,
        "job_id": _core.job_id(),
        "local_cluster": _state.local is not None,
    })


def shutdown(_exiting_interpreter: bool = False) -> None:
    """Disconnects (idempotent) and stops the local cluster init started, if any."""
    with _state.lock:
        if _state.connected:
            _core.shutdown()
            _state.connected = False
        if _state.local is not None:
            _state.local.stop()
            _state.local = None


def auto_init() -> None:
    """Connects with init() first unless already connected (Ray's auto-init), unless
    TESSERA_ENABLE_AUTO_CONNECT=0."""
    if _state.connected or _core.is_worker():
        return
    if os.environ.get("TESSERA_ENABLE_AUTO_CONNECT", os.environ.get("RAY_ENABLE_AUTO_CONNECT")) == "0":
        raise exceptions.RaySystemError("tessera has not been started yet. You can start it "
                                        "with tessera.init().")
    with _state.lock:
        if not _state.connected:
            init()


def job_runtime_env() -> Optional[Dict[str, Any]]:
    """The runtime_env given to init (None: none, or inside a worker)."""
    return _state.runtime_env


def session() -> int:
    """The current connection's number (0 inside a worker, whose runtime never restarts)."""
    return _state.session


def raise_core_error(error: "_core.CoreError") -> None:
    """Raises the tessera.exceptions instance for a core error (its traceback not chained)."""
    kind, message, exception, traceback = error.args
    raise exceptions.from_core_error(kind, message, exception, traceback or "") from None


def put_value(value: Any) -> ObjectRef:
    """Serializes `value` into a new object owned by this process."""
    serialized = serialization.serialize(value)
    try:
        return _core.put(serialized.parts, serialized.contained_refs)
    except _core.CoreError as e:
        raise_core_error(e)


def put(value: Any, *, _owner: Any = None) -> ObjectRef:
    """Stores `value` in the object store; the ObjectRef to pass to tasks or `get`."""
    auto_init()
    if isinstance(value, ObjectRef):
        raise TypeError("Calling 'put' on an tessera.ObjectRef is not allowed. If you really "
                        "want to do this, you can wrap the tessera.ObjectRef in a list and call "
                        "'put' on it.")
    if _owner is not None:
        raise ValueError("put(_owner=...) is not supported: the caller owns what it puts")
    return put_value(value)


def _timeout_seconds(timeout: Optional[float]) -> Optional[float]:
    if timeout is None:
        return None
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool):
        raise TypeError(f"timeout must be a number of seconds or None, not {type(timeout).__name__}")
    if timeout < 0:
        raise ValueError("'timeout' must be a non-negative number of seconds or None")
    return float(timeout)


def get_values(refs: List[ObjectRef], timeout: Optional[float]) -> List[Any]:
    try:
        buffers = _core.get(refs, _timeout_seconds(timeout))
    except _core.CoreError as e:
        raise_core_error(e)
    return [serialization.deserialize(buffer) for buffer in buffers]


def get(object_refs: Any, *, timeout: Optional[float] = None) -> Any:
    """The value of an ObjectRef, or the values of a list of them in order. The first that
    failed raises (a task's exception as TaskError that is also an instance of its class);
    GetTimeoutError when `timeout` seconds pass first."""
    auto_init()
    if isinstance(object_refs, ObjectRef):
        return get_values([object_refs], timeout)[0]
    if not isinstance(object_refs, list):
        if isinstance(object_refs, tuple):
            raise ValueError("'object_refs' must either be an ObjectRef or a list of ObjectRefs, "
                             "not a tuple.")
        raise ValueError(f"'object_refs' must either be an ObjectRef or a list of ObjectRefs, "
                         f"got {type(object_refs).__name__}.")
    for ref in object_refs:
        if not isinstance(ref, ObjectRef):
            raise TypeError(f"'object_refs' must be a list of ObjectRefs, got an element of type "
                            f"{type(ref).__name__}")
    return get_values(object_refs, timeout)


def wait(object_refs: List[Any], *, num_returns: int = 1, timeout: Optional[float] = None,
         fetch_local: bool = True) -> Tuple[List[Any], List[Any]]:
    """(ready, not_ready), both in the order given, once `num_returns` are ready (finished with a
    value or an error; an ObjectRefGenerator once its next value, or its end, is there) or
    `timeout` seconds passed."""
    from tessera._private.object_ref_generator import ObjectRefGenerator

    auto_init()
    if isinstance(object_refs, ObjectRef) or not isinstance(object_refs, list):
        raise TypeError(f"wait() expected a list of ObjectRef, got {type(object_refs).__name__}")
    for ref in object_refs:
        if not isinstance(ref, (ObjectRef, ObjectRefGenerator)):
            raise TypeError(f"wait() expected a list of ObjectRef, got an element of type "
                            f"{type(ref).__name__}")
    if not object_refs:
        return [], []
    if len(set(object_refs)) != len(object_refs):
        raise ValueError("Wait requires a list of unique object refs.")
    if not isinstance(num_returns, int) or isinstance(num_returns, bool) or num_returns <= 0:
        raise ValueError(f"Invalid number of objects to return {num_returns}.")
    if num_returns > len(object_refs):
        raise ValueError("num_returns cannot be greater than the number of objects provided to "
                         "tessera.wait.")
    seconds = _timeout_seconds(timeout)
    if any(isinstance(ref, ObjectRefGenerator) for ref in object_refs):
        ready_flags = _wait_with_generators(object_refs, num_returns, seconds)
    else:
        ready_flags = _core.wait(object_refs, num_returns, seconds)
    ready: List[Any] = []
    not_ready: List[Any] = []
    for ref, flag in zip(object_refs, ready_flags):
        # At most num_returns ready ones, as Ray returns.
        (ready if flag and len(ready) < num_returns else not_ready).append(ref)
    return ready, not_ready


def _wait_with_generators(items: List[Any], num_returns: int,
                          seconds: Optional[float]) -> List[bool]:
    """wait's flags for a list with ObjectRefGenerators: each generator is asked (next_ready)
    between waits on the refs of up to 10 ms."""
    from tessera._private.object_ref_generator import ObjectRefGenerator

    deadline = None if seconds is None else time.monotonic() + seconds
    refs = [i for i, item in enumerate(items) if not isinstance(item, ObjectRefGenerator)]
    flags = [False] * len(items)
    while True:
        for i, item in enumerate(items):
            if isinstance(item, ObjectRefGenerator) and not flags[i]:
                flags[i] = item.next_ready()
        count = sum(flags)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        if refs:
            needed = max(0, num_returns - count)
            slice_s = 0.01 if left is None else min(left, 0.01)
            for i, flag in zip(refs, _core.wait([items[i] for i in refs],
                                                min(len(refs), max(1, needed)),
                                                slice_s)):
                flags[i] = flag
            count = sum(flags)
        elif left is None or left > 0:
            time.sleep(0.005 if left is None else min(left, 0.005))
        if count >= num_returns or (deadline is not None and time.monotonic() >= deadline):
            return flags


def cancel(object_ref: ObjectRef, *, force: bool = False, recursive: bool = True) -> None:
    """Cancels the task that makes `object_ref`: a queued one never runs; a running one is
    interrupted (KeyboardInterrupt in the task, also while it waits in `get`), or with `force`
    its worker is killed; `recursive` cancels the tasks it submitted too. `get` on it then
    raises TaskCancelledError (WorkerCrashedError with force). A cancelled task is not retried;
    a finished one is left as it is. Running actor calls are not interrupted. An
    ObjectRefGenerator cancels its streaming generator task."""
    from tessera._private.object_ref_generator import ObjectRefGenerator

    auto_init()
    if isinstance(object_ref, ObjectRefGenerator):
        object_ref = object_ref.completed()
    if not isinstance(object_ref, ObjectRef):
        raise TypeError("tessera.cancel() only supported for object refs. For actors, try "
                        f"tessera.kill(). Got: {type(object_ref).__name__}.")
    try:
        _core.cancel(object_ref, bool(force), bool(recursive))
    except _core.CoreError as e:
        raise_core_error(e)


def _after_fork_in_child() -> None:
    _core._forked()
    _state.connected = False
    _state.local = None  # the parent's to stop


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(shutdown, True)

"""`@tessera.remote` on a function: a RemoteFunction whose `.remote(...)` submits a task to the
cluster and returns the ObjectRef of its result, and whose `.options(...)` gives a copy with other
options (merged over the decorator's; later wins).

The function travels cloudpickled: put once per connection into the object store (owned by the
submitting process) and fetched (then cached) by each worker that runs it. Options are checked
and turned into the core's form once, when the decorator or `.options()` is applied, not per call.

Threading: `.remote()` from any thread.
"""

from __future__ import annotations

import functools
import inspect
import threading
from typing import Any, Callable, Dict, Optional, Tuple

from tessera import _core
from tessera._private import (arguments, options as option_checks, runtime_env, serialization,
                              signature, worker)
from tessera._private.object_ref_generator import ObjectRefGenerator
from tessera._private.options import exception_type_name
from tessera.util.placement_group import submission_core_options

# Ray refuses functions whose pickle is larger than this (FUNCTION_SIZE_ERROR_THRESHOLD).
FUNCTION_SIZE_ERROR_THRESHOLD = 10**8


def put_code(code: Any, what: str) -> "_core.ObjectRef":
    """The pickled function or class, stored for the workers."""
    serialized = serialization.serialize(code)
    if serialized.total_size > FUNCTION_SIZE_ERROR_THRESHOLD:
        raise ValueError(f"The {what} is too large ({serialized.total_size} bytes pickled, more "
                         f"than {FUNCTION_SIZE_ERROR_THRESHOLD}): it probably captures a large "
                         "object; put that with tessera.put and pass the ref instead.")
    try:
        return _core.put(serialized.parts, serialized.contained_refs)
    except _core.CoreError as e:
        worker.raise_core_error(e)


def put_serialized(serialized: serialization.SerializedObject) -> "_core.ObjectRef":
    try:
        return _core.put(serialized.parts, serialized.contained_refs)
    except _core.CoreError as e:
        worker.raise_core_error(e)


class _CodeCache:
    """The code's ref for the current connection (a new one after shutdown and init)."""

    def __init__(self, code: Any, what: str) -> None:
        self._code = code
        self._what = what
        self._lock = threading.Lock()
        self._ref = None
        self._session = -1

    def ref(self) -> "_core.ObjectRef":
        session = worker.session()
        ref = self._ref
        if ref is not None and self._session == session:
            return ref
        with self._lock:
            if self._ref is None or self._session != session:
                self._ref = put_code(self._code, self._what)
                self._session = session
            return self._ref


class RemoteFunction:
    """A function that runs as a task on the cluster."""

    def __init__(self, function: Callable, options: Dict[str, Any],
                 code: Optional[_CodeCache] = None,
                 check: Optional[signature.CallCheck] = None) -> None:
        self._function = function
        # Its signature, taken once (shared by the copies .options() makes).
        self._check = check or signature.for_function(function)
        self._options = dict(options)
        # A generator function streams its values unless num_returns says otherwise (Ray's).
        streams_by_default = "num_returns" not in options and _is_generator_function(function)
        self._core_options = option_checks.task_core_options(
            {**self._options, "num_returns": "streaming"} if streams_by_default else self._options)
        # The worker matches a raised exception against these names (its class or a base).
        self._core_options["retry_exception_type_names"] = [
            exception_type_name(t) for t in self._core_options.get("retry_exception_types") or []]
        self._name = getattr(function, "__qualname__", getattr(function, "__name__", "task"))
        self._env = runtime_env.Resolved(self._options.get("runtime_env"))
        self._strategy = self._options.get("scheduling_strategy")
        # The last core options dict submitted with and the core's form of it (made once: the
        # dict is the same object from call to call unless the session or the group changed).
        self._prepared: Tuple[Optional[dict], Any, str] = (None, None, self._name)
        self._code = code or _CodeCache(function, f"remote function {self._name}")
        functools.update_wrapper(self, function)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"Remote functions cannot be called directly. Instead of running "
                        f"'{self._name}()', try '{self._name}.remote()'.")

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        """Submits the task; the ObjectRef of its return value (num_returns N > 1: a list of
        N refs, one per value of the sequence it returns; 0: None). Arguments that do not bind
        to the function's signature raise TypeError here, and nothing is submitted."""
        self._check(args, kwargs)
        # With the job's runtime_env under its own (folders packed at the first call).
        core = submission_core_options(self._strategy, self._env.options(self._core_options))
        prepared = self._prepared
        if prepared[0] is not core:
            prepared = (core, _core.TaskOptions(core), core.get("name") or self._name)
            self._prepared = prepared
        worker.auto_init()
        call = arguments.encode(args, kwargs, put_serialized)
        try:
            refs = _core.submit_task(prepared[2], self._code.ref(), call, prepared[1])
        except _core.CoreError as e:
            worker.raise_core_error(e)
        if core.get("streaming"):
            return ObjectRefGenerator(refs)
        return None if core.get("num_returns") == 0 else refs

    def options(self, **options: Any) -> "RemoteFunction":
        """A copy with `options` over this one's (num_cpus, resources, scheduling_strategy...)."""
        option_checks.validate_task_options(options, in_options=True)
        merged = dict(self._options)
        merged.update(options)
        return RemoteFunction(self._function, merged, self._code, self._check)

    def __reduce__(self):
        # By state, not by constructor arguments: a function that calls itself (its closure
        # holds this object) pickles as a cycle. The code cache is this process's own.
        return (_unpickled_remote_function, (), {"function": self._function,
                                                  "options": self._options})

    def __setstate__(self, state: Dict[str, Any]) -> None:
        RemoteFunction.__init__(self, state["function"], state["options"])

    def __repr__(self) -> str:
        return f"RemoteFunction({self._name})"


def _is_generator_function(function: Callable) -> bool:
    return inspect.isgeneratorfunction(function) or inspect.isasyncgenfunction(function)


def _unpickled_remote_function() -> RemoteFunction:
    return RemoteFunction.__new__(RemoteFunction)


def remote(*args: Any, **options: Any) -> Any:
    """`@tessera.remote` or `@tessera.remote(num_cpus=..., ...)` on a function (a
    RemoteFunction) or a class (an ActorClass)."""
    from tessera.actor import ActorClass

    def make(target: Any) -> Any:
        if inspect.isclass(target):
            option_checks.validate_actor_options(options, in_options=False)
            return ActorClass(target, options)
        if inspect.isfunction(target) or inspect.isbuiltin(target) or callable(target):
            option_checks.validate_task_options(options, in_options=False)
            return RemoteFunction(target, options)
        raise TypeError("The @tessera.remote decorator must be applied to either a function or "
                        "a class.")

    if len(args) == 1 and not options and (inspect.isclass(args[0]) or callable(args[0])):
        return make(args[0])
    if args:
        raise TypeError("The @tessera.remote decorator must be applied either with no arguments "
                        "and no parentheses, for example '@tessera.remote', or it must be applied "
                        "using some of the arguments in the list ['num_cpus', 'num_gpus', ...], "
                        "for example '@tessera.remote(num_cpus=1)'.")
    return make

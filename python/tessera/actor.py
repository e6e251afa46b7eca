"""`@tessera.remote` on a class: an ActorClass whose `.remote(...)` starts an actor (one worker
process holding one instance) and returns its ActorHandle; `handle.method.remote(...)` calls a
method there and returns the ObjectRef of its result. Calls from one handle run in the order they
were made (with max_concurrency 1); `@tessera.method` sets a method's options.

The class travels cloudpickled, like a remote function's code. A handle owned by this process
kills its actor when it is garbage collected, unless the actor is detached (named, it outlives
this driver until `tessera.kill` from any driver, its process's death or the cluster's end). Named actors are found from any driver with
`tessera.get_actor(name)`; a handle passed to a task (or inside any value) reaches the actor
from there: that process asks the actor's owner where it runs. Once a handle has left the
process that made the actor, the actor lives until `kill` or its owner's end.

Threading: handles and method calls from any thread.
"""

from __future__ import annotations

import inspect
import threading
from typing import Any, Callable, Dict, Iterable, Optional

from tessera import _core
from tessera._private import (arguments, handle_metadata, options as option_checks, runtime_env,
                              signature, worker)
from tessera._private.object_ref_generator import ObjectRefGenerator
from tessera._private.options import exception_type_name
from tessera.remote_function import _CodeCache, put_serialized
from tessera.util.placement_group import submission_core_options

# Methods every actor has, as in Ray.
_TERMINATE = "__ray_terminate__"
_TERMINATE_ALIASES = ("__ray_terminate__", "__tessera_terminate__")


def method(*args: Any, **options: Any) -> Callable:
    """`@tessera.method(num_returns=..., concurrency_group=..., max_task_retries=...,
    retry_exceptions=...)` on an actor method: the defaults of its calls (a call's
    `handle.method.options(...)` overrides them). concurrency_group must be one of the class's
    `concurrency_groups`; max_task_retries and retry_exceptions take the place of the actor's
    for this method's calls."""
    if args and callable(args[0]) and len(args) == 1 and not options:
        args[0].__tessera_method_options__ = {}
        return args[0]
    if args:
        raise ValueError("The @tessera.method decorator must be applied with keyword options "
                         f"only ({sorted(option_checks.METHOD_OPTIONS)}), or bare")
    option_checks.validate_method_options(options)

    def decorate(function: Callable) -> Callable:
        function.__tessera_method_options__ = dict(options)
        return function

    return decorate


def _declared_method_options(cls: type, groups: Dict[str, int]) -> Dict[str, dict]:
    """{method name: its @tessera.method options}; ValueError for a concurrency group the class
    does not define."""
    declared = {}
    for name, member in inspect.getmembers(cls, callable):
        options = dict(getattr(member, "__tessera_method_options__", None) or {})
        if "num_returns" not in options and (inspect.isgeneratorfunction(member)
                                             or inspect.isasyncgenfunction(member)):
            options["num_returns"] = "streaming"  # a generator method streams, as Ray's
        if not options:
            continue
        group = options.get("concurrency_group")
        if group and group not in groups:
            raise ValueError(f"{cls.__name__}.{name} is in concurrency group '{group}', which "
                             f"the class does not define (its concurrency_groups: "
                             f"{sorted(groups)})")
        declared[name] = dict(options)
    return declared


def _has_async_methods(cls: type) -> bool:
    return any(inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member)
               for _, member in inspect.getmembers(cls, inspect.isfunction))


def _end_after(ref: "_core.ObjectRef", actor_id: str) -> None:
    """Kills the actor once its __ray_terminate__ call is answered (so it is not restarted)."""

    def end() -> None:
        try:
            _core.wait([ref], 1, None)
            _core.kill_actor(actor_id)
        except Exception:
            pass  # the runtime shut down first, or the actor is gone already

    threading.Thread(target=end, name="tessera-actor-terminate", daemon=True).start()


class ActorMethod:
    """`handle.name`: `.remote(*args, **kwargs)` calls it on the actor."""

    def __init__(self, handle: "ActorHandle", name: str,
                 check: Optional[signature.CallCheck] = None,
                 options: Optional[Dict[str, Any]] = None) -> None:
        self._handle = handle
        self._name = name
        self._check = check
        # The method's @tessera.method options with .options() over them; None: none at all.
        self._options = options
        self._call_options: Optional[dict] = None  # what the core takes, made once

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        """Calls the method; the ObjectRef of its result (num_returns N > 1: a list of N refs;
        0: None). Arguments that do not bind to the method's signature raise TypeError here,
        and nothing is submitted."""
        if self._check is not None:
            self._check(args, kwargs)
        if self._options and self._call_options is None:
            self._call_options = _core_call_options(self._options)
        call = arguments.encode(args, kwargs, put_serialized)
        try:
            self._handle._attach()
            ref = _core.submit_actor_task(self._handle._actor_id, self._name, call,
                                          self._call_options)
        except _core.CoreError as e:
            worker.raise_core_error(e)
        if self._name == _TERMINATE:
            _end_after(ref, self._handle._actor_id)
        if self._call_options is not None:
            if self._call_options["streaming"]:
                return ObjectRefGenerator(ref)
            if self._call_options["num_returns"] == 0:
                return None
        return ref

    def options(self, **options: Any) -> "ActorMethod":
        """This method's calls with these options over its own (`@tessera.method`): Ray's
        num_returns, concurrency_group, max_task_retries, retry_exceptions, name."""
        option_checks.validate_method_options(options)
        groups = self._handle._groups
        group = options.get("concurrency_group")
        if group and groups is not None and group not in groups:
            raise ValueError(f"concurrency group '{group}' is not defined by actor class "
                             f"{self._handle._class_name} (its concurrency_groups: "
                             f"{sorted(groups)})")
        return ActorMethod(self._handle, self._name, self._check,
                           {**(self._options or {}), **options})

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"Actor methods cannot be called directly. Instead of running "
                        f"'object.{self._name}()', try 'object.{self._name}.remote()'.")

    def __repr__(self) -> str:
        return f"ActorMethod({self._handle._class_name}.{self._name})"


class ActorHandle:
    """A reference to a running actor."""

    def __init__(self, actor_id: str, class_name: str, methods: Optional[set],
                 name: str = "", owned: bool = False, detached: bool = False,
                 owner_address: str = "",
                 method_checks: Optional[Dict[str, signature.CallCheck]] = None,
                 namespace: str = "", method_options: Optional[Dict[str, dict]] = None,
                 groups: Optional[Iterable[str]] = None,
                 lifetime: Optional["_core.ObjectRef"] = None) -> None:
        self._actor_id = actor_id
        self._class_name = class_name
        # None: not known here (found by name), any attribute is taken for a method.
        self._methods = methods
        # The methods' signatures, taken once per class (none for a handle made elsewhere).
        self._method_checks = method_checks or {}
        # The methods' @tessera.method options, and the class's concurrency groups (None: not
        # known here, for a handle found by name).
        self._method_options = method_options or {}
        self._groups = frozenset(groups) if groups is not None else None
        self._name = name
        self._namespace = namespace
        self._owned = owned
        self._detached = detached
        # The process that made the actor; calls from another process go to the actor's process
        # once this one has been asked where it runs (attached on the first call).
        self._owner_address = owner_address
        self._attached = owned or not owner_address
        # The object standing for this actor's handles (an unnamed actor that is not detached):
        # every copy of the handle, here or in another process, holds it, and the actor ends
        # once it is freed (Ray's actor lifetime). None: the actor lives as long as its owner.
        self._lifetime = lifetime

    def __getattr__(self, item: str) -> ActorMethod:
        if item.startswith("__") and item not in _TERMINATE_ALIASES:
            raise AttributeError(item)
        if item in _TERMINATE_ALIASES:
            return ActorMethod(self, _TERMINATE)
        if self._methods is not None and item not in self._methods:
            raise AttributeError(f"'{self._class_name}' actor has no method '{item}'")
        return ActorMethod(self, item, self._method_checks.get(item),
                           self._method_options.get(item))

    def _attach(self) -> None:
        # A handle from another process: the core finds where the actor runs (again after a
        # restart of the actor, when the stream to its old process ended).
        if not self._attached and self._owner_address != _core.owner_address():
            try:
                _core.attach_actor(self._actor_id, self._owner_address)
            except _core.CoreError:
                # A detached actor outlives its owner: it is found by its name then (the same
                # actor only, not a later one that took the name).
                if not self._name or not self._found_by_name():
                    raise

    def _found_by_name(self) -> bool:
        try:
            return _core.get_actor(self._name, self._namespace)[0] == self._actor_id
        except _core.CoreError:
            return False

    def __reduce__(self):
        owner = self._owner_address or _core.owner_address()
        return (_rebuild_handle, (self._actor_id, self._class_name,
                                  sorted(self._methods) if self._methods is not None else None,
                                  self._name, owner, self._namespace, self._method_options,
                                  sorted(self._groups) if self._groups is not None else None,
                                  self._lifetime))

    def __repr__(self) -> str:
        return f"Actor({self._class_name}, {self._actor_id[:16]})"


def _core_call_options(options: Dict[str, Any]) -> dict:
    """The options dict `_core.submit_actor_task` takes for a call with these options."""
    call = option_checks.method_call_options(options)
    call["retry_exception_types"] = [exception_type_name(t)
                                     for t in call["retry_exception_types"]]
    return call


def _rebuild_handle(actor_id: str, class_name: str, methods: Optional[list], name: str,
                    owner_address: str, namespace: str = "",
                    method_options: Optional[Dict[str, dict]] = None,
                    groups: Optional[list] = None,
                    lifetime: Optional["_core.ObjectRef"] = None) -> ActorHandle:
    return ActorHandle(actor_id, class_name, set(methods) if methods is not None else None,
                       name, owner_address=owner_address, namespace=namespace,
                       method_options=method_options, groups=groups, lifetime=lifetime)


class ActorClass:
    """A class whose instances run as actors on the cluster."""

    def __init__(self, cls: type, options: Dict[str, Any], code: Optional[_CodeCache] = None,
                 shared: Optional["ActorClass"] = None):
        self._cls = cls
        self._options = dict(options)
        self._async = _has_async_methods(cls)
        self._core_options = option_checks.actor_core_options(self._options, self._async)
        self._env = runtime_env.Resolved(self._options.get("runtime_env"))
        if shared is not None:  # a copy .options() made: the class's methods are the same
            self._methods = shared._methods
            self._constructor_check = shared._constructor_check
            self._method_checks = shared._method_checks
            self._method_options = shared._method_options
        else:
            self._methods = {name for name, _ in inspect.getmembers(cls, callable)
                             if not name.startswith("__") or name in ("__call__",)}
            # Signatures taken once per class: calls are checked when made, as Ray does.
            self._constructor_check = signature.for_constructor(cls)
            self._method_checks = signature.for_methods(cls, self._methods)
            self._method_options = _declared_method_options(
                cls, self._core_options["concurrency_groups"])
        self._code = code or _CodeCache(cls, f"actor class {cls.__name__}")
        self.__name__ = cls.__name__
        self.__doc__ = cls.__doc__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"Actors cannot be instantiated directly. Instead of "
                        f"'{self._cls.__name__}()', use '{self._cls.__name__}.remote()'.")

    def remote(self, *args: Any, **kwargs: Any) -> ActorHandle:
        """Starts the actor (its constructor runs on its worker); its handle. Arguments that do
        not bind to the constructor's signature raise TypeError here, and nothing starts."""
        self._constructor_check(args, kwargs)
        # With the job's runtime_env under its own (folders packed at the first call).
        core = submission_core_options(self._options.get("scheduling_strategy"),
                                       self._env.options(self._core_options))
        worker.auto_init()
        name = core.get("name") or ""
        if core.get("detached") and not name:
            raise ValueError("A detached actor must be named: pass name= with "
                             "lifetime='detached' (other drivers find it with tessera.get_actor)")
        if name and not core["namespace"]:
            core = {**core, "namespace": worker.namespace()}  # the caller's, as Ray
        if name:  # what other drivers' handles are built with (tessera.get_actor)
            core = {**core, "handle_metadata": self._handle_metadata()}
        if core.get("get_if_exists"):
            found = self._live_named(name, core["namespace"])
            if found is not None:
                return found
        call = arguments.encode(args, kwargs, put_serialized)
        try:
            actor_id = _core.create_actor(self._cls.__name__, self._code.ref(), call,
                                          _core.ActorOptions(core))
        except _core.CoreError as e:
            if name and e.args[0] == "ALREADY_EXISTS":
                # get_if_exists: another creator took the name since the look-up above.
                found = self._live_named(name, core["namespace"]) if core.get(
                    "get_if_exists") else None
                if found is not None:
                    return found
                namespace = core["namespace"]
                raise ValueError(f"The name {name} (namespace={namespace}) is already taken. "
                                 "Please use a different name or get the existing actor using "
                                 f"tessera.get_actor('{name}', namespace='{namespace}')") from None
            worker.raise_core_error(e)
        detached = bool(core.get("detached"))
        # An unnamed actor that is not detached ends once every handle to it has gone.
        lifetime = None if name or detached else _core.actor_lifetime(actor_id)
        return self._handle(actor_id, name, core["namespace"], owned=True, detached=detached,
                            owner_address=_core.owner_address(), lifetime=lifetime)

    def _handle(self, actor_id: str, name: str, namespace: str, **kwargs: Any) -> ActorHandle:
        return ActorHandle(actor_id, self._cls.__name__, self._methods, name,
                           method_checks=self._method_checks, namespace=namespace,
                           method_options=self._method_options,
                           groups=self._core_options["concurrency_groups"], **kwargs)

    def _handle_metadata(self) -> bytes:
        return handle_metadata.encode(self._cls.__name__, self._methods, self._method_options,
                                      self._core_options["concurrency_groups"])

    def _live_named(self, name: str, namespace: str) -> Optional[ActorHandle]:
        """The live actor holding `name` in `namespace` (get_if_exists), as this class's."""
        try:
            return self._handle(_core.get_actor(name, namespace)[0], name, namespace)
        except _core.CoreError as e:
            if e.args[0] == "NOT_FOUND":
                return None
            worker.raise_core_error(e)

    def options(self, **options: Any) -> "ActorClass":
        option_checks.validate_actor_options(options, in_options=True)
        merged = dict(self._options)
        merged.update(options)
        return ActorClass(self._cls, merged, self._code, self)

    def __reduce__(self):
        # As RemoteFunction's: by state, without this process's code cache.
        return (_unpickled_actor_class, (), {"cls": self._cls, "options": self._options})

    def __setstate__(self, state: Dict[str, Any]) -> None:
        ActorClass.__init__(self, state["cls"], state["options"])

    def __repr__(self) -> str:
        return f"ActorClass({self._cls.__name__})"


def _unpickled_actor_class() -> ActorClass:
    return ActorClass.__new__(ActorClass)


def get_actor(name: str, namespace: Optional[str] = None) -> ActorHandle:
    """The handle of the live actor named `name` in `namespace` (None: the caller's namespace),
    made by this driver or another one."""
    if not isinstance(name, str) or not name:
        raise ValueError("Please supply a non-empty value to get_actor")
    if namespace is not None and not isinstance(namespace, str):
        raise TypeError(f"namespace must be None or a string, not {type(namespace).__name__}")
    worker.auto_init()
    if namespace is None:
        namespace = worker.namespace()
    try:
        actor_id, metadata = _core.get_actor(name, namespace)
    except _core.CoreError as e:
        if e.args[0] == "NOT_FOUND":
            raise ValueError(f"Failed to look up actor with name '{name}'. This could because 1. "
                             "You are trying to look up a named actor you didn't create. 2. The "
                             "named actor died. 3. You did not use a namespace matching the "
                             "namespace of the actor.") from None
        worker.raise_core_error(e)
    known = handle_metadata.decode(metadata)
    if known is None:  # its creator registered none (another language): any method goes
        return ActorHandle(actor_id, f"actor {name!r}", None, name, namespace=namespace)
    return ActorHandle(actor_id, known["class_name"], known["methods"], name, namespace=namespace,
                       method_options=known["method_options"], groups=known["groups"])


def kill(actor: ActorHandle, *, no_restart: bool = True) -> None:
    """Ends the actor's process now: calls running there fail, and it is not restarted."""
    if not isinstance(actor, ActorHandle):
        raise ValueError(f"tessera.kill() only supported for actors. For tasks, try "
                         f"tessera.cancel(). Got: {type(actor).__name__}.")
    if not no_restart:
        raise ValueError("kill(no_restart=False) is not supported: a killed actor stays dead")
    worker.auto_init()
    try:
        _core.kill_actor(actor._actor_id)
    except _core.CoreError as e:
        worker.raise_core_error(e)

"""`@serve.deployment`, `Deployment` and `Application`, as Ray Serve's.

    @serve.deployment(num_replicas=2, user_config={"threshold": 0.5})
    class Model:
        def __init__(self, weights): ...
        def reconfigure(self, config): ...
        def __call__(self, request): ...

    app = Model.bind("weights.bin")             # an Application: deploy it, or bind it in
    ingress = Router.bind(app)                  # another's arguments (a DeploymentHandle there)

The decorator works bare or with options, on a class or a function. Options are checked once,
when given (the decorator, `.options()`), with Ray's error texts; only the options someone set
are kept (see _options.py), so a config file's options go over the code's, and the code's over
the defaults. `.options(...)` returns a copy with the given options over this one's (dict options
replace whole values). `.bind(*args, **kwargs)` returns an Application; function deployments
take no init args. build.py turns an Application into deployable specs.

Threading: a Deployment is an immutable value. Cost: the option checks.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any, Callable, Dict, Optional, Tuple

from tessera.serve import _options
from tessera.serve._options import DeploymentOptionUpdateType, classify_change

# Options `@serve.deployment` and `.options()` take besides those of _options.OPTIONS.
_IDENTITY = ("name",)


class Application:
    """One or more deployments bound with arguments that are deployed together: pass it to
    `serve.run`, bind it in another deployment's arguments (the other gets a DeploymentHandle
    to it), or name it in a config file's import_path."""

    def __init__(self, bound_deployment: "Deployment") -> None:
        self._bound_deployment = bound_deployment

    def __repr__(self) -> str:
        return f"Application({self._bound_deployment.name})"


class Deployment:
    """A class or function decorated with `@serve.deployment`: the code its replicas run, and
    its options."""

    def __init__(self, func_or_class: Callable, name: str, options: Dict[str, Any],
                 init_args: Tuple = (), init_kwargs: Optional[Dict[str, Any]] = None,
                 name_set: bool = False, _internal: bool = False,
                 replica_slice: Optional[Dict[str, Any]] = None) -> None:
        if not _internal:
            raise RuntimeError("The Deployment constructor should not be called directly. Use "
                               "`@serve.deployment` instead.")
        _check_name(name)
        self._func_or_class = func_or_class
        self._name = name
        self._name_set = name_set  # named explicitly (not after the class or function)
        self._options = dict(options)
        self._init_args = tuple(init_args)
        self._init_kwargs = dict(init_kwargs or {})
        # Not an option of Ray's: the TPU slice each replica takes whole (Serve LLM's builders
        # set it for a TPU model with a topology; see _with_replica_slice).
        self._replica_slice = dict(replica_slice) if replica_slice is not None else None

    # --- Ray's properties ------------------------------------------------------------------
    @property
    def name(self) -> str:
        """Unique name of this deployment within its application."""
        return self._name

    @property
    def version(self) -> Optional[str]:
        return self._options.get("version")

    @property
    def func_or_class(self) -> Callable:
        """The class or function this deployment wraps."""
        return self._func_or_class

    @property
    def num_replicas(self) -> Optional[int]:
        """Target number of replicas (None when autoscaling decides it)."""
        return self._resolved()["num_replicas"]

    @property
    def user_config(self) -> Any:
        return self._resolved()["user_config"]

    @property
    def max_ongoing_requests(self) -> int:
        return self._resolved()["max_ongoing_requests"]

    @property
    def max_queued_requests(self) -> int:
        return self._resolved()["max_queued_requests"]

    @property
    def ray_actor_options(self) -> Dict[str, Any]:
        return self._resolved()["ray_actor_options"]

    @property
    def init_args(self) -> Tuple:
        return self._init_args

    @property
    def init_kwargs(self) -> Dict[str, Any]:
        return dict(self._init_kwargs)

    @property
    def logging_config(self) -> Dict[str, Any]:
        return self._resolved()["logging_config"]

    @property
    def user_configured_option_names(self) -> set:
        """The options set in code (decorator and `.options()`), not left to defaults."""
        return set(self._options)

    def _resolved(self) -> Dict[str, Any]:
        return _options.resolve(self._options)

    # --- Ray's methods ---------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Deployments cannot be constructed directly. Use "
                           "`deployment.deploy() instead.`")

    def bind(self, *args: Any, **kwargs: Any) -> Application:
        """The deployment with these constructor arguments, as an Application. Arguments may be
        Applications: at runtime each is a DeploymentHandle to that deployment."""
        return Application(self.options(_init_args=args, _init_kwargs=kwargs, _internal=True))

    def options(self, func_or_class: Optional[Callable] = None, **kwargs: Any) -> "Deployment":
        """A copy of this deployment with the given options over its own (the others stay).
        Takes the options of `@serve.deployment`; see its docs."""
        kwargs.pop("_internal", None)  # Ray's marker of Serve's own calls; nothing differs here
        init_args = kwargs.pop("_init_args", self._init_args)
        init_kwargs = kwargs.pop("_init_kwargs", self._init_kwargs)
        name = kwargs.pop("name", None)
        _refuse_unknown("options", kwargs)
        layer = _options.check_layer(kwargs)
        merged = _options.merge(self._options, layer)
        target = self._func_or_class if func_or_class is None else func_or_class
        _check_init_args(target, init_args, init_kwargs)
        return Deployment(target, self._name if name is None else name, merged, init_args,
                          init_kwargs, name_set=self._name_set or name is not None,
                          _internal=True, replica_slice=self._replica_slice)

    def _with_replica_slice(self, replica_slice: Optional[Dict[str, Any]]) -> "Deployment":
        """A copy whose every replica takes a TPU slice of its own, which the serve controller
        reserves before it starts the replica (the replica actor in host 0's bundle, its child
        actors in the slice) and releases when the replica stops: `replica_slice` is
        {"accelerator_type": "TPU-V6E", "topology": "4x4", "sub_slice": bool (a block of a
        larger slice; False when left out)}; None: none. Every host's bundle gets the replica
        actor's resources (ray_actor_options) besides its chips. Internal (Serve LLM's
        builders): not with placement_group_bundles."""
        if replica_slice is not None:
            unknown = sorted(set(replica_slice) - {"accelerator_type", "topology", "sub_slice"})
            if unknown or not replica_slice.get("accelerator_type") or not replica_slice.get(
                    "topology"):
                raise ValueError(f"a replica slice needs accelerator_type and topology (and "
                                 f"may have sub_slice), got {replica_slice!r}")
        return Deployment(self._func_or_class, self._name, self._options, self._init_args,
                          self._init_kwargs, name_set=self._name_set, _internal=True,
                          replica_slice=replica_slice)

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, Deployment) and self._name == other._name
                and self._func_or_class is other._func_or_class
                and _options.resolve(self._options) == _options.resolve(other._options)
                and self._init_args == other._init_args
                and self._init_kwargs == other._init_kwargs
                and self._replica_slice == other._replica_slice)

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        return f"Deployment(name={self._name})"

    __repr__ = __str__


def _check_name(name: Any) -> None:
    if not isinstance(name, str):
        raise TypeError("name must be a string.")
    if not name:
        raise ValueError("A deployment's name must be a non-empty string.")
    if "#" in name:
        warnings.warn("Deployment names should not contain the '#' character, this will raise "
                      f"an error starting in Ray 2.46.0. Current name: {name}.", stacklevel=3)


def _refuse_unknown(function: str, kwargs: Dict[str, Any]) -> None:
    if "route_prefix" in kwargs:
        raise ValueError("`route_prefix` can no longer be specified at the deployment level. "
                         "Pass it to `serve.run` or in the application config instead.")
    for key in kwargs:
        if key not in _options.OPTIONS:
            raise TypeError(f"{function}() got an unexpected keyword argument '{key}'")


def _check_init_args(target: Callable, args: Any, kwargs: Any) -> None:
    if not isinstance(args, (tuple, list)):
        raise TypeError("init_args must be a tuple.")
    if not isinstance(kwargs, dict):
        raise TypeError("init_kwargs must be a dict.")
    if inspect.isfunction(target):
        if args:
            raise ValueError("init_args not supported for function deployments.")
        if kwargs:
            raise ValueError("init_kwargs not supported for function deployments.")


def deployment(_func_or_class: Optional[Callable] = None, **kwargs: Any) -> Any:
    """Decorator that converts a Python class or function to a `Deployment`.

        @serve.deployment                       # or @serve.deployment(num_replicas=2, ...)
        class MyDeployment: ...

    Options (each left unset unless given; defaults in parentheses):
      name (the class's or function's name), num_replicas (1; an int >= 1 or "auto": default
      autoscaling, with autoscaling_config's keys over it), ray_actor_options ({}; keys
      accelerator_type, memory, num_cpus (1), num_gpus, resources, runtime_env, label_selector,
      fallback_strategy), placement_group_bundles (None: bundles per replica, the replica in
      bundle 0), placement_group_strategy (PACK), max_replicas_per_node (None; 1..100, not with
      bundles), user_config (None; JSON, passed to reconfigure()), max_ongoing_requests (5),
      max_queued_requests (-1: no limit), autoscaling_config (None; a dict or
      AutoscalingConfig, not with an int num_replicas), graceful_shutdown_wait_loop_s (2),
      graceful_shutdown_timeout_s (20), health_check_period_s (10), health_check_timeout_s
      (30), logging_config (LoggingConfig()), request_router_config (RequestRouterConfig()),
      max_constructor_retry_count (20), version (deprecated).
    `route_prefix` is not a deployment option: give it to serve.run or the config file."""
    _refuse_unknown("deployment", {k: v for k, v in kwargs.items() if k not in _IDENTITY})
    name = kwargs.pop("name", None)
    if name is not None:
        _check_name(name)
    layer = _options.check_layer(kwargs)
    _options.check_combination(layer)

    def decorator(func_or_class: Callable) -> Deployment:
        if not callable(func_or_class):
            raise TypeError("@serve.deployment must be called on a class or function.")
        return Deployment(func_or_class, name or func_or_class.__name__, layer,
                          name_set=name is not None, _internal=True)

    return decorator(_func_or_class) if callable(_func_or_class) else decorator


__all__ = ["Application", "Deployment", "DeploymentOptionUpdateType", "classify_change",
           "deployment"]

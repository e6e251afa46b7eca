"""The options of a deployment (`@serve.deployment(...)`, `Deployment.options(...)` and a config
file's `deployments[]` entries): one table of each option's default, check and change class.

Options are kept as *layers*: dicts holding only the options someone set ("unset" tracking), so
a config file's layer goes over the code's, and the code's over the defaults (`merge`). A layer
is checked once, when given (`check_layer`): each value is validated and normalized
(autoscaling/logging/router configs become their config objects, num_replicas="auto" expands to
AutoscalingConfig.default() with the layer's own autoscaling keys over it). Dict options
(ray_actor_options, user_config, autoscaling_config) replace the lower layer's whole value; an
int num_replicas set over a lower autoscaling_config turns autoscaling off, and an
autoscaling_config set over a lower num_replicas turns the fixed count off.

`resolve(layer)` gives every option with the defaults filled in (JSON-ready); `classify_change`
says how an update of a deployment's options is applied (Ray's DeploymentOptionUpdateType).

Some checks need the runtime's own option checks (ray_actor_options values, placement group
bundles); those run when tessera's runtime package is importable and are skipped otherwise
(tests of a source tree without the built extension).

Threading: pure functions. Cost: a few dict operations and checks per option.
"""

from __future__ import annotations

import json
import warnings
from enum import Enum
from typing import Any, Callable, Dict, Optional, Tuple

from tessera.serve import _constants as constants
from tessera.serve._model import check_float, check_int, json_ready
from tessera.serve.config import AutoscalingConfig, LoggingConfig, RequestRouterConfig


class DeploymentOptionUpdateType(str, Enum):
    """How a change of an option reaches a running deployment (in increasing weight)."""

    LightWeight = "LightWeight"  # the target state only (e.g. num_replicas)
    NeedsReconfigure = "NeedsReconfigure"  # the controller's own bookkeeping
    NeedsActorReconfigure = "NeedsActorReconfigure"  # a reconfigure call to live replicas
    HeavyWeight = "HeavyWeight"  # new replicas by rolling update


_WEIGHT = {kind: index for index, kind in enumerate(DeploymentOptionUpdateType)}

ALLOWED_RAY_ACTOR_OPTIONS = (
    "accelerator_type", "memory", "num_cpus", "num_gpus", "resources", "runtime_env",
    "label_selector", "fallback_strategy",
)
PLACEMENT_GROUP_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")


# ---------------------------------------------------------------------------------------------
# Checks of single options: (name, value) -> normalized value.


def _num_replicas(name: str, value: Any) -> Any:
    if value is None or value == "auto":
        return value
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f'`num_replicas` must be an int or "auto", but got: {value!r}')
    if value <= 0:
        raise ValueError("num_replicas is expected to larger than 0")
    return value


def _max_ongoing_requests(name: str, value: Any) -> int:
    if value is None:
        raise ValueError("`max_ongoing_requests` must be non-null, got None.")
    return check_int(0, exclusive=True)(name, value)


def _max_queued_requests(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError("max_queued_requests must be an integer.")
    if value < 1 and value != -1:
        raise ValueError("max_queued_requests must be -1 (no limit) or a positive integer.")
    return value


def _user_config(name: str, value: Any) -> Any:
    if value is not None:
        try:
            json.dumps(value)
        except (TypeError, ValueError) as e:
            raise ValueError(f"user_config is not JSON-serializable: {e}.") from None
    return value


def _config_object(kind: type, what: str) -> Callable[[str, Any], Any]:
    def check(name: str, value: Any) -> Any:
        if value is None or isinstance(value, kind):
            return value
        if not isinstance(value, dict):
            raise TypeError(f"Got invalid type '{type(value)}' for {what}. Expected a "
                            "dictionary.")
        return kind(**value)

    return check


def _runtime_option_checks() -> Optional[Tuple[Callable, Callable]]:
    """The runtime's checks of actor options and placement group bundles, when the runtime
    package is importable (it needs the built extension)."""
    try:
        from tessera._private.options import validate_actor_options
        from tessera.util.placement_group import _check_bundles
    except ImportError:
        return None
    return validate_actor_options, _check_bundles


def _ray_actor_options(name: str, value: Any) -> dict:
    if not isinstance(value, dict):
        raise TypeError(f'Got invalid type "{type(value)}" for ray_actor_options. Expected a '
                        "dictionary.")
    for option in value:
        if option not in ALLOWED_RAY_ACTOR_OPTIONS:
            raise ValueError(f"Specifying '{option}' in ray_actor_options is not allowed. "
                             f"Allowed options: {set(ALLOWED_RAY_ACTOR_OPTIONS)}")
    checks = _runtime_option_checks()
    if checks is not None:
        checks[0](dict(value), in_options=True)
    return dict(value)


def _placement_group_bundles(name: str, value: Any) -> Any:
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(b, dict) for b in value):
        raise ValueError("The placement group `bundles` argument must be a list of "
                         f"dictionaries and cannot be empty. Received {value!r}.")
    checks = _runtime_option_checks()
    if checks is not None:
        checks[1](value)
    return [dict(bundle) for bundle in value]


def _placement_group_strategy(name: str, value: Any) -> Any:
    if value is not None and value not in PLACEMENT_GROUP_STRATEGIES:
        raise ValueError(f"Invalid placement group strategy {value}. Supported strategies are: "
                         f"{list(PLACEMENT_GROUP_STRATEGIES)}.")
    return value


def _max_replicas_per_node(name: str, value: Any) -> Any:
    if value is None:
        return None
    top = constants.MAX_REPLICAS_PER_NODE_MAX_VALUE
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"Get invalid type '{type(value)}' for max_replicas_per_node. Expected "
                        f"None or an integer in the range of [1, {top}].")
    if not 1 <= value <= top:
        raise ValueError(f"Invalid max_replicas_per_node {value}. Valid values are None or an "
                         f"integer in the range of [1, {top}].")
    return value


def _version(name: str, value: Any) -> Any:
    if value is not None and not isinstance(value, str):
        raise TypeError("version must be a string.")
    return value


class _Option:
    __slots__ = ("default", "change", "check")

    def __init__(self, default: Callable[[], Any], change: DeploymentOptionUpdateType,
                 check: Callable[[str, Any], Any]) -> None:
        self.default = default
        self.change = change
        self.check = check


_L, _R, _A, _H = (DeploymentOptionUpdateType.LightWeight,
                  DeploymentOptionUpdateType.NeedsReconfigure,
                  DeploymentOptionUpdateType.NeedsActorReconfigure,
                  DeploymentOptionUpdateType.HeavyWeight)

OPTIONS: Dict[str, _Option] = {
    "num_replicas": _Option(lambda: 1, _L, _num_replicas),
    "max_ongoing_requests": _Option(lambda: constants.DEFAULT_MAX_ONGOING_REQUESTS, _A,
                                    _max_ongoing_requests),
    "max_queued_requests": _Option(lambda: -1, _L, _max_queued_requests),
    "user_config": _Option(lambda: None, _A, _user_config),
    "autoscaling_config": _Option(lambda: None, _A,
                                  _config_object(AutoscalingConfig, "autoscaling_config")),
    "graceful_shutdown_wait_loop_s": _Option(
        lambda: constants.DEFAULT_GRACEFUL_SHUTDOWN_WAIT_LOOP_S, _A, check_float(0)),
    "graceful_shutdown_timeout_s": _Option(
        lambda: constants.DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT_S, _R, check_float(0)),
    "health_check_period_s": _Option(lambda: constants.DEFAULT_HEALTH_CHECK_PERIOD_S, _R,
                                     check_float(0, exclusive=True)),
    "health_check_timeout_s": _Option(lambda: constants.DEFAULT_HEALTH_CHECK_TIMEOUT_S, _R,
                                      check_float(0, exclusive=True)),
    "logging_config": _Option(LoggingConfig, _A, _config_object(LoggingConfig, "logging_config")),
    "request_router_config": _Option(RequestRouterConfig, _A,
                                     _config_object(RequestRouterConfig,
                                                    "request_router_config")),
    "max_constructor_retry_count": _Option(lambda: constants.DEFAULT_CONSTRUCTOR_RETRY_COUNT,
                                           _R, check_int(0, exclusive=True)),
    "ray_actor_options": _Option(dict, _H, _ray_actor_options),
    "placement_group_bundles": _Option(lambda: None, _H, _placement_group_bundles),
    "placement_group_strategy": _Option(lambda: None, _H, _placement_group_strategy),
    "max_replicas_per_node": _Option(lambda: None, _H, _max_replicas_per_node),
    "version": _Option(lambda: None, _H, _version),
}

# The options of the replica's process (changing one starts new replicas); the others are the
# deployment config's.
REPLICA_OPTIONS = ("ray_actor_options", "placement_group_bundles", "placement_group_strategy",
                   "max_replicas_per_node")
# The code's identity (callable and init args): a change is a code update.
CODE_VERSION = "code_version"


# ---------------------------------------------------------------------------------------------
# Layers.


def check_layer(given: Dict[str, Any]) -> Dict[str, Any]:
    """Checks one layer of options (the keyword arguments of one call, or one config entry) and
    returns it normalized. Unknown names are the caller's to refuse."""
    layer = {name: OPTIONS[name].check(name, value) for name, value in given.items()}
    num_replicas = layer.get("num_replicas")
    if isinstance(num_replicas, int) and layer.get("autoscaling_config") is not None:
        raise ValueError("Manually setting num_replicas is not allowed when autoscaling_config "
                         "is provided.")
    if num_replicas == "auto":
        layer["autoscaling_config"] = _auto_autoscaling(layer.get("autoscaling_config"))
    if "version" in layer:
        warnings.warn("`version` in `@serve.deployment` has been deprecated. Explicitly "
                      "specifying version will raise an error in the future!",
                      DeprecationWarning, stacklevel=3)
    return layer


def _auto_autoscaling(given: Optional[AutoscalingConfig]) -> AutoscalingConfig:
    """num_replicas="auto": AutoscalingConfig.default() with the given config's set fields
    over it."""
    fields = AutoscalingConfig.default().dict(exclude_unset=True)
    if given is not None:
        fields.update(given.dict(exclude_unset=True))
    return AutoscalingConfig(**fields)


def merge(lower: Dict[str, Any], upper: Dict[str, Any]) -> Dict[str, Any]:
    """`upper`'s options over `lower`'s (whole values), then the combination checks."""
    merged = {**lower, **upper}
    if isinstance(upper.get("num_replicas"), int) and "autoscaling_config" not in upper:
        merged.pop("autoscaling_config", None)
    if upper.get("autoscaling_config") is not None and "num_replicas" not in upper:
        merged.pop("num_replicas", None)
    check_combination(merged)
    return merged


def check_combination(options: Dict[str, Any]) -> None:
    """The checks between options of one deployment (after layering)."""
    bundles = options.get("placement_group_bundles")
    if options.get("placement_group_strategy") is not None and bundles is None:
        raise ValueError("If `placement_group_strategy` is provided, `placement_group_bundles` "
                         "must also be provided.")
    if options.get("max_replicas_per_node") is not None and bundles is not None:
        raise ValueError("Setting max_replicas_per_node is not allowed when "
                         "placement_group_bundles is provided.")
    if bundles is not None:
        _check_fits_first_bundle(options.get("ray_actor_options") or {}, bundles[0])


def _check_fits_first_bundle(actor_options: dict, bundle: dict) -> None:
    prefix = ("When using `placement_group_bundles`, the replica actor will be placed in the "
              "first bundle, so the resource requirements for the actor must be a subset of the "
              "first bundle.")
    demands = [("num_cpus", "CPU", actor_options.get("num_cpus", 1)),
               ("num_gpus", "GPU", actor_options.get("num_gpus") or 0)]
    for option, resource, amount in demands:
        if bundle.get(resource, 0) < amount:
            raise ValueError(f"{prefix} `{option}` for the actor is {amount}, but the bundle "
                             f"only has {bundle.get(resource, 0)} `{resource}` specified.")
    for resource, amount in (actor_options.get("resources") or {}).items():
        if bundle.get(resource, 0) < amount:
            raise ValueError(f"{prefix} `{resource}` requirement for the actor is {amount}, but "
                             f"the bundle only has {bundle.get(resource, 0)} `{resource}` "
                             "specified.")


def resolve(layer: Dict[str, Any]) -> Dict[str, Any]:
    """Every option: the layer's, else its default; JSON-ready (configs as dicts). num_replicas
    is None when autoscaling decides it, else an int (1 for None); ray_actor_options gets num_cpus 1 unless set (a
    replica holds one CPU by default); a placement group's strategy defaults to PACK."""
    options = {name: layer[name] if name in layer else option.default()
               for name, option in OPTIONS.items()}
    if options["autoscaling_config"] is not None:
        options["num_replicas"] = None
    elif not isinstance(options["num_replicas"], int):
        options["num_replicas"] = 1  # None ("use the default"), or "auto" turned off above
    actor_options = dict(options["ray_actor_options"] or {})
    if actor_options.get("num_cpus") is None:
        actor_options["num_cpus"] = 1
    options["ray_actor_options"] = actor_options
    if options["placement_group_bundles"] is not None:
        options["placement_group_strategy"] = options["placement_group_strategy"] or "PACK"
    return json_ready(options)


def classify_change(old_options: Dict[str, Any],
                    new_options: Dict[str, Any]) -> Optional[str]:
    """How an update from `old_options` to `new_options` (option layers, as set: adding,
    removing or changing an option each count; "code_version" may be included) reaches the
    running deployment: "LightWeight", "NeedsReconfigure", "NeedsActorReconfigure" or
    "HeavyWeight" (the heaviest among the changed options), or None when nothing changed."""
    heaviest: Optional[DeploymentOptionUpdateType] = None
    for name in sorted(set(old_options) | set(new_options)):
        if name == CODE_VERSION:
            change = DeploymentOptionUpdateType.HeavyWeight
        elif name in OPTIONS:
            change = OPTIONS[name].change
        else:
            raise ValueError(f"Unknown deployment option '{name}'. Valid ones are "
                             f"{sorted([*OPTIONS, CODE_VERSION])}.")
        if _changed(old_options, new_options, name):
            if heaviest is None or _WEIGHT[change] > _WEIGHT[heaviest]:
                heaviest = change
    return None if heaviest is None else heaviest.value


_ABSENT = object()


def _changed(old: Dict[str, Any], new: Dict[str, Any], name: str) -> bool:
    before, after = old.get(name, _ABSENT), new.get(name, _ABSENT)
    if before is _ABSENT or after is _ABSENT:
        return before is not after
    return json_ready(before) != json_ready(after)

"""Options of remote functions and actors: Ray's checks and error texts (`@remote(...)`,
`.options(...)`), and their translation into the options dict the core takes
(`_core.submit_task`, `_core.create_actor`).

The core dict holds exactly these keys:
  resources          {name: amount}, {"CPU": 1.0, "GPU": 2.0, "custom": 0.5, "memory": 1000.0}:
                     amounts at the core's 4 decimal places, byte resources in whole bytes,
                     zeros left out ({} for none); the binding makes the core's ResourceSet
  label_selectors    [primary selector, then each fallback_strategy entry's selector]; the
                     accelerator_type is the label tessera.io/accelerator-type of the primary
  placement_group    the group's id hex ("" none); bundle_index (-1 any bundle)
  node_affinity      node id hex ("" none); node_affinity_soft; spread (strategy "SPREAD")
  name, env          display/actor name; runtime_env's env_vars (the job's runtime_env and the
                     folders are merged in per call: runtime_env.Resolved)
  tasks:  max_retries, retry_exceptions, retry_exception_types (the list, or None)
  actors: max_restarts, max_task_retries, max_concurrency, concurrency_groups ({name: limit}),
          detached, get_if_exists, namespace ("" when not given: the caller's namespace applies)
Counts of -1 (infinite) become INFINITE_RETRIES. A scheduling_strategy of None gives no
placement group here: inheriting a capturing parent's group is the caller's part.

Threading: pure functions. Cost: a few dict operations per call.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Optional, Union

from ..util.scheduling_strategies import (
    DEFAULT_SCHEDULING_STRATEGY,
    SPREAD_SCHEDULING_STRATEGY,
    NodeAffinitySchedulingStrategy,
    PlacementGroupSchedulingStrategy,
)

INFINITE_RETRIES = 1_000_000  # what -1 (infinite) retries/restarts become for the core
DEFAULT_TASK_MAX_RETRIES = 3
MAX_NUM_RETURNS = 10_000  # the core's limit on a task's returns (internal::kMaxTaskReturns)
# Calls of an async actor in flight at once, as Ray's default: a call in flight holds no thread
# (the worker hands it to the actor's event loop and is answered when it ends).
DEFAULT_ASYNC_MAX_CONCURRENCY = 1000
ACCELERATOR_TYPE_LABEL = "tessera.io/accelerator-type"
BYTE_RESOURCES = ("memory", "object_store_memory")
RESOURCE_UNITS = 10000  # the core's fixed point: 4 decimal places


class _Option:
    """One option's type constraint and value check. The check returns a ValueError text or
    None; checks of nested values raise their own TypeError."""

    def __init__(
        self, types: Any, check: Optional[Callable[[Any], Optional[str]]] = None
    ) -> None:
        self.types = types
        self.check = check

    def validate(self, keyword: str, value: Any) -> None:
        if not isinstance(value, self.types):
            raise TypeError(
                f"The type of keyword '{keyword}' must be {self.types}, "
                f"but received type {type(value)}"
            )
        if self.check is not None:
            error = self.check(value)
            if error:
                raise ValueError(error)



def exception_type_name(cls: Union[type, str]) -> str:
    """How retry_exceptions names an exception class: "module.QualName" (a handle found by name
    has the names already: handle_metadata.py)."""
    return cls if isinstance(cls, str) else f"{cls.__module__}.{cls.__qualname__}"

def _counting_option(name: str, infinite: bool) -> _Option:
    if infinite:
        return _Option(
            (int, type(None)),
            lambda x: None
            if x is None or x >= -1
            else f"The keyword '{name}' only accepts None, 0, -1 or a positive integer, "
            "where -1 represents infinity.",
        )
    return _Option(
        (int, type(None)),
        lambda x: None
        if x is None or x >= 0
        else f"The keyword '{name}' only accepts None, 0 or a positive integer.",
    )


def _resource_quantity_error(name: str, quantity: Any) -> Optional[str]:
    if not isinstance(quantity, (int, float)):
        return (
            f"The quantity of resource {name} must be a number, "
            f"but received type {type(quantity)}"
        )
    if quantity < 0:
        return f"The quantity of resource {name} cannot be negative"
    if isinstance(quantity, float) and quantity != 0.0 and int(quantity * RESOURCE_UNITS) == 0:
        return (
            f"The precision of the fractional quantity of resource {name} "
            "cannot go beyond 0.0001"
        )
    return None


def _resource_option(name: str) -> _Option:
    return _Option(
        (float, int, type(None)),
        lambda x: None if x is None else _resource_quantity_error(name, x),
    )


def _resources_error(resources: Optional[dict]) -> Optional[str]:
    if resources is None:
        return None
    if "CPU" in resources or "GPU" in resources:
        return (
            "Use the 'num_cpus' and 'num_gpus' keyword instead of 'CPU' and 'GPU' "
            "in 'resources' keyword"
        )
    for name, quantity in resources.items():
        error = _resource_quantity_error(name, quantity)
        if error:
            return error
    return None


# One expression of a selector value: v, !v, in(a,b), !in(a,b), exists(), !exists().
_TOKEN = r"[^\s,()!]+"
_EXPRESSION = rf"!?(?:in\(\s*{_TOKEN}(?:\s*,\s*{_TOKEN})*\s*\)|exists\(\)|{_TOKEN})"
_SELECTOR_VALUE = re.compile(rf"{_EXPRESSION}(?:,{_EXPRESSION})*")


def _validate_label_selector(selector: Any, keyword: str) -> None:
    if not isinstance(selector, dict):
        raise TypeError(
            f"The type of '{keyword}' must be a dict, but received type {type(selector)}"
        )
    for key, value in selector.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(
                "Label selector keys and values must be str, "
                f"but '{keyword}' has {key!r}: {value!r}"
            )
        if not key:
            raise ValueError(f"'{keyword}' has an empty label key")
        if value and not _SELECTOR_VALUE.fullmatch(value):
            raise ValueError(
                f"Invalid label selector value {value!r} for key {key!r} in '{keyword}': "
                "expected 'v', '!v', 'in(a,b)', '!in(a,b)', 'exists()' or '!exists()'"
            )


def _label_selector_error(selector: Optional[dict]) -> Optional[str]:
    if selector is not None:
        _validate_label_selector(selector, "label_selector")
    return None


def _fallback_strategy_error(fallbacks: Optional[list]) -> Optional[str]:
    for entry in fallbacks or ():
        if not isinstance(entry, dict) or set(entry) != {"label_selector"}:
            return (
                "Each 'fallback_strategy' entry must be a dict with the one key "
                f"'label_selector', but received {entry!r}"
            )
        _validate_label_selector(entry["label_selector"], "fallback_strategy")
    return None


def _scheduling_strategy_error(strategy: Any) -> Optional[str]:
    if isinstance(strategy, str) and strategy not in (
        DEFAULT_SCHEDULING_STRATEGY,
        SPREAD_SCHEDULING_STRATEGY,
    ):
        return (
            f"Invalid scheduling_strategy value {strategy!r}. Valid values are "
            f"'{DEFAULT_SCHEDULING_STRATEGY}', '{SPREAD_SCHEDULING_STRATEGY}', None, or a "
            "strategy from tessera.util.scheduling_strategies."
        )
    return None


def _runtime_env_error(runtime_env: Optional[dict]) -> Optional[str]:
    from tessera._private import runtime_env as runtime_envs

    runtime_envs.validate(runtime_env)  # raises its own one-line TypeError or ValueError
    return None


def _is_exception_class(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, Exception)


def _retry_exceptions_error(value: Any) -> Optional[str]:
    if isinstance(value, bool) or all(_is_exception_class(x) for x in value):
        return None
    return "retry_exceptions must be either a boolean or a list of exceptions"


def _num_returns_error(value: Any) -> Optional[str]:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)
                         and 0 <= value <= MAX_NUM_RETURNS):
        return None
    if value == "streaming":
        return None
    if value == "dynamic":
        return ("num_returns='dynamic' (Ray's older generators) is not supported: use "
                "num_returns='streaming', whose values arrive as they are made")
    return f"num_returns must be an int between 0 and {MAX_NUM_RETURNS}, but received {value!r}"


def _concurrency_groups_error(groups: Any) -> Optional[str]:
    if groups is None:
        return None
    if not isinstance(groups, dict):
        return ("concurrency_groups must be a dict of group name to the number of its calls run "
                f"at once, like {{'io': 2}}, but received {groups!r}")
    for name, limit in groups.items():
        if not isinstance(name, str) or not name:
            return f"concurrency group names must be non-empty strings, but received {name!r}"
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            return (f"The max concurrency of concurrency group '{name}' must be a positive "
                    f"integer, but received {limit!r}")
    return None


def _lifetime_error(value: Any) -> Optional[str]:
    if value in (None, "detached", "non_detached"):
        return None
    return "actor `lifetime` argument must be one of 'detached', 'non_detached' and 'None'."


_COMMON_OPTIONS: Dict[str, _Option] = {
    "accelerator_type": _Option((str, type(None))),
    "memory": _resource_option("memory"),
    "name": _Option((str, type(None))),
    "num_cpus": _resource_option("num_cpus"),
    "num_gpus": _resource_option("num_gpus"),
    "resources": _Option((dict, type(None)), _resources_error),
    "label_selector": _Option((dict, type(None)), _label_selector_error),
    "fallback_strategy": _Option((list, type(None)), _fallback_strategy_error),
    "runtime_env": _Option((dict, type(None)), _runtime_env_error),
    "scheduling_strategy": _Option(
        (type(None), str, PlacementGroupSchedulingStrategy, NodeAffinitySchedulingStrategy),
        _scheduling_strategy_error,
    ),
    "enable_task_events": _Option(bool),
    "_metadata": _Option((dict, type(None))),
}

TASK_OPTIONS: Dict[str, _Option] = {
    **_COMMON_OPTIONS,
    "num_returns": _Option((int, str, type(None)), _num_returns_error),
    "max_calls": _counting_option("max_calls", infinite=False),
    "max_retries": _counting_option("max_retries", infinite=True),
    "retry_exceptions": _Option((bool, list, tuple), _retry_exceptions_error),
}

ACTOR_OPTIONS: Dict[str, _Option] = {
    **_COMMON_OPTIONS,
    "max_restarts": _counting_option("max_restarts", infinite=True),
    "max_task_retries": _counting_option("max_task_retries", infinite=True),
    "max_concurrency": _counting_option("max_concurrency", infinite=False),
    "max_pending_calls": _counting_option("max_pending_calls", infinite=True),
    "namespace": _Option((str, type(None))),
    "lifetime": _Option((str, type(None)), _lifetime_error),
    "get_if_exists": _Option(bool),
    "concurrency_groups": _Option((list, dict, type(None)), _concurrency_groups_error),
    "allow_out_of_order_execution": _Option(bool),
}


# `@tessera.method(...)` and `handle.method.options(...)`: one call's options.
METHOD_OPTIONS: Dict[str, _Option] = {
    "num_returns": TASK_OPTIONS["num_returns"],
    "concurrency_group": _Option((str, type(None))),
    "max_task_retries": ACTOR_OPTIONS["max_task_retries"],
    "retry_exceptions": TASK_OPTIONS["retry_exceptions"],
    "enable_task_events": _Option(bool),
    "name": _Option((str, type(None))),
}


def _validate_keys(options: dict, table: Dict[str, _Option], kind: str) -> None:
    for keyword, value in options.items():
        option = table.get(keyword)
        if option is None:
            raise ValueError(
                f"Invalid option keyword {keyword} for {kind}. Valid ones are {list(table)}."
            )
        option.validate(keyword, value)


def validate_task_options(options: dict, in_options: bool) -> None:
    """Checks a remote function's options (in_options: given to .options(), not @remote)."""
    _validate_keys(options, TASK_OPTIONS, "remote functions")
    if in_options and "max_calls" in options:
        raise ValueError("Setting 'max_calls' is not supported in '.options()'.")


def validate_actor_options(options: dict, in_options: bool) -> None:
    """Checks an actor class's options (in_options: given to .options(), not @remote)."""
    _validate_keys(options, ACTOR_OPTIONS, "actors")
    if in_options and "concurrency_groups" in options:
        raise ValueError("Setting 'concurrency_groups' is not supported in '.options()'.")
    if (options.get("max_restarts") or 0) == 0 and (options.get("max_task_retries") or 0) != 0:
        raise ValueError(
            "'max_task_retries' cannot be set if 'max_restarts' "
            "is 0 or if 'max_restarts' is not set."
        )
    if options.get("get_if_exists") and not options.get("name"):
        raise ValueError("The actor name must be specified to use `get_if_exists`.")
    if options.get("name") == "":
        raise ValueError("Actor name cannot be an empty string.")


def validate_method_options(options: dict) -> None:
    """Checks an actor method's options (`@tessera.method` or `.options` on a method)."""
    _validate_keys(options, METHOD_OPTIONS, "actor methods")
    if options.get("concurrency_group") == "":
        raise ValueError("concurrency_group cannot be an empty string")


def method_call_options(options: dict) -> dict:
    """The options dict `_core.submit_actor_task` takes for a call with these (validated)
    options: max_task_retries (-1: the actor's), retry_exceptions and retry_exception_types (the
    classes: the caller names them as the worker matches them), concurrency_group ("": the method's or the default group), num_returns."""
    retry_exceptions = options.get("retry_exceptions", False)
    retry_types = [] if isinstance(retry_exceptions, bool) else list(retry_exceptions)
    retries = options.get("max_task_retries")
    return {
        "max_task_retries": -1 if retries is None else _count(retries, 0),
        "retry_exceptions": retry_exceptions is True or bool(retry_types),
        "retry_exception_types": retry_types,
        "concurrency_group": options.get("concurrency_group") or "",
        **_returns(options.get("num_returns")),
    }


def _returns(num_returns: Any) -> dict:
    """The core's num_returns and streaming for a (validated) num_returns option."""
    if num_returns == "streaming":
        return {"num_returns": 1, "streaming": True}
    return {"num_returns": 1 if num_returns is None else num_returns, "streaming": False}


def _format_amount(name: str, quantity: float) -> str:
    if name in BYTE_RESOURCES:
        return f"{round(quantity)}B"
    units = round(quantity * RESOURCE_UNITS)
    whole, fraction = divmod(units, RESOURCE_UNITS)
    return str(whole) if fraction == 0 else f"{whole}.{fraction:04d}".rstrip("0")


def rounded_resources(demand: Dict[str, float]) -> Dict[str, float]:
    """{name: quantity} at the core's precision (4 decimal places, whole bytes), zeros left out:
    the amounts _core turns into a resource set."""
    amounts = {name: _rounded_amount(name, quantity) for name, quantity in sorted(demand.items())}
    return {name: amount for name, amount in amounts.items() if amount != 0}


def format_resources(demand: Dict[str, float]) -> str:
    """The core's resource set text for {name: quantity} ("CPU=1,GPU=0.5"; zeros left out)."""
    amounts = ((name, _format_amount(name, quantity)) for name, quantity in sorted(demand.items()))
    return ",".join(f"{name}={amount}" for name, amount in amounts if amount not in ("0", "0B"))


def _rounded_amount(name: str, quantity: float) -> float:
    if name in BYTE_RESOURCES:
        return float(round(quantity))
    return round(quantity * RESOURCE_UNITS) / RESOURCE_UNITS


def _resource_amounts(options: dict, default_cpus: float) -> Dict[str, float]:
    demand: Dict[str, float] = dict(options.get("resources") or {})
    cpus = options.get("num_cpus")
    demand["CPU"] = default_cpus if cpus is None else cpus
    demand["GPU"] = options.get("num_gpus") or 0
    if options.get("memory") is not None:
        demand["memory"] = options["memory"]
    return rounded_resources(demand)


def _label_selectors(options: dict) -> List[Dict[str, str]]:
    primary = dict(options.get("label_selector") or {})
    accelerator_type = options.get("accelerator_type")
    if accelerator_type is not None:
        given = primary.setdefault(ACCELERATOR_TYPE_LABEL, accelerator_type)
        if given != accelerator_type:
            raise ValueError(
                f"accelerator_type {accelerator_type!r} conflicts with label_selector "
                f"{ACCELERATOR_TYPE_LABEL}={given!r}"
            )
    fallbacks = [dict(entry["label_selector"]) for entry in options.get("fallback_strategy") or ()]
    return [primary, *fallbacks] if primary or fallbacks else []


def _placement(strategy: Any) -> dict:
    placement = {
        "placement_group": "",
        "bundle_index": -1,
        "node_affinity": "",
        "node_affinity_soft": False,
        "spread": strategy == SPREAD_SCHEDULING_STRATEGY,
    }
    if isinstance(strategy, PlacementGroupSchedulingStrategy):
        if strategy.placement_group is not None:
            placement["placement_group"] = strategy.placement_group.id.hex()
        placement["bundle_index"] = strategy.placement_group_bundle_index
    elif isinstance(strategy, NodeAffinitySchedulingStrategy):
        placement["node_affinity"] = strategy.node_id
        placement["node_affinity_soft"] = bool(strategy.soft)
    elif strategy is not None and not isinstance(strategy, str):
        raise TypeError(f"scheduling_strategy of type {type(strategy).__name__} is not supported")
    return placement


def _count(value: Optional[int], default: int) -> int:
    if value is None:
        return default
    return INFINITE_RETRIES if value == -1 else value


def _common_core_options(options: dict, default_cpus: float) -> dict:
    return {
        "resources": _resource_amounts(options, default_cpus),
        "label_selectors": _label_selectors(options),
        **_placement(options.get("scheduling_strategy")),
        "name": options.get("name") or "",
        "env": dict((options.get("runtime_env") or {}).get("env_vars") or {}),
    }


def task_core_options(options: dict) -> dict:
    """The core's options dict for a task with these (validated) options."""
    retry_exceptions = options.get("retry_exceptions", False)
    retry_types = None if isinstance(retry_exceptions, bool) else list(retry_exceptions)
    return {
        **_common_core_options(options, default_cpus=1),
        "max_retries": _count(options.get("max_retries"), DEFAULT_TASK_MAX_RETRIES),
        **_returns(options.get("num_returns")),
        "retry_exceptions": retry_exceptions is True or bool(retry_types),
        "retry_exception_types": retry_types,
    }


_ACTOR_DEMAND_KEYS = ("num_cpus", "num_gpus", "resources", "accelerator_type")


def actor_core_options(options: dict, has_async_methods: bool = False) -> dict:
    """The core's options dict for an actor with these (validated) options. An actor that asks
    for none of num_cpus/num_gpus/resources/accelerator_type demands nothing (Ray's running
    demand of 0 CPU); one that asks for any of them gets 1 CPU unless num_cpus says otherwise."""
    asks = any(options.get(key) is not None for key in _ACTOR_DEMAND_KEYS)
    max_concurrency = options.get("max_concurrency")
    if max_concurrency is None:
        max_concurrency = DEFAULT_ASYNC_MAX_CONCURRENCY if has_async_methods else 1
    return {
        **_common_core_options(options, default_cpus=1 if asks else 0),
        "max_restarts": _count(options.get("max_restarts"), 0),
        "max_task_retries": _count(options.get("max_task_retries"), 0),
        "max_concurrency": max_concurrency,
        "concurrency_groups": dict(options.get("concurrency_groups") or {}),
        "detached": options.get("lifetime") == "detached",
        "get_if_exists": bool(options.get("get_if_exists", False)),
        "namespace": options.get("namespace") or "",
    }

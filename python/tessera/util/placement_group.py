"""Placement groups from Python, as Ray's `ray.util.placement_group`: bundles of resources
reserved all or nothing under a strategy, then used by tasks and actors through
PlacementGroupSchedulingStrategy.

`placement_group(...)` returns at once; the reservation is made by the core on a background
thread (the head places every bundle or none; a group no node can hold yet stays PENDING, as in
Ray, until the cluster grows or it is removed; `_timeout_s` bounds the wait), and `pg.ready()`
is an ObjectRef that resolves to the group once it is made (or fails with the reason), so
`tessera.get(pg.ready())` and `tessera.wait([pg.ready()])` work as in Ray.
`remove_placement_group(pg)` releases it (a group already gone: nothing to do); the tasks and
actors inside it end. A task or actor placed with `placement_group_capture_child_tasks=True`
puts what it submits with no scheduling strategy into its group too.

Threading: any thread. Cost: one thread per group while its reservation is pending.
"""

from __future__ import annotations

import secrets
import threading
from typing import Any, Dict, List, Optional

from tessera import _core
from tessera._private import executor, options as option_checks, serialization, worker
from tessera.util.scheduling_strategies import PlacementGroupSchedulingStrategy

VALID_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")


class PlacementGroupID:
    """A group's id: the name the cluster knows it by (a group made without a name gets a
    random one). `hex()` is that name, `binary()` its UTF-8 bytes; PlacementGroupID(binary)
    is the same id again."""

    def __init__(self, name) -> None:
        if isinstance(name, (bytes, bytearray)):
            name = bytes(name).decode()
        if not isinstance(name, str):
            raise TypeError(f"a placement group id is a str or bytes, got {type(name).__name__}")
        self._name = name

    def hex(self) -> str:
        return self._name

    def binary(self) -> bytes:
        return self._name.encode()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlacementGroupID) and other._name == self._name

    def __hash__(self) -> int:
        return hash(self._name)

    def __repr__(self) -> str:
        return f"PlacementGroupID({self._name})"


class PlacementGroup:
    """A placement group: `ready()`, `wait(timeout_seconds)`, `bundle_specs`, `bundle_count`."""

    def __init__(self, name: str, bundles: List[Dict[str, float]], strategy: str,
                 ready_ref: Optional["_core.ObjectRef"] = None) -> None:
        self.id = PlacementGroupID(name)
        self._bundles = [dict(b) for b in bundles]
        self._strategy = strategy
        self._ready_ref = ready_ref
        self._bundle_nodes: Optional[List[str]] = None

    @property
    def bundle_specs(self) -> List[Dict[str, float]]:
        return [dict(b) for b in self._bundles]

    @property
    def bundle_count(self) -> int:
        return len(self._bundles)

    @property
    def is_empty(self) -> bool:
        return not self._bundles

    def ready(self) -> "_core.ObjectRef":
        """An ObjectRef resolving to this group once every bundle is placed."""
        if self._ready_ref is None:
            raise ValueError("this placement group was not created by this process; "
                             "use wait() instead")
        return self._ready_ref

    def wait(self, timeout_seconds: Optional[float] = 30) -> bool:
        """Whether the group is made within `timeout_seconds`."""
        if self._ready_ref is not None:
            ready, _ = worker.wait([self._ready_ref], timeout=timeout_seconds)
            if not ready:
                return False
            try:
                worker.get(self._ready_ref)
            except Exception:
                return False
            return True
        table = placement_group_table(self)
        return table.get("state") == "CREATED"

    def __reduce__(self):
        return (PlacementGroup, (self.id.hex(), self._bundles, self._strategy))

    def __repr__(self) -> str:
        return f"PlacementGroup({self.id.hex()}, {self._strategy}, {self._bundles})"


def _check_bundles(bundles: Any, what: str = "bundles") -> List[Dict[str, float]]:
    if not isinstance(bundles, list) or not bundles:
        raise ValueError(f"The placement group `{what}` argument must be a list of dictionaries "
                         f"and cannot be empty. Received {bundles!r}.")
    for bundle in bundles:
        if not isinstance(bundle, dict):
            raise ValueError(f"Bundles must be dictionaries of resource names to amounts, got "
                             f"{bundle!r}")
        if not bundle or all(v == 0 for v in bundle.values()):
            raise ValueError("Bundles cannot be an empty dictionary or resources with only 0 "
                             f"values. Bundles: {bundles}")
        for name, amount in bundle.items():
            if not isinstance(name, str):
                raise TypeError(f"Bundle resource names must be str, got {name!r}")
            if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0:
                raise ValueError(f"Bundle resource {name!r} must be a non-negative number, got "
                                 f"{amount!r}")
    return bundles


def _check_selectors(selectors: Any, count: int, what: str) -> Optional[List[Dict[str, str]]]:
    if selectors is None:
        return None
    if not isinstance(selectors, list) or len(selectors) != count:
        raise ValueError(f"The length of `{what}` should equal the number of bundles "
                         f"({count}), got {selectors!r}.")
    return selectors


def placement_group(bundles: List[Dict[str, float]], strategy: str = "PACK", name: str = "",
                    lifetime: Optional[str] = None, _soft_target_node_id: Optional[str] = None,
                    bundle_label_selector: Optional[List[Dict[str, str]]] = None,
                    fallback_strategy: Optional[List[Dict[str, Any]]] = None,
                    _timeout_s: Optional[float] = None,
                    same_label: Optional[str] = None) -> PlacementGroup:
    """Reserves `bundles` (all or none) under `strategy`; returns at once (see ready()). It waits
    for room (and, when no node could hold it, for the cluster to grow) until it is placed or
    removed; `_timeout_s` (a Tessera extension) withdraws it after that many seconds instead.
    `same_label` (a Tessera extension): every bundle on nodes that share one value of this
    label key, e.g. "tessera.io/fabric-domain" for one NVLink domain."""
    if same_label is not None and (not isinstance(same_label, str) or not same_label):
        raise ValueError(f"same_label must be a label key, got {same_label!r}")
    _check_bundles(bundles)
    if strategy not in VALID_STRATEGIES:
        raise ValueError(f"Invalid placement group strategy {strategy}. Supported strategies "
                         f"are: {list(VALID_STRATEGIES)}.")
    if lifetime not in (None, "detached"):
        raise ValueError("Placement group `lifetime` argument must be either `None` or "
                         f"'detached'. Got {lifetime}.")
    if _soft_target_node_id is not None:
        raise ValueError("_soft_target_node_id is not supported")
    _check_selectors(bundle_label_selector, len(bundles), "bundle_label_selector")
    fallbacks = []
    for fallback in fallback_strategy or []:
        if not isinstance(fallback, dict) or "bundles" not in fallback or (
                set(fallback) - {"bundles", "bundle_label_selector"}):
            raise ValueError("Each fallback_strategy entry must be a dict with 'bundles' and "
                             f"optionally 'bundle_label_selector', got {fallback!r}")
        fallback_bundles = _check_bundles(fallback["bundles"], "fallback_strategy bundles")
        fallbacks.append({
            "bundles": [option_checks.rounded_resources(b) for b in fallback_bundles],
            "bundle_selectors": _check_selectors(fallback.get("bundle_label_selector"),
                                                 len(fallback_bundles),
                                                 "fallback bundle_label_selector") or [],
        })
    worker.auto_init()
    core_name = name or f"pg-{secrets.token_hex(8)}"
    options = {
        "name": core_name,
        "strategy": strategy,
        "bundles": [option_checks.rounded_resources(b) for b in bundles],
        "bundle_selectors": bundle_label_selector or [],
        "fallbacks": fallbacks,
        "same_label": same_label or "",
        "timeout_s": None if _timeout_s is None else float(_timeout_s),
        "wait_while_infeasible": True,
        "detached": lifetime == "detached",
    }
    ready = _core.new_promise()
    group = PlacementGroup(core_name, bundles, strategy, ready)

    def refused(e: Exception) -> None:
        if isinstance(e, _core.CoreError):  # its message names the group
            _core.fulfill_promise(ready, None, e.args[1])
        else:  # a bad option the core refused
            _core.fulfill_promise(ready, None, f"placement group {core_name}: {e}")

    # The head has the group before this returns, so a remove_placement_group that follows at
    # once withdraws it; only the wait for its placement runs behind ready().
    try:
        _core.submit_placement_group(options)
    except Exception as e:
        refused(e)
        return group

    def wait() -> None:
        try:
            made = _core.wait_placement_group(options)
        except Exception as e:
            refused(e)
            return
        group._bundle_nodes = list(made["bundle_nodes"])
        _core.fulfill_promise(ready, serialization.serialize(group).to_bytes())

    threading.Thread(target=wait, name=f"tessera-pg-{core_name}", daemon=True).start()
    return group


def remove_placement_group(placement_group: PlacementGroup) -> None:
    """Releases the group (a slice's too); the tasks and actors in it end. A group removed
    already is nothing to do, as in Ray."""
    if not isinstance(placement_group, PlacementGroup):
        raise TypeError(f"remove_placement_group expects a PlacementGroup, got "
                        f"{type(placement_group).__name__}")
    worker.auto_init()
    try:
        _core.remove_placement_group(placement_group.id.hex())
    except _core.CoreError as e:
        worker.raise_core_error(e)


# The head's states as Ray names them: a group no node can hold yet is PENDING (the reason is in
# its stats), as Ray's waits for the cluster to grow.
_STATES = {"INFEASIBLE": "PENDING"}
# stats["scheduling_state"], as Ray's placement_group_table says it.
_SCHEDULING_STATES = {"CREATED": "FINISHED", "INFEASIBLE": "INFEASIBLE", "REMOVED": "REMOVED"}


def _table_entry(group: Dict[str, Any]) -> Dict[str, Any]:
    state = group["state"]
    waiting = "NO_RESOURCES" if group["explanation"] else "SCHEDULING_STARTED"
    return {
        "placement_group_id": group["name"],
        "name": group["name"],
        "bundles": dict(enumerate(group["bundles"])),
        "bundles_to_node_id": {i: node for i, node in group["bundle_nodes"].items() if node},
        "strategy": group["strategy"],
        "state": _STATES.get(state, state),
        "stats": {
            "scheduling_state": _SCHEDULING_STATES.get(state, waiting),
            # Why it is not CREATED, as the head explains it ("" when it is).
            "explanation": group["explanation"],
        },
    }


def placement_group_table(placement_group: Optional[PlacementGroup] = None) -> Dict[str, Any]:
    """The head's view of one group, as Ray's: placement_group_id, name, bundles ({index:
    {resource: amount}}), bundles_to_node_id (placed bundles), strategy, state (PENDING,
    CREATED, RESCHEDULING, REMOVED) and stats (scheduling_state, explanation). With no group:
    every group, by id."""
    worker.auto_init()
    try:
        groups = _core.list_placement_groups()
    except _core.CoreError as e:
        worker.raise_core_error(e)
    table = {group["name"]: _table_entry(group) for group in groups}
    if placement_group is None:
        return table
    name = placement_group.id.hex()
    if name in table:
        return table[name]
    return {"placement_group_id": name, "name": name,
            "bundles": dict(enumerate(placement_group.bundle_specs)), "bundles_to_node_id": {},
            "strategy": placement_group._strategy, "state": "REMOVED",
            "stats": {"scheduling_state": "REMOVED", "explanation": ""}}


def get_placement_group(placement_group_name: str) -> PlacementGroup:
    """The live group named `placement_group_name`."""
    table = placement_group_table()
    if placement_group_name not in table or table[placement_group_name]["state"] == "REMOVED":
        raise ValueError(f"Failed to look up placement group with name: {placement_group_name}")
    entry = table[placement_group_name]
    return PlacementGroup(placement_group_name, list(entry["bundles"].values()),
                          entry["strategy"])


def get_current_placement_group() -> Optional[PlacementGroup]:
    """The group the current task or actor runs in; None in a driver and outside a group."""
    name = executor.placement.group
    if not name:
        return None
    return get_placement_group(name)


def submission_core_options(strategy: Any, core_options: Dict[str, Any]) -> Dict[str, Any]:
    """The core options of one `.remote()` with this scheduling_strategy: a bundle index the
    group does not have is a ValueError (nothing is submitted), and with no strategy, inside a
    task or actor that captures child tasks, its group (any bundle), as Ray."""
    if isinstance(strategy, PlacementGroupSchedulingStrategy):
        group = strategy.placement_group
        index = strategy.placement_group_bundle_index
        if group is not None and not -1 <= index < group.bundle_count:
            raise ValueError(f"placement group bundle index {index} is invalid. Valid placement "
                             f"group indexes: 0 to {group.bundle_count - 1}.")
        capture = strategy.placement_group_capture_child_tasks
        if capture is None:
            capture = executor.placement.capture_child_tasks
        return {**core_options, "capture_child_tasks": bool(capture and group is not None)}
    if strategy is None and executor.placement.capture_child_tasks:
        return {**core_options, "placement_group": executor.placement.group, "bundle_index": -1,
                "capture_child_tasks": True}
    return core_options

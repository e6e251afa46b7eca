"""Scheduling strategies for the `scheduling_strategy` option of tasks and actors, as Ray's
`ray.util.scheduling_strategies`: the "DEFAULT" and "SPREAD" names, placement-group placement
and node affinity. Plain immutable-by-convention values compared by their fields; no cost.
"""

from __future__ import annotations

from typing import Any, Optional

DEFAULT_SCHEDULING_STRATEGY = "DEFAULT"
SPREAD_SCHEDULING_STRATEGY = "SPREAD"


class _FieldsValue:
    """repr and == over the names in _fields."""

    _fields: tuple = ()

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({fields})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self._fields)


class PlacementGroupSchedulingStrategy(_FieldsValue):
    """Run in `placement_group`: in bundle `placement_group_bundle_index`, or -1 for any bundle
    that fits. `placement_group_capture_child_tasks`: whether tasks the task starts default to
    the group too (None: inherit the caller's choice)."""

    _fields = (
        "placement_group",
        "placement_group_bundle_index",
        "placement_group_capture_child_tasks",
    )

    def __init__(
        self,
        placement_group: Any,
        placement_group_bundle_index: int = -1,
        placement_group_capture_child_tasks: Optional[bool] = None,
    ) -> None:
        if placement_group is None and placement_group_bundle_index != -1:
            raise ValueError("If placement group is not set, the value of bundle index must be -1.")
        if placement_group_bundle_index < -1:
            raise ValueError(
                f"placement group bundle index {placement_group_bundle_index} is invalid: "
                "use -1 (any bundle) or the index of a bundle."
            )
        self.placement_group = placement_group
        self.placement_group_bundle_index = placement_group_bundle_index
        self.placement_group_capture_child_tasks = placement_group_capture_child_tasks


class NodeAffinitySchedulingStrategy(_FieldsValue):
    """Run on node `node_id` (hex). soft=False: fail with an unschedulable error if that node is
    dead or can never fit the task; soft=True: run elsewhere then."""

    _fields = ("node_id", "soft", "_spill_on_unavailable", "_fail_on_unavailable")

    def __init__(
        self,
        node_id: str,
        soft: bool,
        _spill_on_unavailable: bool = False,
        _fail_on_unavailable: bool = False,
    ) -> None:
        if not isinstance(node_id, str):
            raise TypeError(
                f"NodeAffinitySchedulingStrategy's node_id must be a hex str, "
                f"but received type {type(node_id)}"
            )
        self.node_id = node_id
        self.soft = soft
        self._spill_on_unavailable = _spill_on_unavailable
        self._fail_on_unavailable = _fail_on_unavailable

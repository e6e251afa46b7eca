"""Whole TPU slices from Python, as Ray's `ray.util.tpu`: `slice_placement_group(topology,
accelerator_version, num_slices=...)` reserves every host of each slice or nothing (the cluster
never hands out part of a slice), and gives a placement group with one bundle per host, bundle i
on TPU worker i of its slice, to place one task or actor per host with
PlacementGroupSchedulingStrategy.

Unlike Ray's, the reservation is made before the call returns (up to `timeout_s`), and there is
no separate head placement group: the core reserves the slice atomically.

Threading: any thread.
"""

from __future__ import annotations

import math
import os
import secrets
from typing import Any, Dict, List, Optional

from tessera import _core
from tessera._private import options as option_checks, serialization, worker
from tessera.util.placement_group import PlacementGroup

_GENERATIONS = ("v2", "v3", "v4", "v5p", "v5litepod", "v6e", "v7x")


def _generation(accelerator_version: str) -> str:
    """"v6e", "V6E", "TPU-V6E", "tpu-v6e" -> "v6e" (Ray's normalisation)."""
    text = accelerator_version.strip().lower()
    for prefix in ("tpu-", "tpu"):
        if text.startswith(prefix):
            text = text[len(prefix):]
            break
    if not text.startswith("v"):
        text = "v" + text
    if text == "v5e":
        text = "v5litepod"
    return text


class SlicePlacementGroup:
    """Reserved slices: `placement_group` (one bundle per host), `hosts` (node id, slice, TPU
    worker id per bundle), `chips_per_host`, `num_hosts`, `num_bundles`, `bundle_resources`."""

    def __init__(self, name: str, topology: str, accelerator_version: str, num_slices: int,
                 reservation: Dict[str, Any], per_host: Dict[str, float]) -> None:
        self._name = name
        self.topology = topology
        self.accelerator_version = accelerator_version
        self.num_slices = num_slices
        self.hosts: List[Dict[str, Any]] = list(reservation["hosts"])
        self.slices: List[str] = list(reservation["slices"])
        chips = math.prod(int(d) for d in topology.lower().split("x"))
        self.num_hosts = len(self.hosts)
        self.chips_per_host = (chips * num_slices) // max(1, self.num_hosts)
        self.num_bundles = self.num_hosts
        self.bundle_resources = {"TPU": float(self.chips_per_host), **per_host}
        bundles = [dict(self.bundle_resources) for _ in self.hosts]
        ready = _core.new_promise()
        self._placement_group: Optional[PlacementGroup] = PlacementGroup(
            name, bundles, "SPREAD", ready)
        self._placement_group._bundle_nodes = [h["node_id"] for h in self.hosts]
        _core.fulfill_promise(ready, serialization.serialize(self._placement_group).to_bytes())

    @property
    def placement_group(self) -> Optional[PlacementGroup]:
        return self._placement_group

    def shutdown(self) -> None:
        """Releases the slices (idempotent)."""
        if self._placement_group is None:
            return
        self._placement_group = None
        try:
            _core.release_slices(self._name)
        except _core.CoreError as e:
            worker.raise_core_error(e)

    def __repr__(self) -> str:
        return (f"SlicePlacementGroup({self._name}, {self.accelerator_version} {self.topology} x"
                f"{self.num_slices}, hosts={[h['node_id'] for h in self.hosts]})")


def slice_placement_group(topology: str, accelerator_version: str,
                          resources_per_bundle: Optional[Dict[str, float]] = None,
                          num_slices: int = 1, chips_per_vm: Optional[int] = None,
                          name: str = "", lifetime: Optional[str] = None,
                          timeout_s: float = 100.0, sub_slice: bool = False,
                          **kwargs: Any) -> SlicePlacementGroup:
    """Reserves `num_slices` whole slices of `accelerator_version` (e.g. "v6e" or "TPU-V6E")
    with `topology` (e.g. "4x4"): every host of each, or nothing. `bundle_label_selector` (one
    dict, or a list of equal dicts) keeps to slices whose every host matches it; with
    {"tessera.io/tpu-slice-name": name} it names the slice. `sub_slice` (a Tessera extension)
    takes ICI-contiguous blocks of `topology` inside larger slices instead of whole slices."""
    unknown = sorted(set(kwargs) - {"strategy", "bundle_label_selector",
                                    "head_reservation_timeout_s"})
    if unknown:
        raise TypeError(f"slice_placement_group() got unexpected keyword argument(s) "
                        f"{', '.join(unknown)}")
    if not isinstance(topology, str) or not all(p.isdigit() for p in topology.lower().split("x")):
        raise ValueError(f"Invalid accelerator topology: '{topology}' for accelerator version: "
                         f"'{accelerator_version}'")
    generation = _generation(accelerator_version)
    if generation not in _GENERATIONS:
        raise ValueError(f"Invalid accelerator version: '{accelerator_version}' (known: "
                         f"{', '.join(_GENERATIONS)})")
    if not isinstance(num_slices, int) or num_slices < 1:
        raise ValueError(f"num_slices must be a positive int, got {num_slices!r}")
    if chips_per_vm is not None:
        raise ValueError("chips_per_vm is not supported: the cluster knows each host's chips")
    if lifetime not in (None, "detached"):
        raise ValueError(f"lifetime must be None or 'detached', got {lifetime!r}")
    if not isinstance(sub_slice, bool):
        raise ValueError(f"sub_slice must be a bool, got {sub_slice!r}")
    selector = kwargs.get("bundle_label_selector")
    if isinstance(selector, list):
        if any(s != selector[0] for s in selector):
            raise ValueError("bundle_label_selector: a slice takes one selector for every host, "
                             f"got {selector!r}")
        selector = selector[0] if selector else None
    if selector is not None and not isinstance(selector, dict):
        raise ValueError(f"bundle_label_selector must be a dict, got {selector!r}")
    # Ray's default bundle: one CPU beside the host's chips (so a default actor fits in it).
    per_host = dict(resources_per_bundle if resources_per_bundle is not None else {"CPU": 1})
    per_host.pop("TPU", None)  # a host's bundle holds all its chips
    if "head_reservation_timeout_s" in kwargs and kwargs["head_reservation_timeout_s"] is not None:
        timeout_s = float(kwargs["head_reservation_timeout_s"])
    worker.auto_init()
    core_name = name or f"slice-{secrets.token_hex(8)}"
    try:
        reservation = _core.reserve_slices({
            "name": core_name,
            "accelerator_type": "TPU-" + generation.upper(),
            "topology": topology,
            "num_slices": num_slices,
            "per_host": option_checks.format_resources(per_host),
            "timeout_s": float(timeout_s),
            "detached": lifetime == "detached",
            "label_selector": [selector] if selector else [],
            "sub_slice": sub_slice,
        })
    except _core.CoreError as e:
        kind, message = e.args[0], e.args[1]
        if kind == "INVALID":
            raise ValueError(f"Invalid accelerator topology: '{topology}' for accelerator "
                             f"version: '{accelerator_version}' ({message})") from None
        raise RuntimeError(f"Failed to reserve TPU slice. {message}") from None
    return SlicePlacementGroup(core_name, topology, accelerator_version, num_slices,
                               reservation, per_host)


def get_current_pod_name() -> Optional[str]:
    """The slice this worker's host belongs to (TPU_NAME), or None off a TPU host."""
    return os.environ.get("TPU_NAME") or None


def get_current_pod_worker_count() -> Optional[int]:
    """How many hosts this worker's slice has (from TPU_WORKER_HOSTNAMES), or None."""
    hosts = os.environ.get("TPU_WORKER_HOSTNAMES")
    return len(hosts.split(",")) if hosts else None


def get_num_tpu_chips_on_node() -> int:
    """The TPU chips of this worker's lease."""
    return len(_core.runtime_context()["accelerator_ids"].get("TPU", []))

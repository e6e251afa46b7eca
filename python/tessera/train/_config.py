"""The configs of a training run, as Ray Train V2 names and checks them: ScalingConfig (how many
ranks, on what), RunConfig (name, storage, failures, checkpoints), FailureConfig and
CheckpointConfig. A bad config raises at construction with Ray's one-line message.

ScalingConfig.gang_options() is the C++ gang controller's form of it (_core.run_actor_gang):
  use_tpu + topology + accelerator_type  whole slices, one rank per host
  otherwise                              `num_workers` bundles of `resources_per_worker` in one
                                         placement group with `placement_strategy`

Threading: plain values. Cost: nothing beyond the checks.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from tessera._private.options import (INFINITE_RETRIES, _validate_label_selector,
                                      rounded_resources)

_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
DEFAULT_STORAGE_PATH = "~/tessera_results"
# Ray's variable and ours: how long the gang may take to be reserved and started.
_START_TIMEOUT_VARIABLES = ("TESSERA_TRAIN_WORKER_GROUP_START_TIMEOUT_S",
                            "RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S")


@dataclass
class ScalingConfig:
    """How many training ranks to run, and what each holds."""

    num_workers: int = 1
    use_gpu: bool = False
    resources_per_worker: Optional[Dict[str, float]] = None
    placement_strategy: str = "PACK"
    accelerator_type: Optional[str] = None
    use_tpu: bool = False
    topology: Optional[str] = None
    label_selector: Optional[Union[Dict[str, str], List[Dict[str, str]]]] = None
    trainer_resources: Optional[Dict[str, float]] = None

    def __post_init__(self) -> None:
        if self.trainer_resources is not None:
            raise DeprecationWarning("`ScalingConfig(trainer_resources)` is deprecated: the "
                                     "training controller runs in the driver and takes no "
                                     "resources.")
        if isinstance(self.num_workers, tuple):
            raise ValueError("elastic num_workers=(min, max) is not supported yet: give a "
                             "fixed number of workers")
        if (not isinstance(self.num_workers, int) or isinstance(self.num_workers, bool)
                or self.num_workers < 1):
            raise ValueError(f"`num_workers` must be a positive integer, got {self.num_workers!r}")
        if self.use_gpu and self.use_tpu:
            raise ValueError("Cannot specify both `use_gpu=True` and `use_tpu=True`.")
        if self.placement_strategy not in _STRATEGIES:
            raise ValueError(f"`placement_strategy` must be one of {list(_STRATEGIES)}, got "
                             f"{self.placement_strategy!r}")
        resources = self.resources_per_worker or {}
        for name, amount in resources.items():
            if not isinstance(amount, (int, float)) or isinstance(amount, bool) or amount < 0:
                raise ValueError(f"`resources_per_worker[{name!r}]` must be a non-negative "
                                 f"number, got {amount!r}")
        if resources.get("GPU", 0) > 0 and not self.use_gpu:
            raise ValueError("`use_gpu` is False but `GPU` was found in `resources_per_worker`. "
                             "Either set `use_gpu` to True or remove `GPU` from "
                             "`resources_per_worker`.")
        if resources.get("TPU", 0) > 0 and not self.use_tpu:
            raise ValueError("`use_tpu` is False but `TPU` was found in `resources_per_worker`. "
                             "Either set `use_tpu` to True or remove `TPU` from "
                             "`resources_per_worker`.")
        if self.use_tpu and self.resources_per_worker is not None and not resources.get("TPU"):
            raise ValueError("`use_tpu` is True but `TPU` is set to 0 in `resources_per_worker`. "
                             "Either set `use_tpu` to False or request a positive number of "
                             "`TPU` in `resources_per_worker`.")
        if self.topology is not None and not self.use_tpu:
            raise ValueError("`topology` is only valid with `use_tpu=True`.")
        if self.use_tpu:
            if self.num_workers > 1 and not self.topology:
                raise ValueError("`topology` must be specified in ScalingConfig when "
                                 "`use_tpu=True` and `num_workers` > 1.")
            if self.num_workers > 1 and not self.accelerator_type:
                raise ValueError("`accelerator_type` must be specified in ScalingConfig when "
                                 "`use_tpu=True` and `num_workers` > 1.")
            if self.topology and not self.accelerator_type:
                raise ValueError("`accelerator_type` (e.g. 'TPU-V6E') must be specified with "
                                 "`topology`.")
            if self.label_selector is not None:
                raise ValueError("Cannot set `label_selector` when `use_tpu=True` because the "
                                 "slice reservation selects its own hosts.")
        if isinstance(self.label_selector, list):
            raise ValueError("a per-worker list of `label_selector`s is not supported: give "
                             "one dict for every worker")
        if self.label_selector is not None:
            _validate_label_selector(self.label_selector, "label_selector")

    @property
    def whole_slices(self) -> bool:
        """Whether the ranks are whole TPU slices' hosts (one rank per host)."""
        return bool(self.use_tpu and self.topology and self.accelerator_type)

    @property
    def _resources_per_worker_not_none(self) -> Dict[str, float]:
        if self.resources_per_worker is not None:
            return dict(self.resources_per_worker)
        if self.use_gpu:
            return {"GPU": 1}
        if self.use_tpu:
            return {"TPU": 1}
        return {"CPU": 1}

    def gang_options(self, name: str, max_restarts: int) -> Dict[str, Any]:
        """The gang controller's options for this scaling (_core.run_actor_gang)."""
        options: Dict[str, Any] = {"name": name, "max_restarts": max_restarts,
                                   "torch_env": True}
        for variable in _START_TIMEOUT_VARIABLES:
            if os.environ.get(variable):
                options["start_timeout_s"] = float(os.environ[variable])
                break
        if self.whole_slices:
            options.update(accelerator_type=self.accelerator_type, topology=self.topology,
                           num_slices=1)
            return options
        options.update(workers=self.num_workers,
                       resources_per_worker=rounded_resources(self._resources_per_worker_not_none),
                       strategy=self.placement_strategy)
        selector = dict(self.label_selector or {})
        if self.accelerator_type:
            selector.setdefault("tessera.io/accelerator-type", self.accelerator_type)
        if selector:
            options["label_selectors"] = [selector]
        return options


@dataclass
class FailureConfig:
    """How many times the whole group of ranks is restarted after a rank fails (-1: always)."""

    max_failures: int = 0
    controller_failure_limit: int = -1

    def __post_init__(self) -> None:
        if (not isinstance(self.max_failures, int) or isinstance(self.max_failures, bool)
                or self.max_failures < -1):
            raise ValueError(f"`max_failures` must be -1 (no limit), 0 or a positive integer, "
                             f"got {self.max_failures!r}")

    @property
    def max_restarts(self) -> int:
        return INFINITE_RETRIES if self.max_failures == -1 else self.max_failures


@dataclass
class CheckpointConfig:
    """Which reported checkpoints stay: the newest `num_to_keep` (all when None), or the best
    by `checkpoint_score_attribute` (the latest is always kept, for restarts)."""

    num_to_keep: Optional[int] = None
    checkpoint_score_attribute: Optional[str] = None
    checkpoint_score_order: str = "max"

    def __post_init__(self) -> None:
        if self.num_to_keep is not None and (not isinstance(self.num_to_keep, int)
                                             or isinstance(self.num_to_keep, bool)
                                             or self.num_to_keep <= 0):
            raise ValueError(f"Received invalid num_to_keep: {self.num_to_keep}. Must be None "
                             "or an integer >= 1.")
        if self.checkpoint_score_order not in ("max", "min"):
            raise ValueError(f"checkpoint_score_order must be either 'max' or 'min', got "
                             f"{self.checkpoint_score_order!r}")


@dataclass
class RunConfig:
    """The run's name and storage folder `<storage_path>/<name>` (which every rank's host must
    see: a shared file system on a real cluster), and its failure and checkpoint configs."""

    name: Optional[str] = None
    storage_path: Optional[str] = None
    storage_filesystem: Any = None
    failure_config: Optional[FailureConfig] = None
    checkpoint_config: Optional[CheckpointConfig] = None
    callbacks: Optional[list] = None
    worker_runtime_env: Optional[dict] = None

    def __post_init__(self) -> None:
        if self.storage_filesystem is not None:
            raise ValueError("`storage_filesystem` is not supported: give a local or shared "
                             "`storage_path`")
        if self.callbacks:
            raise ValueError("RunConfig(callbacks) is not supported yet")
        if self.worker_runtime_env:
            raise ValueError("RunConfig(worker_runtime_env) is not supported yet")
        if self.failure_config is None:
            self.failure_config = FailureConfig()
        if self.checkpoint_config is None:
            self.checkpoint_config = CheckpointConfig()
        if self.name is None:
            stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
            self.name = f"tessera_train_run-{stamp}"
        if not self.name or "/" in self.name or self.name in (".", ".."):
            raise ValueError(f"RunConfig(name={self.name!r}) must be a non-empty folder name")
        if self.storage_path is None:
            self.storage_path = DEFAULT_STORAGE_PATH
        if "://" in str(self.storage_path):
            raise ValueError(f"storage_path {self.storage_path!r}: only local or shared "
                             "file-system paths are supported")

    @property
    def run_dir(self) -> Path:
        return Path(os.path.expanduser(str(self.storage_path))).resolve() / str(self.name)

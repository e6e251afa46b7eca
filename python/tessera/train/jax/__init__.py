"""tessera.train.jax: JAX training on a gang (Ray Train V2's ray.train.v2.jax).

  JaxTrainer(loop, ...)   a DataParallelTrainer whose ranks form one JAX distributed system
                          before the loop runs, on TPU (and GPU): each calls
                          jax.distributed.initialize(coordinator_address=<rank 0's host and a
                          port the gang chose there>, num_processes=<ranks>,
                          process_id=<rank>) and, after the loop, jax.distributed.shutdown()
  JaxConfig(use_tpu, use_gpu)
                          which of those applies (default: ScalingConfig's use_tpu and use_gpu)

As in Ray, each rank sets JAX_PLATFORMS ("tpu" with use_tpu, "cuda" with use_gpu) unless the
user set it, and initializes JAX's distributed system when JAX_PLATFORMS names tpu or cuda; a
CPU run joins no JAX system (every rank is its own JAX process; JAX_COORDINATOR_ADDRESS,
JAX_NUM_PROCESSES and JAX_PROCESS_ID are in its environment for a loop that wants one). The
driver never imports jax (a driver on a TPU host would take the chips' lock); a rank without
jax fails with a one-line ModuleNotFoundError naming the missing package.

Threading: the backend runs in the training function's process, before and after it. Cost:
importing jax and its distributed initialization (a barrier of every rank), once per attempt.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence

from tessera.train._backend import BackendConfig, RankBackend
from tessera.train._config import RunConfig, ScalingConfig
from tessera.train._controller import DataParallelTrainer

logger = logging.getLogger(__name__)


@dataclass
class JaxConfig(BackendConfig):
    """Whether the ranks' JAX runs on TPUs (JAX_PLATFORMS=tpu) or GPUs (cuda); either makes
    them one JAX distributed system."""

    use_tpu: bool = False
    use_gpu: bool = False

    @property
    def backend_cls(self) -> type:
        return _JaxBackend


def _platforms(config: JaxConfig) -> List[str]:
    """JAX_PLATFORMS as this rank will run with it: the user's, else tpu/cuda from the config
    (set in the environment before jax is imported, as Ray does)."""
    platforms = os.environ.get("JAX_PLATFORMS", "").lower()
    if not platforms and config.use_tpu:
        platforms = os.environ["JAX_PLATFORMS"] = "tpu"
    elif not platforms and config.use_gpu:
        platforms = os.environ["JAX_PLATFORMS"] = "cuda"
    return [p.strip() for p in platforms.split(",") if p.strip()]


def _local_device_ids(gpu_ids: Sequence[Any], visible: str) -> Optional[List[int]]:
    """JAX's ids of this rank's own GPUs: their positions inside the node's visible mask
    (CUDA_VISIBLE_DEVICES holds every GPU of the gang on the node); None when not known."""
    mask = [v.strip() for v in visible.split(",") if v.strip()]
    positions = [mask.index(str(i)) for i in gpu_ids if str(i) in mask]
    return positions or None


def _import_jax() -> Any:
    try:
        import jax
    except ModuleNotFoundError as e:
        missing = e.name or "jax"
        node = os.environ.get("TESSERA_NODE_ID", "this node")
        raise ModuleNotFoundError(
            f"JaxTrainer needs the '{missing}' package in every training worker, and the "
            f"worker on {node} has no module named '{missing}': install jax where the ranks "
            "run (pip install 'jax[tpu]' on TPU hosts, 'jax' for the CPU)", name=missing) from None
    return jax


class _JaxBackend(RankBackend):
    """In each rank: JAX's environment and distributed system around the training function."""

    def __init__(self, config: JaxConfig, use_gpu: bool) -> None:
        super().__init__(config, use_gpu)
        self._jax: Any = None

    def on_start(self) -> None:
        platforms = _platforms(self.config)
        jax = _import_jax()
        if "tpu" in platforms or "cuda" in platforms:
            arguments: Dict[str, Any] = dict(
                coordinator_address=os.environ["JAX_COORDINATOR_ADDRESS"],
                num_processes=int(os.environ["JAX_NUM_PROCESSES"]),
                process_id=int(os.environ["JAX_PROCESS_ID"]))
            if "cuda" in platforms:
                from tessera.runtime_context import get_gpu_ids

                local = _local_device_ids(get_gpu_ids(),
                                          os.environ.get("CUDA_VISIBLE_DEVICES", ""))
                if local is not None:
                    arguments["local_device_ids"] = local
            jax.distributed.initialize(**arguments)
            self._jax = jax
        super().on_start()

    def on_shutdown(self) -> None:
        try:
            if self._jax is not None:
                try:
                    self._jax.distributed.shutdown()
                except Exception as e:  # noqa: BLE001 - Ray logs it and goes on
                    logger.warning("Error during JAX distributed shutdown: %s", e)
                self._jax = None
        finally:
            super().on_shutdown()


class JaxTrainer(DataParallelTrainer):
    """Runs `train_loop_per_worker` (taking 0 arguments, or the config) on every rank, each a
    process of one JAX distributed system on TPU or GPU (see the module's docstring)."""

    def __init__(self, train_loop_per_worker: Callable, *,
                 train_loop_config: Optional[Dict[str, Any]] = None,
                 jax_config: Optional[JaxConfig] = None,
                 scaling_config: Optional[ScalingConfig] = None,
                 dataset_config: Any = None, run_config: Optional[RunConfig] = None,
                 datasets: Optional[dict] = None) -> None:
        scaling_config = scaling_config or ScalingConfig()
        if jax_config is not None and not isinstance(jax_config, JaxConfig):
            raise ValueError(f"jax_config must be a JaxConfig, not {type(jax_config).__name__}")
        jax_config = jax_config or JaxConfig(use_tpu=scaling_config.use_tpu,
                                             use_gpu=scaling_config.use_gpu)
        super().__init__(train_loop_per_worker, train_loop_config=train_loop_config,
                         backend_config=jax_config, scaling_config=scaling_config,
                         run_config=run_config, datasets=datasets, dataset_config=dataset_config)


__all__ = ["JaxConfig", "JaxTrainer"]

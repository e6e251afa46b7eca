"""tessera.train.torch: PyTorch training on a gang (Ray Train's ray.train.torch).

  TorchTrainer(loop, ...)   a DataParallelTrainer whose ranks join one torch process group
                            (env://; "nccl" with use_gpu, else "gloo") before the loop runs
  get_device()              this rank's device (its GPU inside the visible mask, or the CPU)
  prepare_model(model)      moves it to that device; DistributedDataParallel when the world
                            has more than one rank (no device_ids on the CPU)
  prepare_data_loader(dl)   a DistributedSampler (shuffling unless the loader was sequential)
                            when the world has more than one rank, batches moved to the device

Threading: the helpers run inside the training function (one per process). Cost: importing
torch, on first use.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Union

from tessera.train._backend import DEFAULT_PROCESS_GROUP_TIMEOUT_S, BackendConfig, RankBackend
from tessera.train._config import RunConfig, ScalingConfig
from tessera.train._controller import DataParallelTrainer
from tessera.train._session import device as _device, get_context


@dataclass
class TorchConfig(BackendConfig):
    """The process group: `backend` (None: nccl with use_gpu, else gloo), `init_method` ("env":
    MASTER_ADDR/MASTER_PORT from the gang), `timeout_s`."""

    backend: Optional[str] = None
    init_method: str = "env"
    timeout_s: float = DEFAULT_PROCESS_GROUP_TIMEOUT_S

    def __post_init__(self) -> None:
        if self.init_method != "env":
            raise ValueError(f"TorchConfig(init_method={self.init_method!r}) is not supported: "
                             "the gang sets MASTER_ADDR/MASTER_PORT for 'env'")
        if self.timeout_s <= 0:
            raise ValueError(f"TorchConfig(timeout_s={self.timeout_s}) must be positive")

    @property
    def backend_cls(self) -> type:
        return _TorchBackend


class _TorchBackend(RankBackend):
    """In each rank: one torch process group (env://) around the training function, whose
    all-reduce and barrier report() uses."""

    def on_start(self) -> None:
        import torch
        import torch.distributed as dist

        name = self.config.backend or ("nccl" if self.use_gpu else "gloo")
        if name == "nccl":
            torch.cuda.set_device(_device())
        dist.init_process_group(name, init_method="env://",
                                timeout=datetime.timedelta(seconds=self.config.timeout_s))

    def on_shutdown(self) -> None:
        import torch.distributed as dist

        dist.destroy_process_group()

    def all_reduce_max(self, value: int) -> int:
        import torch
        import torch.distributed as dist

        flag = torch.tensor([value], device=_device())
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return int(flag.item())

    def barrier(self) -> None:
        import torch.distributed as dist

        dist.barrier()


class TorchTrainer(DataParallelTrainer):
    """Runs `train_loop_per_worker` (taking 0 arguments, or the config) on every rank."""

    def __init__(self, train_loop_per_worker: Callable, *,
                 train_loop_config: Optional[Dict[str, Any]] = None,
                 torch_config: Optional[TorchConfig] = None,
                 scaling_config: Optional[ScalingConfig] = None,
                 run_config: Optional[RunConfig] = None, datasets: Optional[dict] = None,
                 dataset_config: Any = None, metadata: Optional[dict] = None,
                 resume_from_checkpoint: Any = None) -> None:
        super().__init__(train_loop_per_worker, train_loop_config=train_loop_config,
                         backend_config=torch_config or TorchConfig(),
                         scaling_config=scaling_config, run_config=run_config,
                         datasets=datasets, dataset_config=dataset_config, metadata=metadata,
                         resume_from_checkpoint=resume_from_checkpoint)


def get_device() -> Any:
    """This rank's torch.device (the CPU without use_gpu or without CUDA)."""
    return _device()


def get_devices() -> List[Any]:
    return [_device()]


def _resolve_device(move_to_device: Union[bool, Any]) -> Optional[Any]:
    import torch

    if isinstance(move_to_device, torch.device):
        return move_to_device
    return get_device() if move_to_device else None


def prepare_model(model: Any, move_to_device: Union[bool, Any] = True,
                  parallel_strategy: Optional[str] = "ddp",
                  parallel_strategy_kwargs: Optional[Dict[str, Any]] = None) -> Any:
    """The model on this rank's device, wrapped for data parallelism when the world has more
    than one rank ("ddp": DistributedDataParallel; "fsdp": FullyShardedDataParallel, GPU only;
    None: no wrap)."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    if parallel_strategy not in ("ddp", "fsdp", None):
        raise ValueError(f"parallel_strategy must be 'ddp', 'fsdp' or None, got "
                         f"{parallel_strategy!r}")
    device = _resolve_device(move_to_device)
    if device is not None:
        if device.type == "cuda":
            torch.cuda.set_device(device)
        model = model.to(device)
    if parallel_strategy is None or get_context().get_world_size() <= 1:
        return model
    kwargs = dict(parallel_strategy_kwargs or {})
    on_gpu = device is not None and device.type == "cuda"
    if parallel_strategy == "fsdp":
        if not on_gpu:
            raise RuntimeError("FSDP is only available with GPU-enabled training: set "
                               "use_gpu=True in the ScalingConfig")
        from torch.distributed.fsdp import FullyShardedDataParallel
        return FullyShardedDataParallel(model, **kwargs)
    if on_gpu:
        kwargs.setdefault("device_ids", [device])
        kwargs.setdefault("output_device", device)
    return DistributedDataParallel(model, **kwargs)


class _DeviceDataLoader:
    """Iterates a DataLoader with every batch moved to `device`; the loader's attributes
    (sampler, batch_size, dataset, ...) read through."""

    def __init__(self, loader: Any, device: Any) -> None:
        self._loader = loader
        self._device = device

    def _move(self, batch: Any) -> Any:
        if hasattr(batch, "to"):
            return batch.to(self._device, non_blocking=True)
        if isinstance(batch, (list, tuple)):
            return type(batch)(self._move(b) for b in batch)
        if isinstance(batch, dict):
            return {k: self._move(v) for k, v in batch.items()}
        return batch

    def __iter__(self):
        for batch in self._loader:
            yield self._move(batch)

    def __len__(self) -> int:
        return len(self._loader)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


def prepare_data_loader(data_loader: Any, add_dist_sampler: bool = True,
                        move_to_device: bool = True, auto_transfer: bool = True) -> Any:
    """The loader with a DistributedSampler (shuffle unless it was a SequentialSampler; call
    `loader.sampler.set_epoch(e)` each epoch) when the world has more than one rank and the
    loader has no sampler of its own, and its batches moved to this rank's device."""
    from torch.utils.data import (DataLoader, DistributedSampler, IterableDataset,
                                  RandomSampler, SequentialSampler)

    world = get_context().get_world_size()
    loader = data_loader
    own_sampler = not isinstance(loader.sampler, (SequentialSampler, RandomSampler))
    if (add_dist_sampler and world > 1 and not isinstance(loader.dataset, IterableDataset)
            and not own_sampler):
        shuffle = not isinstance(loader.sampler, SequentialSampler)
        extra: Dict[str, Any] = {}
        if loader.num_workers > 0:
            extra.update(prefetch_factor=loader.prefetch_factor,
                         persistent_workers=loader.persistent_workers)
        loader = DataLoader(
            loader.dataset, batch_size=loader.batch_size, shuffle=False,
            sampler=DistributedSampler(loader.dataset, shuffle=shuffle),
            num_workers=loader.num_workers, collate_fn=loader.collate_fn,
            pin_memory=loader.pin_memory, drop_last=loader.drop_last, timeout=loader.timeout,
            worker_init_fn=loader.worker_init_fn, generator=loader.generator, **extra)
    device = get_device() if move_to_device else None
    if device is not None and device.type != "cpu":
        return _DeviceDataLoader(loader, device)
    return loader


__all__ = ["TorchConfig", "TorchTrainer", "get_device", "get_devices", "prepare_data_loader",
           "prepare_model"]

"""What runs inside each training rank: the `_TrainWorker` actor (one per rank, made by the gang
controller inside the rank's reservation with the torchrun environment: RANK, LOCAL_RANK,
WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK/NODE_RANK, MASTER_ADDR/PORT, JAX_COORDINATOR_ADDRESS,
TORCHELASTIC_RESTART_COUNT), whose `run` starts the trainer's backend (_backend.RankBackend:
torch's process group, JAX's distributed system, or none), runs the user's training function
and shuts the backend down; and the calls that function makes:

  report(metrics, checkpoint=None)  a barrier of every rank: the ranks passing a checkpoint copy
                                    it into the run folder's next checkpoint_NNNNNN/, then rank 0
                                    records the metrics and registers the checkpoint
                                    (_checkpoint.RunRecord)
  get_checkpoint()                  the latest registered checkpoint (after a restart: where to
                                    resume), None before the first
  get_context()                     the rank's world/local/node ranks and the run's name

Threading: one training function per process, on the actor's thread; the session is a module
global. Cost: report is one all-reduce and one barrier of the backend, plus the checkpoint copy.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Callable, Dict, Optional

from tessera.train._backend import RankBackend
from tessera.train._checkpoint import Checkpoint, RunRecord


class TrainContext:
    """The calling rank's place in the run (Ray's TrainContext)."""

    def __init__(self, env: Dict[str, str], experiment_name: str, storage_path: str) -> None:
        self._world_size = int(env["WORLD_SIZE"])
        self._world_rank = int(env["RANK"])
        self._local_rank = int(env.get("LOCAL_RANK", "0"))
        self._local_world_size = int(env.get("LOCAL_WORLD_SIZE", "1"))
        self._node_rank = int(env.get("GROUP_RANK", env.get("NODE_RANK", "0")))
        self._experiment_name = experiment_name
        self._storage_path = storage_path

    def get_world_size(self) -> int:
        return self._world_size

    def get_world_rank(self) -> int:
        return self._world_rank

    def get_local_rank(self) -> int:
        return self._local_rank

    def get_local_world_size(self) -> int:
        return self._local_world_size

    def get_node_rank(self) -> int:
        return self._node_rank

    def get_experiment_name(self) -> str:
        return self._experiment_name

    def get_storage_path(self) -> str:
        return self._storage_path

    def __repr__(self) -> str:
        return (f"TrainContext(rank={self._world_rank}/{self._world_size}, "
                f"local={self._local_rank}/{self._local_world_size}, node={self._node_rank})")


class _Session:
    def __init__(self, context: TrainContext, record: RunRecord, keep: Any, attempt: int,
                 use_gpu: bool, backend: RankBackend) -> None:
        self.context = context
        self.record = record
        self.keep = keep
        self.attempt = attempt
        self.use_gpu = use_gpu
        self.backend = backend
        self.next_index = record.state()["next_index"]


_session: Optional[_Session] = None


def _current(call: str) -> _Session:
    if _session is None:
        raise RuntimeError(f"tessera.train.{call}() can only be called inside the training "
                           "function a Trainer runs (train_loop_per_worker)")
    return _session


def get_context() -> TrainContext:
    return _current("get_context").context


def get_checkpoint() -> Optional[Checkpoint]:
    """The latest checkpoint the run registered (None before the first): after a restart, the
    one to resume from."""
    return _current("get_checkpoint").record.latest_checkpoint()


def device() -> Any:
    """This rank's torch device: its first GPU's position inside the visible mask with
    use_gpu, else the CPU."""
    import torch

    session = _current("get_device")
    if not (session.use_gpu and torch.cuda.is_available()):
        return torch.device("cpu")
    from tessera.runtime_context import get_gpu_ids

    ids = [str(i) for i in get_gpu_ids()]
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v]
    if ids and ids[0] in visible:
        return torch.device("cuda", visible.index(ids[0]))
    return torch.device("cuda", session.context.get_local_rank() % torch.cuda.device_count())


def report(metrics: Dict[str, Any], checkpoint: Optional[Checkpoint] = None) -> None:
    """Every rank calls it as often as the others (it is a barrier). Rank 0's metrics are
    kept; a checkpoint is registered when any rank passes one (their files merge)."""
    session = _current("report")
    if not isinstance(metrics, dict):
        raise TypeError(f"report(metrics) takes a dict, not {type(metrics).__name__}")
    if checkpoint is not None and not isinstance(checkpoint, Checkpoint):
        raise TypeError(f"report(checkpoint=...) takes a tessera.train.Checkpoint, not "
                        f"{type(checkpoint).__name__}")
    index = session.next_index
    if checkpoint is not None:
        target = session.record.checkpoint_dir(index)
        if Path(checkpoint.path) != target:
            shutil.copytree(checkpoint.path, target, dirs_exist_ok=True)
    # Every copy is done once this returns; then rank 0 registers what they made.
    registered = bool(session.backend.all_reduce_max(1 if checkpoint is not None else 0))
    if session.context.get_world_rank() == 0:
        session.record.record_report(dict(metrics), index if registered else None,
                                     session.attempt, session.keep)
    session.backend.barrier()
    if registered:
        session.next_index += 1


class _TrainWorker:
    """One training rank (an actor of the driver's gang)."""

    def run(self, loop: Callable, config: Any, takes_config: bool, info: Dict[str, Any]) -> None:
        global _session
        backend_config = info["backend_config"]
        backend = backend_config.backend_cls(backend_config, info["use_gpu"])
        session = _Session(TrainContext(os.environ, info["name"], info["storage_path"]),
                           RunRecord(info["run_dir"]), info["checkpoint_config"],
                           int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")),
                           info["use_gpu"], backend)
        _session = session
        try:
            backend.on_start()
            try:
                if session.context.get_world_rank() == 0:
                    session.record.remove_unregistered_checkpoints()
                backend.barrier()
                if takes_config:
                    loop(config)
                else:
                    loop()
            finally:
                backend.on_shutdown()
        finally:
            _session = None

"""The built-in engine split across the hosts of a TPU slice: pipeline parallel by layers, one
engine worker actor per host, the replica keeping the scheduler.

    workers = start_engine_workers(replica_slice, chips_per_host=4, model_dir=..., config=...)
    shape, tokenizer, _ = load_model_config(model_dir)
    engine = LLMEngine(shape, config, tokenizer, stages=ActorStages(workers))

- `split_layers(n_layers, n_stages)`: stage i's layers, consecutive, the first stages taking one
  more when they do not divide evenly (3 layers on 4 hosts: 1, 1, 1 and none).
- `EngineWorker`: the engine worker actor of host i, made by the replica in bundle i of its slice
  with all of the host's TPU chips, so the runtime gives it that host's chips and TPU_WORKER_ID
  (tensor parallel within the host is that one process over them). It loads the model folder
  (which every host must be able to read), keeps only its stage's layers (the first stage the
  token embedding too, the last the output layer) and the KV pool of those layers
  (model_runner.StageRunner); the block tables stay with the replica's scheduler, whose one
  allocator addresses every stage's pool.
- `ActorStages`: the engine's stages over the workers. A step calls every worker in order with
  the step's batch; worker i+1 takes worker i's result as its argument, so the hidden states go
  from host to host and never back through the replica, which reads only the last worker's
  logits and samples. `check()` asks every worker whether it lives.

Workers are actors the replica owns, in its slice: they end with the replica (and when the
slice is released). A dead worker fails the step that needed it (the engine then fails its
requests) and the replica's health check, so the controller replaces the replica.

Threading: ActorStages runs on the engine's thread (run) and the health check's (check);
EngineWorker calls run one step at a time (a ping may run beside one). Cost per step: one actor
call per host plus the transfer of the hidden states [tokens, d_model] between hosts.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence

from tessera.serve.llm.model_runner import StageRunner, StepBatch

# How long a health check waits for the workers' answers.
CHECK_TIMEOUT_S = 60.0


def split_layers(n_layers: int, n_stages: int) -> List[range]:
    """The layers of each of `n_stages` pipeline stages: consecutive, in order, sizes differing
    by at most one, the larger first."""
    if not isinstance(n_layers, int) or n_layers < 0:
        raise ValueError(f"n_layers must be a non-negative int, got {n_layers!r}")
    if not isinstance(n_stages, int) or n_stages < 1:
        raise ValueError(f"n_stages must be a positive int, got {n_stages!r}")
    base, extra = divmod(n_layers, n_stages)
    stages, start = [], 0
    for index in range(n_stages):
        size = base + (1 if index < extra else 0)
        stages.append(range(start, start + size))
        start += size
    return stages


class EngineWorker:
    """Stage `stage` of `num_stages` of the model in `model_dir`, over a KV pool of `num_blocks`
    blocks of `block_size` tokens (see the module's doc)."""

    def __init__(self, model_dir: str, stage: int, num_stages: int, num_blocks: int,
                 block_size: int) -> None:
        from tessera.serve.llm.tiny_model import load_model

        model, _, _ = load_model(model_dir)
        layers = split_layers(model.config.n_layers, num_stages)[stage]
        first, last = stage == 0, stage == num_stages - 1
        model.keep_only(layers, embedding=first, head=last)
        self._stage = stage
        self._runner = StageRunner(model, layers, num_blocks, block_size, first=first,
                                   last=last)

    def run(self, batch: StepBatch, hidden: Optional[Any] = None) -> Any:
        """This stage's part of a step (StageRunner.run)."""
        return self._runner.run(batch, hidden)

    def ping(self) -> int:
        """The stage's index: it lives."""
        return self._stage

    def describe(self) -> Dict[str, Any]:
        """Where the worker runs and what it holds: its node, its TPU chips, the slice
        variables the runtime set (TPU_WORKER_ID, TPU_VISIBLE_CHIPS, TPU_NAME), its stage and
        layers."""
        import tessera

        context = tessera.get_runtime_context()
        return {"stage": self._stage, "layers": [self._runner.layers.start,
                                                 self._runner.layers.stop],
                "node_id": context.get_node_id(),
                "tpu_ids": sorted(context.get_accelerator_ids().get("TPU", [])),
                "tpu_worker_id": os.environ.get("TPU_WORKER_ID"),
                "tpu_visible_chips": os.environ.get("TPU_VISIBLE_CHIPS"),
                "tpu_name": os.environ.get("TPU_NAME"), "pid": os.getpid()}


class ActorStages:
    """The engine's stages over engine worker actors, stage i being workers[i] (see the
    module's doc)."""

    def __init__(self, workers: Sequence[Any]) -> None:
        if not workers:
            raise ValueError("a pipeline needs at least one engine worker")
        self.workers = list(workers)

    def run(self, batch: StepBatch) -> Any:
        """The last stage's logits of `batch`; the error of a worker that failed or died."""
        import tessera

        hidden = None
        for worker in self.workers:
            hidden = worker.run.remote(batch, hidden)
        return tessera.get(hidden)

    def check(self, timeout_s: float = CHECK_TIMEOUT_S) -> None:
        """Raises (the runtime's error: the actor died) unless every worker answers."""
        import tessera

        tessera.get([worker.ping.remote() for worker in self.workers], timeout=timeout_s)

    def describe(self) -> List[Dict[str, Any]]:
        """Each worker's EngineWorker.describe(), in stage order."""
        import tessera

        return tessera.get([worker.describe.remote() for worker in self.workers])

    def shutdown(self) -> None:
        """Ends the workers (they would end with the replica anyway)."""
        import tessera

        for worker in self.workers:
            try:
                tessera.kill(worker)
            except Exception:  # noqa: BLE001 - a worker gone already is what was wanted
                pass


def start_engine_workers(replica_slice: Any, chips_per_host: int, model_dir: str,
                         num_blocks: int, block_size: int) -> List[Any]:
    """One EngineWorker per host of `replica_slice` (context.ReplicaSlice), worker i in bundle i
    with the host's `chips_per_host` TPU chips and no CPU of its own (the replica's resources
    are in every host's bundle); returns once every one has loaded its stage, or raises the
    first one's failure."""
    import tessera
    from tessera.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    tpu = {"TPU": float(chips_per_host)}
    group = replica_slice.placement_group(tpu)
    remote = tessera.remote(EngineWorker)
    hosts = replica_slice.num_hosts
    workers = [remote.options(
        num_cpus=0, resources=tpu, max_concurrency=2,
        scheduling_strategy=PlacementGroupSchedulingStrategy(
            group, placement_group_bundle_index=host)).remote(
        model_dir, host, hosts, num_blocks, block_size) for host in range(hosts)]
    try:
        tessera.get([worker.ping.remote() for worker in workers])
    except BaseException:
        ActorStages(workers).shutdown()
        raise
    return workers


__all__ = ["ActorStages", "EngineWorker", "split_layers", "start_engine_workers"]

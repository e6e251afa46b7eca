"""Distributed training on a Tessera cluster, named as Ray Train V2 names it: a Trainer
(tessera.train.torch.TorchTrainer) runs one training function on every rank of a gang the C++
gang controller reserves (whole TPU slices, or N workers of a placement group), with torchrun's
environment, restarting the whole group from its latest checkpoint when a rank fails.

    from tessera import train
    from tessera.train.torch import TorchTrainer

    def loop(config):
        ...
        train.report({"loss": loss}, checkpoint=train.Checkpoint.from_directory(folder))

    result = TorchTrainer(loop, train_loop_config={"lr": 0.1},
                          scaling_config=train.ScalingConfig(num_workers=4),
                          run_config=train.RunConfig(name="mlp", storage_path="/shared/runs"),
                          ).fit()

The storage folder `<storage_path>/<name>` must be visible to every rank's host (a shared file
system; on a local simulated cluster any local folder).
"""

from tessera.train._checkpoint import Checkpoint
from tessera.train._config import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
from tessera.train._controller import DataParallelTrainer
from tessera.train._result import (
    ControllerError,
    Result,
    TrainingError,
    TrainingFailedError,
    WorkerGroupError,
)
from tessera.train._session import TrainContext, get_checkpoint, get_context, report

__all__ = [
    "Checkpoint", "CheckpointConfig", "ControllerError", "DataParallelTrainer", "FailureConfig",
    "Result", "RunConfig", "ScalingConfig", "TrainContext", "TrainingError",
    "TrainingFailedError", "WorkerGroupError", "get_checkpoint", "get_context", "report",
]

"""What a training run ends with: Result (rank 0's last metrics, the latest checkpoint, the run
folder), and the errors an ended run raises from fit(), as Ray Train V2 names them:
TrainingFailedError, WorkerGroupError (ranks failed: `worker_failures` maps each failed rank to
its exception) and ControllerError (the gang could not be reserved, started or supervised).

Threading: plain values. Cost: Result reads the run folder's record once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from tessera.train._checkpoint import Checkpoint, RunRecord


class TrainingError(Exception):
    """The root of tessera.train's errors (Ray's RayTrainError)."""


class TrainingFailedError(TrainingError):
    """A training run ended in failure (what fit() raises)."""


class WorkerGroupError(TrainingFailedError):
    """One or more ranks failed, more often than FailureConfig(max_failures) allowed."""

    def __init__(self, error_message: str, worker_failures: Dict[int, Exception]) -> None:
        super().__init__("Training failed due to worker errors:\n" + error_message)
        self._error_message = error_message
        self.worker_failures = worker_failures

    def __reduce__(self):
        return (self.__class__, (self._error_message, self.worker_failures))


class ControllerError(TrainingFailedError):
    """The run failed outside the ranks: reservation, start or supervision."""

    def __init__(self, controller_failure: Exception) -> None:
        super().__init__(f"Training failed due to controller error:\n{controller_failure}")
        self.controller_failure = controller_failure

    def __reduce__(self):
        return (self.__class__, (self.controller_failure,))


@dataclass
class Result:
    metrics: Optional[Dict[str, Any]]
    checkpoint: Optional[Checkpoint]
    error: Optional[TrainingFailedError]
    path: str
    best_checkpoints: List[Tuple[Checkpoint, Dict[str, Any]]] = field(default_factory=list)
    filesystem: Any = None

    @classmethod
    def from_run_dir(cls, run_dir: str, error: Optional[TrainingFailedError] = None) -> "Result":
        record = RunRecord(run_dir)
        kept = record.kept_checkpoints()
        return cls(metrics=record.last_metrics(), checkpoint=record.latest_checkpoint(),
                   error=error, path=str(run_dir),
                   best_checkpoints=[(Checkpoint(record.run_dir / e["dir"]), e["metrics"])
                                     for e in kept])

    @property
    def metrics_dataframe(self) -> Any:
        """Every report's rank-0 metrics as a pandas DataFrame (needs pandas)."""
        import json

        import pandas

        rows = []
        with open(RunRecord(self.path).run_dir / "result.jsonl") as f:
            for line in f:
                if line.strip():
                    rows.append(json.loads(line)["metrics"])
        return pandas.DataFrame(rows)

    def get_best_checkpoint(self, metric: str, mode: str) -> Optional[Checkpoint]:
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
        scored = [(c, m[metric]) for c, m in self.best_checkpoints if metric in m]
        if not scored:
            return None
        pick = max if mode == "max" else min
        return pick(scored, key=lambda pair: pair[1])[0]

    def __repr__(self) -> str:
        return (f"Result(metrics={self.metrics}, path={self.path!r}, "
                f"checkpoint={self.checkpoint}, error={self.error!r})")

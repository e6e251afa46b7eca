"""DataParallelTrainer.fit(): one training function on every rank of a gang that the C++ gang
controller (_core.run_actor_gang, include/tessera/gang.h RunActorGang) reserves, starts,
watches and restarts. For each rank of each attempt the controller calls `start` here with the
rank's actor options (its bundle of the reservation and its torchrun and JAX environment);
`start` makes the rank's `_TrainWorker` actor and calls its `run` with the training function
and the trainer's backend config (_backend.BackendConfig: TorchConfig, JaxConfig, or none).
When a rank fails, the controller kills every actor of the gang and starts them all again with
TORCHELASTIC_RESTART_COUNT one higher, up to FailureConfig(max_failures) times; the function
resumes from `get_checkpoint()`. The run's outcome is read back from its storage folder.

Threading: fit() blocks the calling thread until the gang ends (without the GIL; Ctrl-C is
not seen until then); `start` runs on the controller's threads, one per rank, with the GIL.
Cost: one actor (a Python worker process) per rank per attempt.
"""

from __future__ import annotations

import inspect
import threading
from typing import Any, Callable, Dict, Optional

from tessera import _core
from tessera._private import arguments, worker
from tessera.remote_function import put_code, put_serialized
from tessera.train._backend import BackendConfig
from tessera.train._config import RunConfig, ScalingConfig
from tessera.train._result import ControllerError, Result, WorkerGroupError
from tessera.train._session import _TrainWorker

# How long a failed rank's error is waited for when fit() explains the failure.
_ERROR_FETCH_TIMEOUT_S = 10.0
# After a rank fails, how long the other ranks may end on their own (so that a rank whose
# process died is reported as such, not as killed by the gang) before the gang kills them.
RANK_STOP_GRACE_S = 1.0
# How the runtime words the death of an actor that was killed (src/api/task_submitter.cc): the
# gang stopping the ranks that had not failed themselves.
_KILLED_BY_THE_GANG = "killed by tessera::Kill"


def _takes_config(loop: Callable) -> bool:
    """Whether the training function takes the config (0 or 1 parameters, as in Ray)."""
    parameters = [p for p in inspect.signature(loop).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(parameters) > 1:
        raise ValueError(f"train_loop_per_worker should take in 0 or 1 arguments, but it "
                         f"accepts {len(parameters)} arguments instead.")
    return len(parameters) == 1


class DataParallelTrainer:
    """Runs `train_loop_per_worker` on `scaling_config`'s ranks; see the module's docstring.
    Without `backend_config` the ranks join no framework (report() syncs through rank 0)."""

    def __init__(self, train_loop_per_worker: Callable, *,
                 train_loop_config: Optional[Dict[str, Any]] = None,
                 backend_config: Optional[BackendConfig] = None,
                 scaling_config: Optional[ScalingConfig] = None,
                 run_config: Optional[RunConfig] = None, datasets: Optional[dict] = None,
                 dataset_config: Any = None, metadata: Optional[dict] = None,
                 resume_from_checkpoint: Any = None) -> None:
        if metadata is not None:
            raise DeprecationWarning("The `metadata` argument is deprecated: attach metadata "
                                     "to checkpoints with Checkpoint.set_metadata instead.")
        if resume_from_checkpoint is not None:
            raise DeprecationWarning("`resume_from_checkpoint` is deprecated: read "
                                     "tessera.train.get_checkpoint() in the training function "
                                     "(a run of the same name and storage_path resumes from "
                                     "its latest checkpoint).")
        if datasets or dataset_config is not None:
            raise ValueError("datasets are not supported yet: load the data inside "
                             "train_loop_per_worker (prepare_data_loader shards it)")
        if not callable(train_loop_per_worker):
            raise ValueError("train_loop_per_worker must be a function")
        self._takes_config = _takes_config(train_loop_per_worker)
        if train_loop_config is not None and not isinstance(train_loop_config, dict):
            raise ValueError(f"train_loop_config must be a dict, not "
                             f"{type(train_loop_config).__name__}")
        self._loop = train_loop_per_worker
        self._config = train_loop_config
        if backend_config is not None and not isinstance(backend_config, BackendConfig):
            raise ValueError(f"backend_config must be a backend's config (TorchConfig, "
                             f"JaxConfig), not {type(backend_config).__name__}")
        self._backend_config = backend_config or BackendConfig()
        self.scaling_config = scaling_config or ScalingConfig()
        self.run_config = run_config or RunConfig()

    def fit(self) -> Result:
        """Runs the training to its end: the Result, or TrainingFailedError (WorkerGroupError
        naming the failed ranks, ControllerError) when it failed for good."""
        worker.auto_init()
        scaling, run = self.scaling_config, self.run_config
        run_dir = run.run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        info = {"name": run.name, "storage_path": str(run_dir.parent), "run_dir": str(run_dir),
                "backend_config": self._backend_config, "use_gpu": scaling.use_gpu,
                "checkpoint_config": run.checkpoint_config}
        code = put_code(_TrainWorker, "training worker class")
        no_args = arguments.encode((), {}, put_serialized)
        call = arguments.encode((self._loop, self._config, self._takes_config, info), {},
                                put_serialized)
        # num_workers on slices: 1 (the default) means one rank per host; another number must
        # be the slices' host count, known once they are reserved.
        expected = scaling.num_workers if not scaling.whole_slices or scaling.num_workers > 1 \
            else None
        lock = threading.Lock()
        refs: Dict[int, Any] = {}  # rank -> the ObjectRef of its latest attempt's call
        config_errors = []

        def start(options: "_core.ActorOptions"):  # the rank's, as the core made them
            env = options.env
            world = int(env["WORLD_SIZE"])
            if expected is not None and world != expected:
                message = (f"ScalingConfig(num_workers={expected}) does not match the "
                           f"{scaling.accelerator_type} {scaling.topology} slice's {world} "
                           "hosts: leave num_workers out (one rank per host) or give "
                           f"{world}")
                with lock:
                    config_errors.append(message)
                raise ValueError(message)
            try:
                actor_id = _core.create_actor("_TrainWorker", code, no_args, options)
                ref = _core.submit_actor_task(actor_id, "run", call)
            except _core.CoreError as e:
                raise RuntimeError(e.args[1]) from None
            with lock:
                refs[int(env["RANK"])] = ref
            return actor_id, ref

        gang_options = scaling.gang_options(run.name, run.failure_config.max_restarts)
        gang_options["stop_grace_s"] = RANK_STOP_GRACE_S
        try:
            status = _core.run_actor_gang(gang_options, start)
        except _core.CoreError as e:
            if e.args[0] == "INVALID":
                raise ValueError(f"cannot run the training gang: {e.args[1]}") from None
            raise ControllerError(RuntimeError(e.args[1])) from None
        if config_errors:
            raise ValueError(config_errors[0])
        if status["state"] == "SUCCEEDED":
            return Result.from_run_dir(str(run_dir))
        if status["state"] == "FAILED":
            raise self._worker_group_error(status, refs)
        raise ControllerError(RuntimeError(f"the training gang ended {status['state']}: "
                                           f"{status['message']}"))

    @staticmethod
    def _worker_group_error(status: Dict[str, Any], refs: Dict[int, Any]) -> WorkerGroupError:
        """Every rank of the last attempt that failed on its own (the one the gang saw first,
        and any other whose process died or whose call raised before the gang stopped it)."""
        failures: Dict[int, Exception] = {}
        lines = []
        for rank in status["ranks"]:
            if rank["state"] not in ("FAILED", "STOPPED"):
                continue
            error = _rank_error(refs.get(rank["rank"]), rank["exit_reason"])
            if error is None or (rank["state"] == "STOPPED" and _KILLED_BY_THE_GANG in str(error)):
                continue
            failures[rank["rank"]] = error
            lines.append(f"[Rank {rank['rank']} on node {rank['node_id']}]\n"
                         f"{type(error).__name__}: {error}")
        restarts = status["restart_count"]
        summary = f"{status['message']} (after {restarts} restart{'s' if restarts != 1 else ''})"
        return WorkerGroupError("\n".join(lines + [summary]), failures)


def _rank_error(ref: Any, exit_reason: str) -> Optional[Exception]:
    """The exception of a rank's call (its own class when it raised); its exit reason when the
    call never started; None when the call returned."""
    if ref is None:
        return RuntimeError(exit_reason or "the rank failed")
    try:
        worker.get_values([ref], _ERROR_FETCH_TIMEOUT_S)
    except Exception as e:  # noqa: BLE001 - the rank's error, whatever it is
        return e
    return None

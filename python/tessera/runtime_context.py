"""`tessera.get_runtime_context()`: who and where the calling code runs (Ray's RuntimeContext):
the job, node and worker ids, the task and actor running now, and the accelerators this worker
was given (per family: exactly the devices its isolation variables make visible).
"""

from __future__ import annotations

from typing import Dict, List, Optional

from tessera import _core
from tessera._private import executor, worker


class RuntimeContext:
    def __init__(self) -> None:
        self._context = _core.runtime_context()

    def get_job_id(self) -> str:
        """The id of the driver's job (in a worker: the job of the driver that leased it)."""
        return self._context["job_id"] or _job_id_from_env()

    def get_node_id(self) -> str:
        return self._context["node_id"]

    def get_worker_id(self) -> str:
        return self._context["worker_id"]

    def get_task_id(self) -> Optional[str]:
        """The running task's id (hex); None in a driver."""
        task_id = executor.current.task_id
        return task_id.hex() if task_id else None

    def get_task_name(self) -> Optional[str]:
        return executor.current.name

    def get_actor_id(self) -> Optional[str]:
        actor_id = _executor_actor_id()
        return actor_id.hex() if actor_id else None

    def get_accelerator_ids(self) -> Dict[str, List[str]]:
        """Accelerator instance ids per resource ("GPU", "TPU", ...) of this worker's lease."""
        return {name: [str(i) for i in ids]
                for name, ids in self._context["accelerator_ids"].items()}

    def get_node_labels(self) -> Dict[str, str]:
        return dict(self._context["node_labels"])

    @property
    def namespace(self) -> str:
        """The namespace of this job (init's `namespace`, else an anonymous one of its own):
        named actors are created and looked up there unless told otherwise."""
        return worker.namespace()

    @property
    def was_current_actor_reconstructed(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"RuntimeContext(node={self.get_node_id()}, worker={self.get_worker_id()})"


def _executor_actor_id() -> Optional[bytes]:
    return executor.active.actor_id() if executor.active is not None else None


def _job_id_from_env() -> str:
    import os
    return os.environ.get("TESSERA_JOB_ID", "")


def get_runtime_context() -> RuntimeContext:
    worker.auto_init()
    return RuntimeContext()


def get_gpu_ids() -> List[int]:
    """The GPUs of this worker's lease (indices as CUDA_VISIBLE_DEVICES names them)."""
    worker.auto_init()
    return list(_core.runtime_context()["accelerator_ids"].get("GPU", []))

"""The stand-in's jax.distributed: initialize checks its arguments as JAX does (a
"host:port" coordinator, 0 <= process_id < num_processes, once per process) and records every
call in `calls`, in order, with JAX_PLATFORMS as it was then."""

import os

calls = []
_state = None


def initialize(coordinator_address=None, num_processes=None, process_id=None,
               local_device_ids=None, cluster_detection_method=None, initialization_timeout=300,
               coordinator_bind_address=None):
    global _state
    if _state is not None:
        raise RuntimeError("jax.distributed.initialize should only be called once.")
    host, _, port = str(coordinator_address).rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"coordinator_address must be host:port, got {coordinator_address!r}")
    if not isinstance(num_processes, int) or num_processes < 1:
        raise ValueError(f"num_processes must be a positive int, got {num_processes!r}")
    if not isinstance(process_id, int) or not 0 <= process_id < num_processes:
        raise ValueError(f"process_id must be in [0, {num_processes}), got {process_id!r}")
    _state = {"coordinator_address": coordinator_address, "num_processes": num_processes,
              "process_id": process_id, "local_device_ids": local_device_ids}
    calls.append(dict(_state, call="initialize", jax_platforms=os.environ.get("JAX_PLATFORMS")))


def is_initialized():
    return _state is not None


def shutdown():
    global _state
    calls.append({"call": "shutdown"})
    _state = None

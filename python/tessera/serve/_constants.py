"""Serve's defaults and the environment variables that change them, with Ray Serve's names and
values (`ray/serve/_private/constants.py`).

Threading: constants; the env readers read os.environ when called. Cost: nothing.
"""

from __future__ import annotations

import os

SERVE_DEFAULT_APP_NAME = "default"
SERVE_LOGGER_NAME = "tessera.serve"

DEFAULT_MAX_ONGOING_REQUESTS = 5
DEFAULT_TARGET_ONGOING_REQUESTS = 2.0
DEFAULT_GRACEFUL_SHUTDOWN_WAIT_LOOP_S = 2.0
DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT_S = 20.0
DEFAULT_HEALTH_CHECK_PERIOD_S = 10.0
DEFAULT_HEALTH_CHECK_TIMEOUT_S = 30.0
DEFAULT_CONSTRUCTOR_RETRY_COUNT = 20
MAX_REPLICAS_PER_NODE_MAX_VALUE = 100

DEFAULT_HTTP_HOST = "127.0.0.1"
DEFAULT_HTTP_PORT = 8000
DEFAULT_GRPC_PORT = 9000
DEFAULT_UVICORN_KEEP_ALIVE_TIMEOUT_S = 90

# Names of the code Ray runs by default, with `ray` swapped for `tessera`: Tessera's controller
# and routers implement them natively, so these strings only name them.
DEFAULT_AUTOSCALING_POLICY_NAME = "tessera.serve.autoscaling_policy:default_autoscaling_policy"
DEFAULT_REQUEST_ROUTER_PATH = (
    "tessera.serve._private.request_router:PowerOfTwoChoicesRequestRouter")
DEFAULT_REQUEST_ROUTING_STATS_PERIOD_S = 10.0
DEFAULT_REQUEST_ROUTING_STATS_TIMEOUT_S = 30.0

# The header a client names a multiplexed model with (exact: underscores, as Ray).
SERVE_MULTIPLEXED_MODEL_ID = "serve_multiplexed_model_id"

# What the controller tells a replica it reserved a TPU slice for (context._get_replica_slice):
# the reservation's name and its number of hosts (src/serve_runtime/actor_replica_runtime.cc
# sets them).
REPLICA_SLICE_ENV = "TESSERA_SERVE_REPLICA_SLICE"
REPLICA_SLICE_HOSTS_ENV = "TESSERA_SERVE_REPLICA_SLICE_HOSTS"


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value not in ("0", "false", "False", "FALSE")

"""Serve's configs, with Ray Serve's names, defaults and checks (`ray.serve.config`):

  AutoscalingConfig    a deployment's autoscaling (min/initial/max replicas, target ongoing
                       requests, delays, factors); `AutoscalingConfig.default()` is what
                       num_replicas="auto" starts from (min 1, max 100, target 2)
  AutoscalingPolicy    which policy function decides (its import path)
  RequestRouterConfig  which request router a deployment's callers use, and its stats period
  HTTPOptions          the proxies' HTTP server (host, port, root_path, timeouts, TLS files);
                       RAY_SERVE_DEFAULT_HTTP_HOST, RAY_SERVE_DEFAULT_HTTP_PORT and
                       RAY_SERVE_HTTP_KEEP_ALIVE_TIMEOUT_S change the defaults
  gRPCOptions          the proxies' gRPC server (port, servicer functions, timeout)
  ProxyLocation        Disabled | HeadOnly | EveryNode (DeploymentMode: its deprecated form)
  LoggingConfig        log encoding (TEXT | JSON, env RAY_SERVE_LOG_ENCODING), level, folder,
                       access log, extra standard record attributes

They are checked once, when made (or a field assigned): a wrong type is a TypeError, a bad value
a ValueError, each one line naming the field. A policy function or router class given as a
callable is kept as its import path ("module.name"); nothing is imported here.

Threading: plain values. Cost: the field checks.
"""

from __future__ import annotations

import json
import logging
import warnings
from enum import Enum
from typing import Any, Optional, Union

from tessera.serve import _constants as constants
from tessera.serve._model import (Field, Model, check_bool, check_dict, check_enum, check_float,
                                  check_int, check_model, check_str, check_str_list)

DEFAULT_METRICS_INTERVAL_S = 10.0


def _import_path_of(name: str, value: Any) -> str:
    """A policy function or router class: its import path, given as one or as the callable."""
    if isinstance(value, str):
        if not value:
            raise ValueError(f"{name}: an import path must not be empty")
        return value
    if callable(value):
        return f"{value.__module__}.{value.__qualname__}"
    raise TypeError(f"{name}: expected an import path (str) or a callable, got "
                    f"{type(value).__name__}")


class AutoscalingPolicy(Model):
    """The autoscaling policy of a deployment: `policy_function` names
    `fn(ctx: AutoscalingContext) -> (num_replicas, policy_state)`; the default is Serve's
    request-based policy."""

    policy_function = Field(constants.DEFAULT_AUTOSCALING_POLICY_NAME, check=_import_path_of)

    def is_default_policy_function(self) -> bool:
        return self.policy_function == constants.DEFAULT_AUTOSCALING_POLICY_NAME


class AggregationFunction(str, Enum):
    MEAN = "mean"
    MAX = "max"
    MIN = "min"


def _aggregation_function(name: str, value: Any) -> AggregationFunction:
    return check_enum(AggregationFunction)(name, str(value).lower())


def _metrics_interval_s(name: str, value: Any) -> float:
    value = check_float(0, exclusive=True)(name, value)
    if value != DEFAULT_METRICS_INTERVAL_S:
        warnings.warn(
            "The `metrics_interval_s` field in AutoscalingConfig is deprecated and will be "
            "replaced by the environment variables "
            "`RAY_SERVE_REPLICA_AUTOSCALING_METRIC_PUSH_INTERVAL_S` and "
            "`RAY_SERVE_HANDLE_AUTOSCALING_METRIC_PUSH_INTERVAL_S` in a future release.",
            DeprecationWarning, stacklevel=4)
    return value


_POSITIVE = check_float(0, exclusive=True)
_OPTIONAL_POSITIVE = check_float(0, exclusive=True, optional=True)
_NON_NEGATIVE = check_float(0)


class AutoscalingConfig(Model):
    """Config for the Serve autoscaler (one deployment's)."""

    min_replicas = Field(1, check=check_int(0))
    initial_replicas = Field(None, check=check_int(0, optional=True))
    max_replicas = Field(1, check=check_int(0, exclusive=True))
    target_ongoing_requests = Field(constants.DEFAULT_TARGET_ONGOING_REQUESTS,
                                    check=_OPTIONAL_POSITIVE)
    metrics_interval_s = Field(DEFAULT_METRICS_INTERVAL_S, check=_metrics_interval_s)
    look_back_period_s = Field(30.0, check=_POSITIVE)
    smoothing_factor = Field(1.0, check=_POSITIVE)  # deprecated
    upscale_smoothing_factor = Field(None, check=_OPTIONAL_POSITIVE)  # deprecated
    downscale_smoothing_factor = Field(None, check=_OPTIONAL_POSITIVE)  # deprecated
    upscaling_factor = Field(None, check=_OPTIONAL_POSITIVE)
    downscaling_factor = Field(None, check=_OPTIONAL_POSITIVE)
    downscale_delay_s = Field(600.0, check=_NON_NEGATIVE)
    downscale_to_zero_delay_s = Field(None, check=check_float(0, optional=True))
    upscale_delay_s = Field(30.0, check=_NON_NEGATIVE)
    aggregation_function = Field(AggregationFunction.MEAN, check=_aggregation_function)
    policy = Field(factory=AutoscalingPolicy, check=check_model(AutoscalingPolicy))

    def _check(self) -> None:
        low, high, initial = self.min_replicas, self.max_replicas, self.initial_replicas
        if high < low:
            raise ValueError(f"max_replicas ({high}) must be greater than or equal to "
                             f"min_replicas ({low})!")
        if initial is not None and initial < low:
            raise ValueError(f"min_replicas ({low}) must be less than or equal to "
                             f"initial_replicas ({initial})!")
        if initial is not None and initial > high:
            raise ValueError(f"max_replicas ({high}) must be greater than or equal to "
                             f"initial_replicas ({initial})!")

    @classmethod
    def default(cls) -> "AutoscalingConfig":
        """What num_replicas="auto" starts from."""
        return cls(target_ongoing_requests=constants.DEFAULT_TARGET_ONGOING_REQUESTS,
                   min_replicas=1, max_replicas=100)

    def get_upscaling_factor(self) -> float:
        if self.upscaling_factor:
            return self.upscaling_factor
        return self.upscale_smoothing_factor or self.smoothing_factor

    def get_downscaling_factor(self) -> float:
        if self.downscaling_factor:
            return self.downscaling_factor
        return self.downscale_smoothing_factor or self.smoothing_factor

    def get_target_ongoing_requests(self) -> float:
        return self.target_ongoing_requests


def _router_kwargs(name: str, value: Any) -> dict:
    value = check_dict()(name, value)
    try:
        json.dumps(value)
    except TypeError as e:
        raise ValueError(f"request_router_kwargs is not JSON-serializable: {e}.") from None
    return value


class RequestRouterConfig(Model):
    """Config for the request router of a deployment's callers (default: power of two
    choices)."""

    request_router_class = Field(constants.DEFAULT_REQUEST_ROUTER_PATH, check=_import_path_of)
    request_router_kwargs = Field(factory=dict, check=_router_kwargs)
    request_routing_stats_period_s = Field(constants.DEFAULT_REQUEST_ROUTING_STATS_PERIOD_S,
                                           check=_POSITIVE)
    request_routing_stats_timeout_s = Field(constants.DEFAULT_REQUEST_ROUTING_STATS_TIMEOUT_S,
                                            check=_POSITIVE)

    def is_default_request_router(self) -> bool:
        return self.request_router_class == constants.DEFAULT_REQUEST_ROUTER_PATH


class DeploymentMode(str, Enum):
    """Deprecated form of ProxyLocation, still what HTTPOptions.location holds (as Ray)."""

    NoServer = "NoServer"
    HeadOnly = "HeadOnly"
    EveryNode = "EveryNode"


class ProxyLocation(str, Enum):
    """Where to run proxies for ingress traffic: Disabled (handles only), HeadOnly (one on the
    head), EveryNode (one on every node with a replica, and the head; the default)."""

    Disabled = "Disabled"
    HeadOnly = "HeadOnly"
    EveryNode = "EveryNode"

    @classmethod
    def _to_deployment_mode(cls, proxy_location: Union["ProxyLocation", str]) -> DeploymentMode:
        if isinstance(proxy_location, str):
            proxy_location = ProxyLocation(proxy_location)
        elif not isinstance(proxy_location, ProxyLocation):
            raise TypeError(f"Must be a `ProxyLocation` or str, got: {type(proxy_location)}.")
        if proxy_location == ProxyLocation.Disabled:
            return DeploymentMode.NoServer
        return DeploymentMode(proxy_location.value)

    @classmethod
    def _from_deployment_mode(
            cls, deployment_mode: Optional[Union[DeploymentMode, str]]) -> Optional["ProxyLocation"]:
        if deployment_mode is None:
            return None
        if isinstance(deployment_mode, str):
            deployment_mode = DeploymentMode(deployment_mode)
        elif not isinstance(deployment_mode, DeploymentMode):
            raise TypeError(f"Must be a `DeploymentMode` or str, got: {type(deployment_mode)}.")
        if deployment_mode == DeploymentMode.NoServer:
            return ProxyLocation.Disabled
        return ProxyLocation(deployment_mode.value)


def validate_ssl_config(ssl_certfile: Optional[str], ssl_keyfile: Optional[str]) -> None:
    if bool(ssl_certfile) != bool(ssl_keyfile):
        raise ValueError("Both ssl_keyfile and ssl_certfile must be provided together "
                         "to enable HTTPS.")


def _keep_alive_default() -> int:
    return constants.env_int("RAY_SERVE_HTTP_KEEP_ALIVE_TIMEOUT_S",
                             constants.DEFAULT_UVICORN_KEEP_ALIVE_TIMEOUT_S)


class HTTPFields(Model):
    """The fields HTTPOptions and the config file's HTTPOptionsSchema share; each adds host and
    port (their defaults differ: the Python API's come from the environment)."""

    root_path = Field("", check=check_str())
    request_timeout_s = Field(None, check=check_float(0, exclusive=True, optional=True))
    keep_alive_timeout_s = Field(factory=_keep_alive_default, check=check_int(0))
    ssl_keyfile = Field(None, check=check_str(optional=True))
    ssl_certfile = Field(None, check=check_str(optional=True))
    ssl_keyfile_password = Field(None, check=check_str(optional=True))
    ssl_ca_certs = Field(None, check=check_str(optional=True))

    def _check(self) -> None:
        validate_ssl_config(self.ssl_certfile, self.ssl_keyfile)


class HTTPOptions(HTTPFields):
    """HTTP options for the proxies. host None: no HTTP server."""

    host = Field(factory=lambda: constants.env_str("RAY_SERVE_DEFAULT_HTTP_HOST",
                                                   constants.DEFAULT_HTTP_HOST),
                 check=check_str(optional=True))
    port = Field(factory=lambda: constants.env_int("RAY_SERVE_DEFAULT_HTTP_PORT",
                                                   constants.DEFAULT_HTTP_PORT),
                 check=check_int(0, maximum=65535))
    # Deprecated (use proxy_location): where the HTTP servers run.
    location = Field(DeploymentMode.HeadOnly, check=check_enum(DeploymentMode, optional=True))

    def _check(self) -> None:
        super()._check()
        if self.host is None or self.location is None:
            object.__setattr__(self, "location", DeploymentMode.NoServer)


class gRPCOptions(Model):  # noqa: N801 - Ray's name
    """gRPC options for the proxies: no gRPC server unless grpc_servicer_functions names one."""

    port = Field(constants.DEFAULT_GRPC_PORT, check=check_int(0, maximum=65535))
    grpc_servicer_functions = Field(factory=list, check=check_str_list)
    request_timeout_s = Field(None, check=check_float(0, exclusive=True, optional=True))


class EncodingType(str, Enum):
    """Encoding of the serve logs."""

    TEXT = "TEXT"
    JSON = "JSON"


# Attributes of a logging.LogRecord that `additional_log_standard_attrs` may name.
LOGRECORD_STANDARD_ATTRS = [
    "args", "asctime", "created", "exc_info", "exc_text", "filename", "funcName", "levelname",
    "levelno", "lineno", "message", "module", "msecs", "msg", "name", "pathname", "process",
    "processName", "relativeCreated", "stack_info", "taskName", "thread", "threadName",
]


def _encoding(name: str, value: Any) -> str:
    if value not in [e.value for e in EncodingType]:
        raise ValueError(f"Got '{value}' for encoding. Encoding must be one of "
                         f"{[e.value for e in EncodingType]}.")
    return str(EncodingType(value).value)


def _log_level(name: str, value: Any) -> str:
    levels = logging.getLevelNamesMapping()
    if isinstance(value, int) and not isinstance(value, bool):
        names = {level: level_name for level_name, level in levels.items()}
        if value not in names:
            raise ValueError(f'Got "{value}" for log_level. log_level must be one of '
                             f"{sorted(names)}.")
        return names[value]
    if value not in levels:
        raise ValueError(f'Got "{value}" for log_level. log_level must be one of '
                         f"{list(levels)}.")
    return value


def _log_standard_attrs(name: str, value: Any) -> list:
    for attr in check_str_list(name, value):
        if attr not in LOGRECORD_STANDARD_ATTRS:
            raise ValueError(f"Unknown attribute '{attr}'. Additional log standard attributes "
                             f"must be one of {LOGRECORD_STANDARD_ATTRS}.")
    return sorted(set(value))


class LoggingConfig(Model):
    """Logging config of Serve's components, an application or a deployment."""

    encoding = Field(factory=lambda: constants.env_str("RAY_SERVE_LOG_ENCODING", "TEXT"),
                     check=_encoding)
    log_level = Field("INFO", check=_log_level)
    logs_dir = Field(None, check=check_str(optional=True))
    enable_access_log = Field(True, check=check_bool)
    additional_log_standard_attrs = Field(factory=list, check=_log_standard_attrs)


__all__ = [
    "AggregationFunction", "AutoscalingConfig", "AutoscalingPolicy", "DeploymentMode",
    "EncodingType", "HTTPOptions", "LoggingConfig", "ProxyLocation", "RequestRouterConfig",
    "gRPCOptions",
]

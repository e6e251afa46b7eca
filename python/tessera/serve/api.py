"""Serve's module functions (Ray Serve's `serve.run`, `serve.start`, `serve.status`, ...) over
the serve controller the head's process hosts (tessera._core's serve_* calls: HeadServe of
serve.proto).

  start(proxy_location, http_options, grpc_options, logging_config)
                      starts Serve on the cluster with these proxy options (once per cluster;
                      other options are refused until a shutdown) and records them for this
                      process's later deploys. The head's HTTP proxy runs in the head's
                      process; with proxy_location EveryNode (the default) every node that has
                      a replica runs one more (proxy.py's ProxyActor)
  run(target, blocking, name, route_prefix, logging_config)
                      builds the application (build.build_application), deploys it (starting
                      Serve when needed), waits until it is RUNNING (DEPLOY_FAILED raises
                      RayServeException with the controller's message) and returns the ingress's
                      DeploymentHandle; blocking=True then serves until Ctrl-C and shuts down
  status()            ServeStatus (Ray's dataclasses); empty when Serve is not running
  delete(name)        deletes an application (waits until it is gone unless _blocking=False)
  shutdown()          deletes every application and stops the proxies
  get_app_handle(name), get_deployment_handle(deployment_name, app_name)
  make_handle(app, deployment)  what replicas turn a bound deployment into (build.py's
                      HandlePlaceholder; the replica spec carries this function)

What a deploy sends: one DeployServeApplicationsRequest (built here as the proto3 JSON mapping,
since the interpreter has no protobuf module) with this process's Python (sys.executable, the
sys.path entries that exist and the working folder) so that replicas import what the driver
imports, and per deployment its options, resources (with the TPU slice each replica takes,
when it takes one: its shape made the protocol's types by the binding, serve_replica_slice) and
the replica's constructor argument (build.replica_spec, base64 in the JSON).

Threading: every function may be called from any thread. Cost: one controller call each, and
for run and delete a status call every 0.1 s while they wait.
"""

from __future__ import annotations

import base64
import inspect
import json
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, List, Optional, Union

from tessera.serve import build as serve_build
from tessera.serve import context as serve_context
from tessera.serve._constants import (DEFAULT_AUTOSCALING_POLICY_NAME,
                                      DEFAULT_REQUEST_ROUTER_PATH, SERVE_DEFAULT_APP_NAME,
                                      SERVE_LOGGER_NAME)
from tessera.serve.config import DeploymentMode, HTTPOptions, ProxyLocation, gRPCOptions
from tessera.serve.deployment import Application
from tessera.serve.exceptions import RayServeException
from tessera.serve.handle import DeploymentHandle, stop_routers
from tessera.serve.schema import LoggingConfig

logger = logging.getLogger(SERVE_LOGGER_NAME)

_POLL_S = 0.1
# How long shutdown waits for the controller to report Serve stopped before it only warns.
_SHUTDOWN_WAIT_S = 60.0


# ---------------------------------------------------------------------------------------------
# Status: Ray's shapes (ray.serve.schema).


class ApplicationStatus(str, Enum):
    NOT_STARTED = "NOT_STARTED"
    DEPLOYING = "DEPLOYING"
    DEPLOY_FAILED = "DEPLOY_FAILED"
    RUNNING = "RUNNING"
    UNHEALTHY = "UNHEALTHY"
    DELETING = "DELETING"


class DeploymentStatus(str, Enum):
    UPDATING = "UPDATING"
    HEALTHY = "HEALTHY"
    UNHEALTHY = "UNHEALTHY"
    DEPLOY_FAILED = "DEPLOY_FAILED"
    UPSCALING = "UPSCALING"
    DOWNSCALING = "DOWNSCALING"


class DeploymentStatusTrigger(str, Enum):
    UNSPECIFIED = "UNSPECIFIED"
    CONFIG_UPDATE_STARTED = "CONFIG_UPDATE_STARTED"
    CONFIG_UPDATE_COMPLETED = "CONFIG_UPDATE_COMPLETED"
    UPSCALE_COMPLETED = "UPSCALE_COMPLETED"
    DOWNSCALE_COMPLETED = "DOWNSCALE_COMPLETED"
    AUTOSCALING = "AUTOSCALING"
    REPLICA_STARTUP_FAILED = "REPLICA_STARTUP_FAILED"
    HEALTH_CHECK_FAILED = "HEALTH_CHECK_FAILED"
    INTERNAL_ERROR = "INTERNAL_ERROR"
    DELETING = "DELETING"


class ProxyStatus(str, Enum):
    STARTING = "STARTING"
    HEALTHY = "HEALTHY"
    UNHEALTHY = "UNHEALTHY"
    DRAINING = "DRAINING"
    DRAINED = "DRAINED"


class ProxyStatusOverview(str):
    """A proxy's status word (it compares equal to "HEALTHY" and ProxyStatus.HEALTHY, as Ray's
    ProxyStatus does), with where its HTTP server listens: `address` ("host:port"), and why it
    is not healthy when something went wrong: `message`."""

    address: str
    message: str

    def __new__(cls, status: str, address: str = "", message: str = "") -> "ProxyStatusOverview":
        word = super().__new__(cls, status)
        word.address = address
        word.message = message
        return word

    @property
    def status(self) -> str:
        return str.__str__(self)

    def __reduce__(self):
        return (ProxyStatusOverview, (str(self), self.address, self.message))


@dataclass
class DeploymentStatusOverview:
    status: Union[DeploymentStatus, str]
    status_trigger: Union[DeploymentStatusTrigger, str]
    replica_states: Dict[str, int]
    message: str = ""


@dataclass
class ApplicationStatusOverview:
    status: Union[ApplicationStatus, str]
    message: str
    last_deployed_time_s: float
    deployments: Dict[str, DeploymentStatusOverview]


@dataclass
class ServeStatus:
    proxies: Dict[str, ProxyStatusOverview] = field(default_factory=dict)
    applications: Dict[str, ApplicationStatusOverview] = field(default_factory=dict)
    target_capacity: Optional[float] = None


def _word(kind: type, value: str) -> Any:
    """The enum member for a word the controller sent; the word itself when this package does
    not know it (a newer controller)."""
    try:
        return kind(value)
    except ValueError:
        return value


def _deployment_overview(raw: Dict[str, Any]) -> DeploymentStatusOverview:
    return DeploymentStatusOverview(
        status=_word(DeploymentStatus, raw.get("status", "")),
        status_trigger=_word(DeploymentStatusTrigger, raw.get("status_trigger", "")),
        replica_states={k: int(v) for k, v in (raw.get("replica_states") or {}).items()},
        message=raw.get("message", ""))


def _application_overview(raw: Dict[str, Any]) -> ApplicationStatusOverview:
    return ApplicationStatusOverview(
        status=_word(ApplicationStatus, raw.get("status", "")),
        message=raw.get("message", ""),
        last_deployed_time_s=float(raw.get("last_deployed_time_s") or 0.0),
        deployments={d["name"]: _deployment_overview(d) for d in raw.get("deployments") or []})


# ---------------------------------------------------------------------------------------------
# Controller calls.


def _controller(call_name: str, *args: Any) -> Any:
    """`_core.<call_name>(*args)`, connecting first (Ray's auto-init); the controller's errors
    as RayServeException."""
    from tessera import _core
    from tessera._private import worker

    worker.auto_init()
    try:
        return getattr(_core, call_name)(*args)
    except _core.CoreError as e:
        raise RayServeException(e.args[1]) from None


def _raw_status() -> Dict[str, Any]:
    return json.loads(_controller("serve_status"))


def _raw_application(raw: Dict[str, Any], name: str) -> Optional[Dict[str, Any]]:
    for app in raw.get("applications") or []:
        if app.get("name") == name:
            return app
    return None


def status() -> ServeStatus:
    """Serve's status: its proxies, applications (with their deployments) and target capacity;
    empty when Serve is not running."""
    raw = _raw_status()
    if not raw.get("started"):
        return ServeStatus()
    proxies = {p["node_id"]: ProxyStatusOverview(p.get("status", ""), p.get("address", ""),
                                                 p.get("message", ""))
               for p in raw.get("proxies") or []}
    applications = {a["name"]: _application_overview(a) for a in raw.get("applications") or []}
    # The protocol has no "unset": 0 reads as Ray's None (no target capacity given).
    capacity = raw.get("target_capacity") or None
    return ServeStatus(proxies=proxies, applications=applications, target_capacity=capacity)


# ---------------------------------------------------------------------------------------------
# Start options.

_start_lock = threading.Lock()
# What serve.start of this process asked for (the proto's ServeStartOptions fields, without the
# Python ones); None when it did not call it.
_started: Optional[Dict[str, Any]] = None


def _http_options(http_options: Any) -> HTTPOptions:
    if http_options is None:
        return HTTPOptions()
    if isinstance(http_options, HTTPOptions):
        return http_options
    if isinstance(http_options, dict):
        return HTTPOptions(**http_options)
    raise TypeError(f"http_options must be an HTTPOptions or a dict, got "
                    f"{type(http_options).__name__}")


def _proxy_location(proxy_location: Any, http: HTTPOptions) -> ProxyLocation:
    if http.host is None:
        return ProxyLocation.Disabled
    if proxy_location is not None:
        if isinstance(proxy_location, ProxyLocation):
            return proxy_location
        if isinstance(proxy_location, DeploymentMode):
            return ProxyLocation._from_deployment_mode(proxy_location)
        return ProxyLocation(proxy_location)
    if "location" in http.fields_set:
        return ProxyLocation._from_deployment_mode(http.location)
    return ProxyLocation.EveryNode


def _start_fields(proxy_location: Any, http_options: Any) -> Dict[str, Any]:
    """ServeStartOptions' proxy fields for these options (Ray's defaults where not given)."""
    http = _http_options(http_options)
    location = _proxy_location(proxy_location, http)
    return {"http_host": http.host or "", "http_port": int(http.port),
            "root_path": http.root_path, "request_timeout_s": float(http.request_timeout_s or 0),
            "keep_alive_timeout_s": float(http.keep_alive_timeout_s),
            "proxy_location": location.value}


def _python_path() -> List[str]:
    """This process's import path for replicas: sys.path's folders and archives that exist
    (absolute), then the working folder."""
    paths: List[str] = []
    for entry in [*sys.path, os.getcwd()]:
        path = os.path.abspath(entry or os.getcwd())
        if os.path.exists(path) and path not in paths:
            paths.append(path)
    return paths


def _start_message(explicit: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The deploy's ServeStartOptions: `explicit` (serve.start's, or a config file's) when
    given; else Ray's defaults when Serve is not running, and when it runs only this client's
    Python (an empty proxy_location: the running Serve keeps its options)."""
    if explicit is not None:
        fields = dict(explicit)
    else:
        with _start_lock:
            fields = dict(_started) if _started is not None else None
        if fields is None:
            running = bool(_raw_status().get("started"))
            fields = {"proxy_location": ""} if running else _start_fields(None, None)
    fields["python_executable"] = sys.executable
    fields["python_path"] = _python_path()
    return fields


def start(proxy_location: Union[None, str, ProxyLocation] = None,
          http_options: Union[None, dict, HTTPOptions] = None,
          grpc_options: Union[None, dict, gRPCOptions] = None,
          logging_config: Union[None, dict, LoggingConfig] = None, **kwargs: Any) -> None:
    """Starts Serve on the cluster (its proxies; the controller lives in the head). Serve is
    cluster-scoped: once running, other options are refused until serve.shutdown()."""
    if kwargs:
        raise TypeError(f"start() got an unexpected keyword argument '{next(iter(kwargs))}'")
    if grpc_options is not None:
        grpc = grpc_options if isinstance(grpc_options, gRPCOptions) else gRPCOptions(
            **grpc_options)
        if grpc.grpc_servicer_functions:
            raise RayServeException("gRPC proxies are not supported by tessera.serve: give no "
                                    "grpc_servicer_functions.")
    if logging_config is not None and not isinstance(logging_config, LoggingConfig):
        LoggingConfig(**logging_config)  # checked; Serve's own logs keep their settings
    fields = _start_fields(proxy_location, http_options)
    request = {"start": _start_message(fields), "applications": []}
    _controller("serve_deploy", json.dumps(request))
    global _started
    with _start_lock:
        _started = fields


# ---------------------------------------------------------------------------------------------
# Deploy requests.


def _slice_message(replica_slice: Dict[str, Any], per_host: Dict[str, float]) -> Dict[str, Any]:
    """ServeReplicaSlice for a deployment's replica slice (build.json_ready_slice), every host's
    bundle holding `per_host` (the replica actor's resources) besides its chips: the shape's
    text parsed once, by the binding, into the protocol's types."""
    from tessera import _core

    return json.loads(_core.serve_replica_slice(
        replica_slice["accelerator_type"], replica_slice["topology"], dict(per_host),
        bool(replica_slice["sub_slice"])))


def _resources_message(options: Dict[str, Any],
                       replica_slice: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """ServeReplicaResources for a deployment's resolved options (and its replica slice)."""
    actor = options.get("ray_actor_options") or {}
    amounts: Dict[str, float] = {}
    for option, resource in (("num_cpus", "CPU"), ("num_gpus", "GPU"), ("memory", "memory")):
        if actor.get(option):
            amounts[resource] = float(actor[option])
    for resource, amount in (actor.get("resources") or {}).items():
        amounts[resource] = float(amount)
    message: Dict[str, Any] = {"amounts": amounts}
    if actor.get("accelerator_type"):
        message["accelerator_type"] = actor["accelerator_type"]
    runtime_env = dict(actor.get("runtime_env") or {})
    env_vars = runtime_env.pop("env_vars", None) or {}
    unsupported = sorted(key for key, value in runtime_env.items() if value)
    if unsupported:
        raise RayServeException(f"runtime_env {unsupported} is not supported for Serve replicas "
                                "yet (only env_vars): the replicas import from the deploying "
                                "process's sys.path and working folder.")
    if env_vars:
        message["env_vars"] = {str(k): str(v) for k, v in env_vars.items()}
    bundles = options.get("placement_group_bundles")
    if bundles:
        message["placement_group_bundles"] = [
            {"amounts": {k: float(v) for k, v in bundle.items()}} for bundle in bundles]
        message["placement_group_strategy"] = options.get("placement_group_strategy") or "PACK"
    if options.get("max_replicas_per_node"):
        message["max_replicas_per_node"] = int(options["max_replicas_per_node"])
    if replica_slice is not None:
        message["slice"] = _slice_message(replica_slice, amounts)
    return message


def _autoscaling_message(config: Dict[str, Any], name: str) -> Dict[str, Any]:
    """ServeAutoscalingConfig for a resolved autoscaling_config dict (AutoscalingConfig's
    fields)."""
    policy = (config.get("policy") or {}).get("policy_function", DEFAULT_AUTOSCALING_POLICY_NAME)
    if policy != DEFAULT_AUTOSCALING_POLICY_NAME:
        raise RayServeException(f"Deployment '{name}': custom autoscaling policies ({policy}) "
                                "are not supported by tessera.serve; the default policy runs.")
    message = {key: config[key] for key in (
        "min_replicas", "max_replicas", "target_ongoing_requests", "look_back_period_s",
        "upscale_delay_s", "downscale_delay_s", "metrics_interval_s")}
    message["aggregation_function"] = str(config.get("aggregation_function") or "mean").lower()
    for key in ("initial_replicas", "downscale_to_zero_delay_s"):
        if config.get(key) is not None:
            message[key] = config[key]
    # AutoscalingConfig.get_upscaling_factor / get_downscaling_factor: the deprecated smoothing
    # factors stand in for unset ones.
    message["upscaling_factor"] = (config.get("upscaling_factor")
                                   or config.get("upscale_smoothing_factor")
                                   or config.get("smoothing_factor") or 1.0)
    message["downscaling_factor"] = (config.get("downscaling_factor")
                                     or config.get("downscale_smoothing_factor")
                                     or config.get("smoothing_factor") or 1.0)
    return message


def _deployment_message(built: serve_build.BuiltDeployment) -> Dict[str, Any]:
    """ServeDeploymentSpec for one built deployment."""
    options = built.spec["options"]
    router = (options.get("request_router_config") or {}).get("request_router_class")
    if router and router != DEFAULT_REQUEST_ROUTER_PATH:
        logger.warning("Deployment '%s': request_router_class %s is not supported; its callers "
                       "route with power of two choices.", built.name, router)
    # One spec serves every replica of the deployment: the controller names each replica.
    spec = serve_build.replica_spec(built, "", make_handle)
    user_config = options.get("user_config")
    message = {
        "name": built.name,
        "code_version": built.spec["code_version"],
        "replica_spec": base64.b64encode(spec).decode("ascii"),
        "user_config_json": "" if user_config is None else json.dumps(user_config,
                                                                      sort_keys=True),
        "resources": _resources_message(options, built.spec.get("replica_slice")),
        "num_replicas": int(options.get("num_replicas") or 0),
        "max_ongoing_requests": int(options["max_ongoing_requests"]),
        "max_queued_requests": int(options["max_queued_requests"]),
        "graceful_shutdown_wait_loop_s": float(options["graceful_shutdown_wait_loop_s"]),
        "graceful_shutdown_timeout_s": float(options["graceful_shutdown_timeout_s"]),
        "health_check_period_s": float(options["health_check_period_s"]),
        "health_check_timeout_s": float(options["health_check_timeout_s"]),
        "max_constructor_retry_count": int(options["max_constructor_retry_count"]),
    }
    if options.get("autoscaling_config") is not None:
        message["autoscaling_config"] = _autoscaling_message(options["autoscaling_config"],
                                                             built.name)
    return message


def _takes_http(target: Application) -> bool:
    """Whether the ingress serves HTTP: an @serve.ingress app, a function, or a class with a
    __call__ (which the proxy calls with a starlette Request)."""
    from tessera.serve.ingress import ASGIAppReplicaWrapper

    ingress = target._bound_deployment.func_or_class
    if inspect.isfunction(ingress):
        return True
    if inspect.isclass(ingress):
        return issubclass(ingress, ASGIAppReplicaWrapper) or any(
            "__call__" in vars(klass) for klass in ingress.__mro__ if klass is not object)
    return False


def _application_message(target: Application,
                         built: serve_build.BuiltApplication) -> Dict[str, Any]:
    """ServeApplicationSpec for one built application."""
    message: Dict[str, Any] = {
        "name": built.name,
        "ingress_deployment": built.ingress_deployment_name,
        "deployments": [_deployment_message(d) for d in built.deployments],
        "ingress_takes_http": _takes_http(target),
    }
    if built.route_prefix is not None:
        message["route_prefix"] = built.route_prefix
    return message


def _deploy(applications: List[Dict[str, Any]], start_fields: Optional[Dict[str, Any]],
            replace_all: bool = False) -> None:
    request = {"start": _start_message(start_fields), "applications": applications,
               "replace_all": replace_all}
    _controller("serve_deploy", json.dumps(request))


def _wait_running(name: str) -> None:
    """Waits until application `name` is RUNNING; RayServeException when it failed to deploy."""
    while True:
        app = _raw_application(_raw_status(), name)
        if app is not None:
            if app.get("status") == ApplicationStatus.RUNNING.value:
                return
            if app.get("status") == ApplicationStatus.DEPLOY_FAILED.value:
                raise RayServeException(f"Deploying application {name} failed: "
                                        f"{app.get('message', '')}")
        time.sleep(_POLL_S)


def _serve_forever() -> None:
    """serve.run(blocking=True) and `serve run`: until Ctrl-C, then Serve shuts down."""
    try:
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        logger.info("Got KeyboardInterrupt, shutting down...")
        shutdown()


def run(target: Application, blocking: bool = False, name: str = SERVE_DEFAULT_APP_NAME,
        route_prefix: Optional[str] = "/", logging_config: Union[None, dict, LoggingConfig] = None,
        _local_testing_mode: bool = False) -> DeploymentHandle:
    """Deploys `target` as application `name` (an update when it runs already), waits until it
    is RUNNING and returns its ingress's handle. route_prefix None: not served over HTTP.
    blocking=True then serves until Ctrl-C."""
    if _local_testing_mode:
        raise RayServeException("_local_testing_mode is not supported by tessera.serve: run the "
                                "application on a cluster (tessera.init() starts a local one).")
    if logging_config is not None and not isinstance(logging_config, LoggingConfig):
        LoggingConfig(**logging_config)  # checked; the replicas log with their deployment's
    built = serve_build.build_application(target, name, route_prefix)
    _deploy([_application_message(target, built)], None)
    _wait_running(name)
    logger.info("Deployed app '%s' successfully.", name)
    handle = DeploymentHandle(built.ingress_deployment_name, name)
    if blocking:
        _serve_forever()
    return handle


def _deploy_config(config: Any, wait: bool = False) -> List[str]:
    """Deploys a config file's applications (a ServeDeploySchema) as the whole goal (`serve
    deploy`: others are deleted); their names. With `wait`, until each is RUNNING."""
    start_fields = _start_fields(config.proxy_location, config.http_options.dict())
    applications = []
    for app_config in config.applications:
        target = serve_build.load_application(app_config.import_path, app_config.args)
        built = serve_build.build_application(
            target, app_config.name, app_config.route_prefix,
            deployment_overrides=app_config.deployments, runtime_env=app_config.runtime_env)
        applications.append(_application_message(target, built))
    _deploy(applications, start_fields, replace_all=True)
    names = [app["name"] for app in applications]
    for name in names if wait else []:
        _wait_running(name)
    return names


def delete(name: str, _blocking: bool = True) -> None:
    """Deletes application `name` and its deployments (waits until it is gone unless
    _blocking=False)."""
    if not isinstance(name, str) or not name:
        raise RayServeException("Application name must a non-empty string.")
    _controller("serve_delete", [name])
    stop_routers(name)
    while _blocking and _raw_application(_raw_status(), name) is not None:
        time.sleep(_POLL_S)


def shutdown() -> None:
    """Deletes every application and stops Serve's proxies; a no-op (logged) when Serve does not
    run."""
    from tessera._private import worker

    global _started
    if not worker.is_initialized():
        logger.info("Nothing to shut down. There's no Serve application running on this "
                    "cluster.")
        return
    if not _raw_status().get("started"):
        logger.info("Nothing to shut down. There's no Serve application running on this "
                    "cluster.")
    else:
        _controller("serve_shutdown")
        deadline = time.monotonic() + _SHUTDOWN_WAIT_S
        while _raw_status().get("started") and time.monotonic() < deadline:
            time.sleep(_POLL_S)
    stop_routers()
    with _start_lock:
        _started = None


# ---------------------------------------------------------------------------------------------
# Handles.


def get_app_handle(name: str) -> DeploymentHandle:
    """A handle to application `name`'s ingress; RayServeException when there is no such
    application."""
    app = _raw_application(_raw_status(), name)
    if app is None:
        raise RayServeException(f"Application '{name}' does not exist.")
    return DeploymentHandle(app["ingress_deployment"], name)


def get_deployment_handle(deployment_name: str, app_name: Optional[str] = None,
                          _check_exists: bool = True,
                          _record_telemetry: bool = True) -> DeploymentHandle:
    """A handle to `deployment_name` of application `app_name` (inside a replica: its own
    application by default; outside it is required)."""
    if app_name is None:
        context = serve_context._get_internal_replica_context()
        if context is None:
            raise RayServeException("Please specify an application name when getting a "
                                    "deployment handle outside of a Serve application.")
        app_name = context.app_name
    if _check_exists:
        app = _raw_application(_raw_status(), app_name)
        if app is None:
            raise RayServeException(f"Application '{app_name}' does not exist.")
        names = [d.get("name") for d in app.get("deployments") or []]
        if deployment_name not in names:
            raise RayServeException(f"Deployment '{deployment_name}' does not exist in "
                                    f"application '{app_name}'.")
    return DeploymentHandle(deployment_name, app_name)


def make_handle(app_name: str, deployment_name: str) -> DeploymentHandle:
    """The DeploymentHandle a replica gets for a deployment it was bound with."""
    return DeploymentHandle(deployment_name, app_name)


__all__ = [
    "ApplicationStatus", "ApplicationStatusOverview", "DeploymentStatus",
    "DeploymentStatusOverview", "DeploymentStatusTrigger", "ProxyStatus", "ProxyStatusOverview",
    "ServeStatus", "delete", "get_app_handle", "get_deployment_handle", "make_handle", "run",
    "shutdown", "start", "status",
]

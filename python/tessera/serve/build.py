"""Turning an Application into what the controller deploys, and finding one by import path.

`build_application(app, name, route_prefix)` walks the bound graph (every Application found in
init args, at any depth, is a deployment of the app, replaced there by a HandlePlaceholder that
the replica turns into a DeploymentHandle) and returns a BuiltApplication:

  name, route_prefix, ingress_deployment_name (the outermost deployment)
  deployments: one BuiltDeployment each, children before parents, with
    spec                   a plain, JSON-serialisable dict (below)
    serialized_callable    the cloudpickled class or function
    serialized_init_args   cloudpickle of (args, kwargs), handles as HandlePlaceholders

  spec = {"name", "app_name", "ingress" (bool), "route_prefix" (the ingress's, else None),
          "callable_name", "is_function", "is_asgi" (an @serve.ingress class),
          "code_version", "version" (deprecated user version or None),
          "options" (every option, defaults filled in: _options.resolve),
          "replica_slice" (the TPU slice each replica takes, Deployment._with_replica_slice:
          {accelerator_type, topology, sub_slice}; None),
          "user_configured_option_names" (those set in code or config, sorted),
          "user_options" (those options' values), "handle_dependencies" (deployment names)}

`code_version` is a sha256 over the pickled code, the pickled init args and the replica options
(ray_actor_options, placement group, max_replicas_per_node, the replica slice): it changes when
any of them does,
and not when only deployment-config options (user_config, num_replicas, ...) do. With a
(deprecated) user `version`, the version replaces the code and args in the hash, as Ray lets a
version pin the code. Classes pickled by value (defined in __main__ or a function) carry an id
of their process, so the same code built by another process has another code version.

Names: each deployment is named by its `name` option, else after its class or function. Two
different deployments (not the same Application object, and not the same code, args and
options) may not share a name the user gave: that is an error. Default names are made unique as
Ray does (Model, Model_1, ...; with Ray's warning).

`deployment_overrides` (a config file's `deployments[]`: DeploymentSchema objects or dicts)
go over the code's options (config file > code > default); each must name a deployment of the
app. `runtime_env` (the config's application runtime_env) is every deployment's default one
(env_vars merged, the deployment's own keys winning).

`load_application(import_path, args)` imports `module:attr` or `module.attr`: an Application,
or a builder `f(args: dict) -> Application` called with `args`.

Threading: pure functions over the graph. Cost: one pickling of each callable and its args,
plus one pass to find the graph.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import io
import json
import logging
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

from tessera.serve import _options, _pickle
from tessera.serve._constants import SERVE_DEFAULT_APP_NAME, SERVE_LOGGER_NAME
from tessera.serve.deployment import Application, Deployment
from tessera.serve.exceptions import RayServeException

logger = logging.getLogger(SERVE_LOGGER_NAME)


@dataclass(frozen=True)
class HandlePlaceholder:
    """Stands for a DeploymentHandle to `deployment_name` of `app_name` in pickled init args;
    the replica replaces it with `make_handle(app_name, deployment_name)`."""

    app_name: str
    deployment_name: str


@dataclass(frozen=True)
class BuiltDeployment:
    spec: Dict[str, Any]
    serialized_callable: bytes
    serialized_init_args: bytes

    @property
    def name(self) -> str:
        return self.spec["name"]


@dataclass(frozen=True)
class BuiltApplication:
    name: str
    route_prefix: Optional[str]
    ingress_deployment_name: str
    deployments: List[BuiltDeployment]

    def specs(self) -> List[Dict[str, Any]]:
        """The deployments' JSON-serialisable specs."""
        return [deployment.spec for deployment in self.deployments]

    def deployment(self, name: str) -> BuiltDeployment:
        for built in self.deployments:
            if built.name == name:
                return built
        raise KeyError(name)


def validate_route_prefix(route_prefix: Any) -> None:
    """Ray's rules: None (no HTTP), or starts with "/", no trailing "/" unless exactly "/", no
    "{" or "}"."""
    if route_prefix is None:
        return
    if not isinstance(route_prefix, str):
        raise TypeError(f"route_prefix must be a str or None, got {type(route_prefix).__name__}")
    if not route_prefix.startswith("/"):
        raise ValueError(f"Invalid route_prefix '{route_prefix}', must start with a forward "
                         "slash ('/').")
    if route_prefix != "/" and route_prefix.endswith("/"):
        raise ValueError(f"Invalid route_prefix '{route_prefix}', may not end with a trailing "
                         "'/'.")
    if "{" in route_prefix or "}" in route_prefix:
        raise ValueError(f"Invalid route_prefix '{route_prefix}', may not contain wildcards.")


# ---------------------------------------------------------------------------------------------
# Pickling with Applications found and replaced.


class _AppPickler(_pickle.ServePickler):
    """Pickles a value with every Application in it replaced by `replace(app)`."""

    def __init__(self, file: io.BytesIO, replace: Callable[[Application], Any]) -> None:
        super().__init__(file)
        self._replace = replace

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, Application):
            return _reduce_to(self._replace(obj))
        return super().reducer_override(obj)


def _reduce_to(value: Any) -> tuple:
    if isinstance(value, HandlePlaceholder):
        return (HandlePlaceholder, (value.app_name, value.deployment_name))
    return (type(None), ())


def _pickle_args(args: tuple, kwargs: dict, replace: Callable[[Application], Any]) -> bytes:
    buffer = io.BytesIO()
    try:
        _AppPickler(buffer, replace).dump((tuple(args), dict(kwargs)))
    except Exception as e:
        raise TypeError(f"Could not serialize the deployment init args: {e}") from e
    return buffer.getvalue()


def _children(app: Application) -> List[Application]:
    """The Applications in `app`'s init args, in the order pickling meets them."""
    found: List[Application] = []

    def record(child: Application) -> None:
        if all(child is not seen for seen in found):
            found.append(child)

    bound = app._bound_deployment
    _pickle_args(bound.init_args, bound.init_kwargs, record)
    return found


def _graph(root: Application) -> List[Application]:
    """Every Application of the graph once, children before parents (the root last)."""
    order: List[Application] = []
    visiting: List[Application] = []

    def visit(app: Application) -> None:
        if any(app is done for done in order):
            return
        if any(app is open_ for open_ in visiting):
            raise ValueError("An application's deployments cannot bind each other in a cycle.")
        visiting.append(app)
        for child in _children(app):
            visit(child)
        visiting.pop()
        order.append(app)

    visit(root)
    return order


# ---------------------------------------------------------------------------------------------
# Names.


def _assign_names(apps: List[Application]) -> Dict[int, str]:
    """{id(app): deployment name}: names the user gave first (two different deployments with
    one is an error, settled by _check_duplicates once their code is known), then the default
    names, made unique with a suffix as Ray does."""
    names: Dict[int, str] = {}
    taken = {app._bound_deployment.name for app in apps if app._bound_deployment._name_set}
    for app in apps:
        deployment = app._bound_deployment
        if deployment._name_set:
            names[id(app)] = deployment.name
    for app in apps:
        deployment = app._bound_deployment
        if deployment._name_set:
            continue
        name, index = deployment.name, 1
        while name in taken:
            name, index = f"{deployment.name}_{index}", index + 1
        if index > 1:
            logger.warning("There are multiple deployments with the same name "
                           f"'{deployment.name}'. Renaming one to '{name}'.")
        taken.add(name)
        names[id(app)] = name
    return names


# ---------------------------------------------------------------------------------------------
# Building.


def _merge_runtime_env(app_env: Optional[dict], own: Optional[dict]) -> dict:
    merged = {**(app_env or {}), **(own or {})}
    env_vars = {**(app_env or {}).get("env_vars", {}), **(own or {}).get("env_vars", {})}
    if env_vars:
        merged["env_vars"] = env_vars
    return merged


def _layers_with_config(apps: List[Application], names: Dict[int, str], app_name: str,
                        overrides: List[Any], runtime_env: Optional[dict]) -> Dict[int, dict]:
    """Each deployment's option layer: the code's, with its config override over it."""
    from tessera.serve.schema import DeploymentSchema

    by_name: Dict[str, dict] = {}
    for override in overrides:
        schema = override if isinstance(override, DeploymentSchema) else DeploymentSchema(
            **override)
        by_name[schema.name] = schema.layer()
    known = set(names.values())
    for name in by_name:
        if name not in known:
            raise ValueError(f"Deployment '{name}' in the config of application '{app_name}' "
                             f"does not exist in its code (its deployments: {sorted(known)}).")
    layers = {}
    for app in apps:
        layer = _options.merge(app._bound_deployment._options, by_name.get(names[id(app)], {}))
        if runtime_env:
            actor_options = dict(layer.get("ray_actor_options") or {})
            actor_options["runtime_env"] = _merge_runtime_env(runtime_env,
                                                              actor_options.get("runtime_env"))
            layer["ray_actor_options"] = actor_options
        layers[id(app)] = layer
    return layers


def _code_version(serialized_callable: bytes, serialized_args: bytes,
                  options: Dict[str, Any], version: Optional[str],
                  replica_slice: Optional[Dict[str, Any]]) -> str:
    digest = hashlib.sha256()
    if version is not None:
        digest.update(b"version\0" + version.encode())
    else:
        digest.update(serialized_callable)
        digest.update(b"\0")
        digest.update(serialized_args)
    replica = {name: options[name] for name in _options.REPLICA_OPTIONS}
    if replica_slice is not None:
        replica["replica_slice"] = replica_slice
    digest.update(json.dumps(replica, sort_keys=True).encode())
    return digest.hexdigest()


def json_ready_slice(replica_slice: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """A deployment's replica slice (Deployment._with_replica_slice) as the spec holds it:
    accelerator_type, topology, sub_slice; None when it has none."""
    if replica_slice is None:
        return None
    return {"accelerator_type": str(replica_slice["accelerator_type"]),
            "topology": str(replica_slice["topology"]),
            "sub_slice": bool(replica_slice.get("sub_slice", False))}


def _is_asgi(target: Any) -> bool:
    from tessera.serve.ingress import ASGIAppReplicaWrapper

    return inspect.isclass(target) and issubclass(target, ASGIAppReplicaWrapper)


def _build_one(app: Application, name: str, app_name: str, layer: dict,
               names: Dict[int, str]) -> BuiltDeployment:
    deployment: Deployment = app._bound_deployment
    dependencies: List[str] = []

    def placeholder(child: Application) -> HandlePlaceholder:
        child_name = names[id(child)]
        if child_name not in dependencies:
            dependencies.append(child_name)
        return HandlePlaceholder(app_name, child_name)

    serialized_args = _pickle_args(deployment.init_args, deployment.init_kwargs, placeholder)
    try:
        serialized_callable = _pickle.dumps(deployment.func_or_class)
    except Exception as e:
        raise TypeError(f"Could not serialize the deployment {deployment.func_or_class!r}: "
                        f"{e}") from e
    options = _options.resolve(layer)
    replica_slice = json_ready_slice(deployment._replica_slice)
    if replica_slice is not None and options["placement_group_bundles"] is not None:
        raise ValueError(f"Deployment '{name}' takes a TPU slice per replica: it cannot also "
                         "have placement_group_bundles.")
    spec = {
        "name": name, "app_name": app_name, "ingress": False, "route_prefix": None,
        "callable_name": deployment.func_or_class.__name__,
        "is_function": inspect.isfunction(deployment.func_or_class),
        "is_asgi": _is_asgi(deployment.func_or_class),
        "code_version": _code_version(serialized_callable, serialized_args, options,
                                      layer.get("version"), replica_slice),
        "version": layer.get("version"),
        "options": options,
        "replica_slice": replica_slice,
        "user_configured_option_names": sorted(layer),
        "user_options": {key: options[key] for key in sorted(layer)},
        "handle_dependencies": dependencies,
    }
    return BuiltDeployment(spec, serialized_callable, serialized_args)


def _check_duplicates(built: List[BuiltDeployment], app_name: str) -> List[BuiltDeployment]:
    """One deployment per name: the same definition bound twice (equal code version and
    options) is deployed once; two different ones with a name the user gave are an error."""
    unique: Dict[str, BuiltDeployment] = {}
    for deployment in built:
        seen = unique.get(deployment.name)
        if seen is None:
            unique[deployment.name] = deployment
            continue
        if (seen.spec["code_version"], seen.spec["options"]) != (
                deployment.spec["code_version"], deployment.spec["options"]):
            raise RayServeException(
                f"Found multiple different deployments named '{deployment.name}' in "
                f"application '{app_name}'. Deployment names must be unique within an "
                "application: give one of them another name with `.options(name=...)`.")
    return list(unique.values())


def build_application(app: Application, name: str = SERVE_DEFAULT_APP_NAME,
                      route_prefix: Optional[str] = "/", *,
                      deployment_overrides: Optional[List[Any]] = None,
                      runtime_env: Optional[dict] = None) -> BuiltApplication:
    """The deployments of `app` as application `name`, served under `route_prefix` (None: no
    HTTP). See the module doc for what each deployment's spec holds."""
    if not isinstance(name, str) or not name:
        raise RayServeException("Application name must a non-empty string.")
    if not isinstance(app, Application):
        raise TypeError("`serve.run` expects an `Application` returned by `Deployment.bind()`.")
    validate_route_prefix(route_prefix)
    apps = _graph(app)
    names = _assign_names(apps)
    layers = _layers_with_config(apps, names, name, list(deployment_overrides or []),
                                 runtime_env)
    built = [_build_one(a, names[id(a)], name, layers[id(a)], names) for a in apps]
    deployments = _check_duplicates(built, name)
    ingress_name = names[id(app)]
    for deployment in deployments:
        if deployment.name == ingress_name:
            deployment.spec.update(ingress=True, route_prefix=route_prefix)
    if sum(d.spec["is_asgi"] for d in deployments) > 1:
        raise RayServeException(
            f'Found multiple FastAPI deployments in application "{name}". Please only include '
            "one deployment with @serve.ingress in your application to avoid this issue.")
    return BuiltApplication(name, route_prefix, ingress_name, deployments)


def replica_spec(built: BuiltDeployment, replica_id: str,
                 make_handle: Optional[Callable[[str, str], Any]] = None) -> bytes:
    """The cloudpickled spec ReplicaActor(spec_bytes) takes, for one replica of `built`. The
    code and init args stay serialized (serialized_callable, serialized_init_args) until the
    replica loads them: unpickling a class here would give this process's class the pickled
    copy's methods (cloudpickle reuses a class it knows when it unpickles it)."""
    options = built.spec["options"]
    return _pickle.dumps({
        "app_name": built.spec["app_name"],
        "deployment_name": built.spec["name"],
        "replica_id": replica_id,
        "serialized_callable": built.serialized_callable,
        "serialized_init_args": built.serialized_init_args,
        "user_config": options["user_config"],
        "max_ongoing_requests": options["max_ongoing_requests"],
        "graceful_shutdown_wait_loop_s": options["graceful_shutdown_wait_loop_s"],
        "ingress": built.spec["ingress"],
        "make_handle": make_handle,
    })


# ---------------------------------------------------------------------------------------------
# Import paths.


def import_attr(import_path: str) -> Any:
    """`module:attr` (attr may be dotted) or `module.attr`."""
    if not isinstance(import_path, str) or not import_path:
        raise TypeError(f"An import path must be a non-empty str, got {import_path!r}")
    if ":" in import_path:
        module_name, attr = import_path.split(":", 1)
    else:
        module_name, _, attr = import_path.rpartition(".")
        if not module_name:
            raise ValueError(f'Got invalid import path "{import_path}". An import path must '
                             "contain at least one dot or colon separating the module (and "
                             'potentially submodules) from the deployment graph. E.g.: '
                             '"module.deployment_graph".')
    value = importlib.import_module(module_name)
    for part in attr.split("."):
        value = getattr(value, part)
    return value


def build_from_builder(builder: Any, args: Dict[str, Any]) -> Application:
    """`builder` itself when it is an Application (then args must be empty), else the
    Application the builder function returns for `args`."""
    if isinstance(builder, Application):
        if args:
            raise ValueError("Arguments can only be passed to an application builder function, "
                             "not an already built application.")
        return builder
    if inspect.isfunction(builder):
        if len(inspect.signature(builder).parameters) > 1:
            raise TypeError("Application builder functions should take exactly one parameter, "
                            "a dictionary containing the passed arguments.")
        app = builder(args)
        if not isinstance(app, Application):
            raise TypeError("Application builder functions must return an `Application` "
                            f"returned `from `Deployment.bind()`, but got: {type(app)}.")
        return app
    raise TypeError("Expected a built Serve application or an application builder function but "
                    f"got: {type(builder)}.")


def load_application(import_path: str, args: Optional[Dict[str, Any]] = None) -> Application:
    """The Application an import path names (directly, or through a builder given `args`)."""
    return build_from_builder(import_attr(import_path), dict(args or {}))


__all__ = [
    "BuiltApplication", "BuiltDeployment", "HandlePlaceholder", "build_application",
    "build_from_builder", "import_attr", "load_application", "replica_spec",
    "validate_route_prefix",
]

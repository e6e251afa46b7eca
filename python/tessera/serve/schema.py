"""The Serve config file (`serve deploy` / `serve run config.yaml`), with Ray Serve's schema
names, defaults and checks (`ray.serve.schema`):

  ServeDeploySchema       proxy_location (EveryNode), http_options, grpc_options,
                          logging_config, target_capacity (0..100), applications (required;
                          unique names, unique non-null route prefixes, no empty name)
  ServeApplicationSchema  name ("default"), route_prefix ("/"), import_path (required,
                          `module:attr` or `module.attr`), runtime_env ({}; working_dir and
                          py_modules only as remote URIs), args ({}), logging_config,
                          external_scaler_enabled (false), deployments ([])
  DeploymentSchema        name (required) and any deployment option but `version` (the
                          options of @serve.deployment, checked by the same code); those not
                          given stay unset, so the code's settings apply
  HTTPOptionsSchema       HTTPOptions' fields, host defaulting to 0.0.0.0
  gRPCOptionsSchema       gRPCOptions' fields
  LoggingConfig           as in tessera.serve.config

Whether each `deployments[]` entry names a deployment of the code is checked when the config is
applied (build.build_application(..., deployment_overrides=app.deployments)). As Ray's, the
top-level schema and the HTTP/gRPC options ignore fields they do not know (a newer config works
with an older Serve); applications and deployments refuse them, so a misspelled option is an
error rather than silently the code's value.

`parse_config(obj)` takes the file's dict (the multi-application form, or a single
application's); `load_config_file(path)` reads YAML (PyYAML) or, without PyYAML, JSON.

Threading: plain values. Cost: the checks.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from tessera.serve import _options
from tessera.serve._constants import SERVE_DEFAULT_APP_NAME
from tessera.serve._model import (REQUIRED, Field, Model, check_bool, check_dict, check_enum,
                                  check_float, check_int, check_model, check_str)
from tessera.serve.config import (EncodingType, HTTPFields, LoggingConfig, ProxyLocation,
                                  gRPCOptions)


class _Unset:
    def __repr__(self) -> str:
        return "DEFAULT.VALUE"


UNSET: Any = _Unset()

# Schemes of remote URIs a runtime_env in a config file may name.
_REMOTE_SCHEMES = ("gcs", "s3", "gs", "https", "http", "file", "azure", "abfss")


def _check_remote_uris(runtime_env: Optional[dict]) -> None:
    if not runtime_env:
        return
    uris = list(runtime_env.get("py_modules") or [])
    if runtime_env.get("working_dir") is not None:
        uris.append(runtime_env["working_dir"])
    for uri in uris:
        scheme, separator, _ = str(uri).partition("://")
        if not separator or scheme not in _REMOTE_SCHEMES:
            raise ValueError(
                "runtime_envs in the Serve config support only remote URIs in working_dir and "
                f"py_modules. Got error when parsing URI: {uri} is not a valid URI. Passing "
                "directories or modules to be dynamically uploaded is only supported at the "
                "job level (i.e., passed to `tessera.init`).")


def _runtime_env(name: str, value: Any) -> dict:
    value = check_dict()(name, value)
    _check_remote_uris(value)
    return value


class DeploymentSchema(Model):
    """One deployment's options in an application's config, over those its code sets."""

    name = Field(REQUIRED, check=check_str())
    # Every deployment option but the deprecated version, unset unless given; _check checks
    # them with the code's option checks.
    _table_fields = {option: Field(UNSET) for option in _options.OPTIONS if option != "version"}

    def _check(self) -> None:
        if not self.name:
            raise ValueError("name: a deployment's name must be a non-empty string")
        given = self.options()
        if "user_config" in given and not isinstance(given["user_config"], (dict, type(None))):
            raise TypeError("user_config: value is not a valid dict, got "
                            f"{given['user_config']!r}")
        if isinstance(given.get("ray_actor_options"), dict):
            _check_remote_uris(given["ray_actor_options"].get("runtime_env"))
        object.__setattr__(self, "_layer", _options.check_layer(given))
        if (self._layer.get("max_replicas_per_node") is not None
                and self._layer.get("placement_group_bundles") is not None):
            raise ValueError("Setting max_replicas_per_node is not allowed when "
                             "placement_group_bundles is provided.")

    def options(self) -> Dict[str, Any]:
        """The options this entry sets, as given."""
        return {key: getattr(self, key) for key in self._fields
                if key != "name" and getattr(self, key) is not UNSET}

    def layer(self) -> Dict[str, Any]:
        """The options this entry sets, checked and normalized (an options layer)."""
        return dict(self._layer)

    def is_autoscaling_configured(self) -> bool:
        layer = self._layer
        return layer.get("num_replicas") == "auto" or layer.get("autoscaling_config") is not None


def _route_prefix_format(name: str, value: Any) -> Optional[str]:
    if value is None:
        return None
    value = check_str()(name, value)
    if not value.startswith("/"):
        raise ValueError(f'Got "{value}" for route_prefix. Route prefix must start with "/".')
    if len(value) > 1 and value.endswith("/"):
        raise ValueError(f'Got "{value}" for route_prefix. Route prefix cannot end with "/" '
                         'unless the entire prefix is just "/".')
    if "{" in value or "}" in value:
        raise ValueError(f'Got "{value}" for route_prefix. Route prefix cannot contain '
                         'wildcards, so it cannot contain "{" or "}".')
    return value


def _import_path_format(name: str, value: Any) -> str:
    value = check_str()(name, value)
    invalid = f'Got invalid import path "{value}". An import path '
    if ":" in value:
        if value.count(":") > 1:
            raise ValueError(invalid + "may have at most one colon.")
        if value.startswith(":") or value.endswith(":"):
            raise ValueError(invalid + "may not start or end with a colon.")
        return value
    if "." not in value:
        raise ValueError(invalid + "must contain at least one dot or colon separating the "
                         "module (and potentially submodules) from the deployment graph. E.g.: "
                         '"module.deployment_graph".')
    if value.startswith(".") or value.endswith("."):
        raise ValueError(invalid + "may not start or end with a dot.")
    return value


def _deployments(name: str, value: Any) -> List[DeploymentSchema]:
    if not isinstance(value, list):
        raise TypeError(f"{name}: value is not a valid list, got {value!r}")
    entries = [check_model(DeploymentSchema)(name, entry) for entry in value]
    names = [entry.name for entry in entries]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"Found multiple configs for deployment {', '.join(duplicates)} in "
                         "one application. Please remove all duplicates.")
    return entries


class ServeApplicationSchema(Model):
    """One application: where its code is (import_path), how it is served, and overrides of
    its deployments' options."""

    name = Field(SERVE_DEFAULT_APP_NAME, check=check_str())
    route_prefix = Field("/", check=_route_prefix_format)
    import_path = Field(REQUIRED, check=_import_path_format)
    runtime_env = Field(factory=dict, check=_runtime_env)
    args = Field(factory=dict, check=check_dict())
    logging_config = Field(None, check=check_model(LoggingConfig, optional=True))
    external_scaler_enabled = Field(False, check=check_bool)
    deployments = Field(factory=list, check=_deployments)

    def _check(self) -> None:
        if not self.external_scaler_enabled:
            return
        scaled = [d.name for d in self.deployments if d.is_autoscaling_configured()]
        if scaled:
            names = ", ".join(f'"{name}"' for name in scaled)
            raise ValueError(
                "external_scaler_enabled is set to True, but the following deployment(s) have "
                f"autoscaling configured: {names}. When using an external autoscaler, Serve's "
                "built-in autoscaling must be disabled for all deployments in the application.")

    @property
    def deployment_names(self) -> List[str]:
        return [d.name for d in self.deployments]


class HTTPOptionsSchema(HTTPFields):
    """The config file's HTTP options: host defaults to 0.0.0.0 (public)."""

    _ignore_extra = True
    host = Field("0.0.0.0", check=check_str())
    port = Field(8000, check=check_int(0, maximum=65535))


class gRPCOptionsSchema(gRPCOptions):  # noqa: N801 - Ray's name
    """The config file's gRPC options."""

    _ignore_extra = True


def _quoted_duplicates(values: List[Any]) -> List[str]:
    return sorted({f'"{v}"' for v in values if values.count(v) > 1})


def _applications(name: str, value: Any) -> List[ServeApplicationSchema]:
    if not isinstance(value, list):
        raise TypeError(f"{name}: value is not a valid list, got {value!r}")
    apps = [check_model(ServeApplicationSchema)(name, entry) for entry in value]
    duplicates = _quoted_duplicates([app.name for app in apps])
    if duplicates:
        what = "application " if len(duplicates) == 1 else "applications "
        raise ValueError(f"Found multiple configs for {what}{', '.join(duplicates)}. Please "
                         "remove all duplicates.")
    routes = _quoted_duplicates([app.route_prefix for app in apps if app.route_prefix is not None])
    if routes:
        what = "route prefix " if len(routes) == 1 else "route prefixes "
        raise ValueError(f"Found duplicate applications for {what}{', '.join(routes)}. Please "
                         "ensure each application's route_prefix is unique.")
    if any(not app.name for app in apps):
        raise ValueError("Application names must be nonempty.")
    return apps


class ServeDeploySchema(Model):
    """A cluster's Serve config: its proxies and its applications."""

    _ignore_extra = True
    proxy_location = Field(ProxyLocation.EveryNode, check=check_enum(ProxyLocation))
    http_options = Field(factory=HTTPOptionsSchema, check=check_model(HTTPOptionsSchema))
    grpc_options = Field(factory=gRPCOptionsSchema, check=check_model(gRPCOptionsSchema))
    logging_config = Field(None, check=check_model(LoggingConfig, optional=True))
    applications = Field(REQUIRED, check=_applications)
    target_capacity = Field(None, check=check_float(0, maximum=100, optional=True))


def parse_config(obj: Any) -> ServeDeploySchema:
    """A config file's content: the multi-application form ({"applications": [...], ...}), or
    one application's ({"import_path": ..., ...}; its host and port go to http_options)."""
    if not isinstance(obj, dict):
        raise TypeError(f"A Serve config must be a mapping, got {type(obj).__name__}")
    if "applications" in obj or "import_path" not in obj:
        return ServeDeploySchema(**obj)
    app = dict(obj)
    http = {key: app.pop(key) for key in ("host", "port") if key in app}
    return ServeDeploySchema(applications=[app], http_options=http)


def load_config_file(path: str) -> ServeDeploySchema:
    """Reads and checks a config file: YAML when PyYAML is installed, else JSON."""
    with open(path, "r", encoding="utf-8") as file:
        text = file.read()
    try:
        import yaml
    except ImportError:
        return parse_config(json.loads(text))
    return parse_config(yaml.safe_load(text))


__all__ = [
    "DeploymentSchema", "EncodingType", "HTTPOptionsSchema", "LoggingConfig",
    "ServeApplicationSchema", "ServeDeploySchema", "gRPCOptionsSchema", "load_config_file",
    "parse_config",
]

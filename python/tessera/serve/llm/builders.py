"""Serve LLM's application builders (Ray's `ray.serve.llm.build_llm_deployment` and
`build_openai_app`) and their arguments.

    app = build_openai_app({"llm_configs": [config_or_dict_or_yaml_path, ...]})
    serve.run(app)                  # OpenAI routes at /v1/..., one LLMServer deployment per model

`build_llm_deployment(llm_config)`: an LLMServer Application; its deployment is named
`<name_prefix><model id with "/" as "--" and "." as "_">` (name_prefix "LLMServer:", the class's
name, by default), bound with llm_config= and `bind_kwargs`. Its options are the class's
get_deployment_options (the config's deployment_config and placement), then
`override_serve_options` over them, all merged over Serve LLM's defaults (max_ongoing_requests
1e9, health checks every 10 s with a 10 s timeout, autoscaling_config target_ongoing_requests
1e9; no autoscaling default when num_replicas is set). Dict options merge key by key. A TPU
config with a topology gives each replica a slice of its own (config.replica_slice), which the
serve controller reserves when it starts the replica: not a Serve option, but the deployment's
(Deployment._with_replica_slice), so a config file's options over it keep it.

`build_openai_app(args)`: `args` is an LLMServingArgs or its dict form (a config file's `args`):
`llm_configs` (LLMConfig objects, dicts, or YAML file paths; at least one; unique model ids),
`ingress_cls_config` ({"ingress_cls": a class or "module:Class" (default OpenAiIngress),
"ingress_extra_kwargs": {...}}), `ingress_deployment_config` (Serve options of the ingress,
over its defaults: max_ongoing_requests 1e9, autoscaling target 1e9, min_replicas 0 when every
model has min_replicas 0). The ingress deployment (named after the class) is bound with
llm_deployments={model id: LLMServer app} and the extra kwargs.

Threading: pure functions (on the driver). Cost: a few dict copies per model.
"""

from __future__ import annotations

import copy
import os
from typing import Any, Dict, List, Mapping, Optional, Union

from tessera import serve
from tessera.serve.build import import_attr
from tessera.serve.deployment import Application
from tessera.serve.llm import _constants
from tessera.serve.llm.config import LLMConfig, replica_slice

LLMConfigLike = Union[LLMConfig, Mapping[str, Any], str]


def deployment_name(llm_config: LLMConfig) -> str:
    """The deployment name of a model id: "/" becomes "--" and "." becomes "_"."""
    return llm_config.model_id.replace("/", "--").replace(".", "_")


def _deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> Dict[str, Any]:
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def apply_llm_deployment_defaults(defaults: Mapping[str, Any],
                                  options: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """`options` over `defaults`, dicts merged key by key; a default autoscaling_config is
    dropped when `options` set num_replicas (Serve refuses both)."""
    options = dict(options or {})
    defaults = dict(defaults)
    if "num_replicas" in options:
        defaults.pop("autoscaling_config", None)
    return _deep_merge(defaults, options)


def build_llm_deployment(llm_config: LLMConfigLike, *, name_prefix: Optional[str] = None,
                         bind_kwargs: Optional[Dict[str, Any]] = None,
                         override_serve_options: Optional[Dict[str, Any]] = None,
                         deployment_cls: Optional[type] = None) -> Application:
    """The Application of one model's LLMServer deployment (see the module doc)."""
    from tessera.serve.llm.server import LLMServer

    config = _parse_llm_config(llm_config)
    deployment_cls = deployment_cls or LLMServer
    name_prefix = name_prefix or f"{deployment_cls.__name__}:"
    options = deployment_cls.get_deployment_options(config)
    options["name"] = name_prefix + options.pop("name", deployment_name(config))
    options.update(override_serve_options or {})
    options = apply_llm_deployment_defaults(_constants.llm_deployment_defaults(), options)
    deployment = serve.deployment(deployment_cls, **options)
    # A TPU model with a topology: each replica takes a slice, which the controller reserves.
    deployment = deployment._with_replica_slice(replica_slice(config))
    return deployment.bind(llm_config=config, **(bind_kwargs or {}))


def _parse_llm_config(value: LLMConfigLike) -> LLMConfig:
    if isinstance(value, str):
        if not os.path.exists(value):
            raise ValueError(f"Could not load model config from {value}, as the file does not "
                             "exist.")
        return LLMConfig.from_file(value)
    if isinstance(value, (LLMConfig, Mapping)):
        return LLMConfig.parse(value)
    raise TypeError(f"Invalid LLMConfig type: {type(value)}")


class IngressClsConfig:
    """Which ingress class serves the OpenAI routes, and the extra kwargs it is bound with."""

    def __init__(self, ingress_cls: Union[type, str, None] = None,
                 ingress_extra_kwargs: Optional[Dict[str, Any]] = None) -> None:
        from tessera.serve.llm.ingress import OpenAiIngress

        if ingress_cls is None:
            ingress_cls = OpenAiIngress
        elif isinstance(ingress_cls, str):
            ingress_cls = import_attr(ingress_cls)
        if not isinstance(ingress_cls, type):
            raise TypeError(f"ingress_cls must be a class or its import path, got "
                            f"{ingress_cls!r}")
        if not isinstance(ingress_extra_kwargs or {}, dict):
            raise TypeError(f"ingress_extra_kwargs must be a dict, got "
                            f"{type(ingress_extra_kwargs).__name__}")
        self.ingress_cls = ingress_cls
        self.ingress_extra_kwargs: Dict[str, Any] = dict(ingress_extra_kwargs or {})

    @classmethod
    def parse(cls, value: Any) -> "IngressClsConfig":
        if isinstance(value, cls):
            return value
        if value is None:
            return cls()
        if not isinstance(value, Mapping):
            raise TypeError(f"ingress_cls_config must be a dict or an IngressClsConfig, got "
                            f"{type(value).__name__}")
        unknown = sorted(set(value) - {"ingress_cls", "ingress_extra_kwargs"})
        if unknown:
            raise ValueError(f"ingress_cls_config got unknown field(s): {', '.join(unknown)}")
        return cls(**value)


class LLMServingArgs:
    """The arguments of build_openai_app (see the module doc); checked on construction."""

    def __init__(self, llm_configs: List[LLMConfigLike],
                 ingress_cls_config: Union[IngressClsConfig, Mapping[str, Any], None] = None,
                 ingress_deployment_config: Optional[Dict[str, Any]] = None) -> None:
        if not isinstance(llm_configs, (list, tuple)):
            raise TypeError(f"llm_configs must be a list, got {type(llm_configs).__name__}")
        self.llm_configs: List[LLMConfig] = [_parse_llm_config(c) for c in llm_configs]
        if not self.llm_configs:
            raise ValueError("List of models is empty. Maybe some parameters cannot be parsed "
                             "into the LLMConfig config.")
        if len({c.model_id for c in self.llm_configs}) != len(self.llm_configs):
            raise ValueError("Duplicate models found. Make sure model ids are unique.")
        self.ingress_cls_config = IngressClsConfig.parse(ingress_cls_config)
        if not isinstance(ingress_deployment_config or {}, dict):
            raise TypeError(f"ingress_deployment_config must be a dict, got "
                            f"{type(ingress_deployment_config).__name__}")
        self.ingress_deployment_config: Dict[str, Any] = dict(ingress_deployment_config or {})

    @classmethod
    def parse(cls, value: Any) -> "LLMServingArgs":
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise TypeError(f"build_openai_app takes an LLMServingArgs or its dict form, got "
                            f"{type(value).__name__}")
        unknown = sorted(set(value) - {"llm_configs", "ingress_cls_config",
                                       "ingress_deployment_config"})
        if unknown:
            raise ValueError(f"LLMServingArgs got unknown field(s): {', '.join(unknown)}")
        if "llm_configs" not in value:
            raise ValueError("LLMServingArgs.llm_configs is required")
        return cls(**value)


def build_openai_app(llm_serving_args: Union[LLMServingArgs, Mapping[str, Any]]
                     ) -> Application:
    """The OpenAI-compatible application over one LLMServer deployment per model (see the
    module doc)."""
    from tessera.serve.llm.ingress import make_fastapi_ingress

    args = LLMServingArgs.parse(llm_serving_args)
    llm_deployments = {c.model_id: build_llm_deployment(c) for c in args.llm_configs}
    ingress = args.ingress_cls_config
    defaults = ingress.ingress_cls.get_deployment_options(args.llm_configs)
    options = apply_llm_deployment_defaults(defaults, args.ingress_deployment_config)
    ingress_cls = make_fastapi_ingress(ingress.ingress_cls)
    return serve.deployment(ingress_cls, **options).bind(llm_deployments=llm_deployments,
                                                        **ingress.ingress_extra_kwargs)


__all__ = ["IngressClsConfig", "LLMServingArgs", "apply_llm_deployment_defaults",
           "build_llm_deployment", "build_openai_app", "deployment_name"]

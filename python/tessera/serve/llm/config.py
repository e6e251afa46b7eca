"""`LLMConfig`, Serve LLM's description of one served model (Ray's `ray.serve.llm.LLMConfig`),
its checks, which engine runs it, and the placement bundles of its replicas.

    config = LLMConfig(model_loading_config={"model_id": "tiny", "model_source": "/models/tiny"},
                       engine_kwargs={"max_num_seqs": 16})
    config.engine()                    # "tessera" here: vLLM is not importable
    placement_bundles(config)          # ([{"CPU": 1.0}], "PACK")

Which engine: `llm_engine` is "vLLM" (Ray's default) or "tessera" (the built-in CPU engine,
tessera.serve.llm.engine). "tessera" always runs the built-in one. "vLLM" runs vLLM when the
`vllm` package is importable, and otherwise falls back to the built-in engine, which loads only
its own model directories (tiny_model.load_model): a config it cannot run fails when its replica
starts, not here (with llm_engine "tessera", here).

The built-in engine's layout (`builtin_stages`): without a TPU topology it runs inside the
replica, tensor and pipeline parallel size 1. With one, it runs one pipeline stage per host of
the replica's slice, each stage an engine worker actor over its host's chips (tensor parallel
within the host, one process): pipeline_parallel_size must be the slice's hosts and
tensor_parallel_size its chips per host (v6e 4x4: 4 x 4).

Placement (Serve LLM's rule): the replica actor's resources (`ray_actor_options`, CPU 1 by
default) are merged into bundle 0 of one bundle per engine worker (tensor x pipeline parallel
size), default `{GPU: 1, accelerator_type:<type>: 0.001}` (TPU without a topology: one chip per
bundle), strategy PACK (STRICT_PACK with data parallelism), or the bundles and strategy of
`placement_group_config`. A TPU `accelerator_config` with a topology takes a whole slice per
replica, for either engine: one bundle per host `{TPU: chips per host, accelerator_type:<type>:
0.001}` (placement_bundles). The serve controller reserves it when it starts the replica
(`replica_slice`: the shape; every host's bundle also gets the replica actor's resources, and
the replica actor sits in host 0's) and releases it when the replica stops.
`accelerator_config` may also say `sub_slice: True` (a Tessera extension): the replica then
takes a block of that topology inside a larger slice (a 2x4 half of a 4x4) instead of a whole
slice of its own.

Threading: plain values; any thread. Cost: O(fields).
"""

from __future__ import annotations

import copy
import importlib.util
import math
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

ENGINE_VLLM = "vLLM"
ENGINE_BUILTIN = "tessera"
LLM_ENGINES = (ENGINE_VLLM, ENGINE_BUILTIN)
PLACEMENT_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
# Serve options that would place the replica themselves: placement_group_config says it.
FORBIDDEN_DEPLOYMENT_OPTIONS = ("placement_group_bundles", "placement_group_strategy")
ACCELERATOR_RESOURCE_FRACTION = 0.001
# TPU generations (accelerators reference, 7.3): dimensions of a topology, and chips per host of
# a multi-host slice. v5litepod and v6e single-host slices have 1, 4 or 8 chips on one host.
TPU_GENERATIONS = {"v2": (2, 4), "v3": (2, 4), "v4": (3, 4), "v5p": (3, 4),
                   "v5litepod": (2, 4), "v6e": (2, 4), "v7x": (3, 4)}
SINGLE_HOST_MAX_CHIPS = {"v5litepod": 8, "v6e": 8}

Bundle = Dict[str, float]


class ModelLoadingConfig:
    """`model_id` (the name clients ask for) and `model_source` (where the weights are; the
    model id when omitted)."""

    def __init__(self, model_id: str, model_source: Optional[str] = None) -> None:
        if not isinstance(model_id, str) or not model_id:
            raise ValueError(f"model_loading_config.model_id must be a non-empty string, got "
                             f"{model_id!r}")
        if model_source is not None and (not isinstance(model_source, str) or not model_source):
            raise ValueError(f"model_loading_config.model_source must be a non-empty string, "
                             f"got {model_source!r}")
        self.model_id = model_id
        self.model_source = model_source if model_source is not None else model_id

    @classmethod
    def parse(cls, value: Union["ModelLoadingConfig", Mapping[str, Any]]) -> "ModelLoadingConfig":
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise ValueError(f"model_loading_config must be a dict, got {type(value).__name__}")
        unknown = sorted(set(value) - {"model_id", "model_source"})
        if unknown:
            raise ValueError(f"model_loading_config got unknown field(s): {', '.join(unknown)}")
        if "model_id" not in value:
            raise ValueError("model_loading_config.model_id is required")
        return cls(value["model_id"], value.get("model_source"))

    def to_dict(self) -> Dict[str, Any]:
        return {"model_id": self.model_id, "model_source": self.model_source}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ModelLoadingConfig) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"ModelLoadingConfig(model_id={self.model_id!r}, model_source={self.model_source!r})"


_DEFAULTS: Dict[str, Any] = {
    "llm_engine": ENGINE_VLLM, "engine_kwargs": {}, "accelerator_type": None,
    "accelerator_config": None, "placement_group_config": None, "deployment_config": {},
    "runtime_env": None, "log_engine_metrics": True, "lora_config": None,
    "experimental_configs": {},
}


class LLMConfig:
    """One served model (see the module's doc). Every field is checked on construction; a bad
    one raises ValueError naming it."""

    def __init__(self, model_loading_config: Union[ModelLoadingConfig, Mapping[str, Any]],
                 **fields: Any) -> None:
        unknown = sorted(set(fields) - set(_DEFAULTS))
        if unknown:
            raise ValueError(f"LLMConfig got unknown field(s): {', '.join(unknown)}")
        self.model_loading_config = ModelLoadingConfig.parse(model_loading_config)
        values = {name: copy.deepcopy(fields.get(name, default))
                  for name, default in _DEFAULTS.items()}
        self.llm_engine: str = values["llm_engine"]
        self.engine_kwargs: Dict[str, Any] = values["engine_kwargs"]
        self.accelerator_type: Optional[str] = values["accelerator_type"]
        self.accelerator_config: Optional[Dict[str, Any]] = values["accelerator_config"]
        self.placement_group_config: Optional[Dict[str, Any]] = values["placement_group_config"]
        self.deployment_config: Dict[str, Any] = values["deployment_config"]
        self.runtime_env: Optional[Dict[str, Any]] = values["runtime_env"]
        self.log_engine_metrics: bool = values["log_engine_metrics"]
        self.lora_config: Optional[Dict[str, Any]] = values["lora_config"]
        self.experimental_configs: Dict[str, Any] = values["experimental_configs"]
        self._check()

    @classmethod
    def parse(cls, value: Union["LLMConfig", Mapping[str, Any]]) -> "LLMConfig":
        """An LLMConfig from itself or from its dict form (a YAML file's contents)."""
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise ValueError(f"an LLM config must be an LLMConfig or a dict, got "
                             f"{type(value).__name__}")
        if "model_loading_config" not in value:
            raise ValueError("LLMConfig.model_loading_config is required")
        rest = {k: v for k, v in value.items() if k != "model_loading_config"}
        return cls(value["model_loading_config"], **rest)

    @classmethod
    def from_file(cls, path: str) -> "LLMConfig":
        """The LLMConfig of a YAML (or JSON) file holding its dict form."""
        import yaml

        try:
            with open(path, encoding="utf-8") as f:
                data = yaml.safe_load(f)
        except OSError as e:
            raise ValueError(f"Could not load model config from {path}: {e.strerror}") from None
        except yaml.YAMLError as e:
            raise ValueError(f"Could not load model config from {path}: {e}") from None
        return cls.parse(data)

    @property
    def model_id(self) -> str:
        return self.model_loading_config.model_id

    @property
    def model_source(self) -> str:
        return self.model_loading_config.model_source

    def parallel_sizes(self) -> Tuple[int, int, int]:
        """(tensor, pipeline, data) parallel sizes from engine_kwargs (1 when unset)."""
        return tuple(self.engine_kwargs.get(k, 1) for k in  # type: ignore[return-value]
                     ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"))

    def engine(self) -> str:
        """The engine that runs this model: "vLLM" or "tessera" (see the module's doc)."""
        if self.llm_engine == ENGINE_VLLM and vllm_available():
            return ENGINE_VLLM
        return ENGINE_BUILTIN

    def to_dict(self) -> Dict[str, Any]:
        out = {"model_loading_config": self.model_loading_config.to_dict()}
        out.update({name: copy.deepcopy(getattr(self, name)) for name in _DEFAULTS})
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LLMConfig) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"LLMConfig({self.to_dict()!r})"

    # ---- checks ------------------------------------------------------------------------------

    def _check(self) -> None:
        if self.llm_engine not in LLM_ENGINES:
            raise ValueError(f"llm_engine must be one of {', '.join(LLM_ENGINES)}, got "
                             f"{self.llm_engine!r}")
        for name in ("engine_kwargs", "deployment_config", "experimental_configs"):
            if not isinstance(getattr(self, name), dict):
                raise ValueError(f"{name} must be a dict, got {type(getattr(self, name)).__name__}")
        for name in ("runtime_env", "lora_config"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), dict):
                raise ValueError(f"{name} must be a dict or None, got "
                                 f"{type(getattr(self, name)).__name__}")
        if not isinstance(self.log_engine_metrics, bool):
            raise ValueError(f"log_engine_metrics must be a bool, got {self.log_engine_metrics!r}")
        self._check_parallel_sizes()
        self._check_accelerator()
        if self.llm_engine == ENGINE_BUILTIN:
            builtin_stages(self)  # raises on a layout the built-in engine cannot run
        self._check_placement()

    def _check_parallel_sizes(self) -> None:
        for key in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"):
            value = self.engine_kwargs.get(key, 1)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"engine_kwargs.{key} must be a positive int, got {value!r}")

    def _check_accelerator(self) -> None:
        if self.accelerator_type is not None and (
                not isinstance(self.accelerator_type, str)
                or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", self.accelerator_type)):
            raise ValueError(f"accelerator_type must be a name such as 'H100' or 'TPU-V6E', got "
                             f"{self.accelerator_type!r}")
        if self.accelerator_config is None:
            return
        config = self.accelerator_config
        if not isinstance(config, dict) or config.get("kind") != "tpu":
            raise ValueError(f"accelerator_config must be {{'kind': 'tpu', 'topology': ...}}, "
                             f"got {config!r}")
        unknown = sorted(set(config) - {"kind", "topology", "chips_per_host", "sub_slice"})
        if unknown:
            raise ValueError(f"accelerator_config got unknown field(s): {', '.join(unknown)}")
        if not (self.accelerator_type or "").upper().startswith("TPU-"):
            raise ValueError(f"accelerator_config of kind 'tpu' needs a TPU accelerator_type "
                             f"such as 'TPU-V6E', got {self.accelerator_type!r}")
        if not isinstance(config.get("sub_slice", False), bool):
            raise ValueError(f"accelerator_config.sub_slice must be a bool, got "
                             f"{config['sub_slice']!r}")
        if config.get("sub_slice") and config.get("topology") is None:
            raise ValueError("accelerator_config.sub_slice needs a topology")
        if config.get("topology") is not None:
            tpu_slice_shape(self)  # raises on a bad topology or parallelism

    def _check_placement(self) -> None:
        forbidden = [k for k in FORBIDDEN_DEPLOYMENT_OPTIONS if k in self.deployment_config]
        if forbidden:
            raise ValueError(f"deployment_config must not set {', '.join(forbidden)}: "
                             "use placement_group_config")
        config = self.placement_group_config
        if config is None:
            return
        if not isinstance(config, dict) or set(config) - {"bundles", "strategy"}:
            raise ValueError(f"placement_group_config must be a dict of bundles and strategy, "
                             f"got {config!r}")
        bundles = config.get("bundles")
        if not isinstance(bundles, list) or not bundles or not all(
                isinstance(b, dict) and all(isinstance(k, str) and _is_amount(v)
                                            for k, v in b.items()) for b in bundles):
            raise ValueError(f"placement_group_config.bundles must be a non-empty list of "
                             f"{{resource: amount}} dicts, got {bundles!r}")
        if config.get("strategy", "PACK") not in PLACEMENT_STRATEGIES:
            raise ValueError(f"placement_group_config.strategy must be one of "
                             f"{', '.join(PLACEMENT_STRATEGIES)}, got {config.get('strategy')!r}")


def _is_amount(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


def vllm_available() -> bool:
    """Whether the vllm package can be imported here (without importing it)."""
    return importlib.util.find_spec("vllm") is not None


def tpu_generation(accelerator_type: str) -> str:
    """"TPU-V6E" -> "v6e" ("TPU-V5LITEPOD" -> "v5litepod")."""
    generation = accelerator_type.lower()
    generation = generation[4:] if generation.startswith("tpu-") else generation
    if generation not in TPU_GENERATIONS:
        raise ValueError(f"unknown TPU accelerator_type {accelerator_type!r} (known: "
                         f"{', '.join('TPU-' + g.upper() for g in TPU_GENERATIONS)})")
    return generation


def tpu_slice_shape(llm_config: LLMConfig) -> Optional[Tuple[str, str, int, int]]:
    """(generation, topology, hosts, chips per host) of the TPU slice a config takes, or None
    when it names no topology. The engine's workers (tensor x pipeline parallel size) must use
    every chip of the slice."""
    config = llm_config.accelerator_config
    if not config or config.get("topology") is None:
        return None
    generation = tpu_generation(llm_config.accelerator_type or "")
    topology = str(config["topology"]).lower()
    dims, multi_host_chips = TPU_GENERATIONS[generation]
    if not re.fullmatch(r"[1-9][0-9]*(x[1-9][0-9]*){%d}" % (dims - 1), topology):
        raise ValueError(f"accelerator_config.topology {config['topology']!r} is not a {dims}-D "
                         f"{generation} topology such as {'4x4' if dims == 2 else '2x2x2'}")
    chips = math.prod(int(d) for d in topology.split("x"))
    per_host = config.get("chips_per_host")
    if per_host is None:
        single_host = SINGLE_HOST_MAX_CHIPS.get(generation, multi_host_chips)
        per_host = chips if chips <= single_host else multi_host_chips
    if not isinstance(per_host, int) or per_host < 1 or chips % per_host:
        raise ValueError(f"accelerator_config.chips_per_host must divide the {chips} chips of "
                         f"{topology}, got {per_host!r}")
    tp, pp, _ = llm_config.parallel_sizes()
    if tp * pp != chips:
        raise ValueError(f"tensor_parallel_size x pipeline_parallel_size ({tp} x {pp}) must "
                         f"equal the {chips} chips of a {generation} {topology} slice")
    return generation, topology, chips // per_host, per_host


def builtin_stages(llm_config: LLMConfig) -> Tuple[int, int]:
    """(pipeline stages, TPU chips per stage) of the built-in engine for this config: (1, 0)
    without a TPU topology (the engine runs in the replica), else one stage per host of the
    slice over that host's chips. ValueError for parallel sizes it cannot run."""
    tp, pp, dp = llm_config.parallel_sizes()
    if dp != 1:
        raise ValueError(f"the built-in engine runs one engine per replica: "
                         f"data_parallel_size must be 1, got {dp} (use llm_engine='vLLM')")
    shape = tpu_slice_shape(llm_config)
    if shape is None:
        if (tp, pp) != (1, 1):
            raise ValueError(f"the built-in engine runs in the replica without a TPU slice: "
                             f"tensor_parallel_size and pipeline_parallel_size must be 1, got "
                             f"{tp} and {pp} (give accelerator_config a topology, or use "
                             "llm_engine='vLLM')")
        return 1, 0
    generation, topology, hosts, per_host = shape
    if (tp, pp) != (per_host, hosts):
        raise ValueError(f"the built-in engine runs one pipeline stage per host of its slice, "
                         f"tensor parallel over the host's chips: a {generation} {topology} "
                         f"slice of {hosts} hosts x {per_host} chips needs "
                         f"pipeline_parallel_size {hosts} and tensor_parallel_size {per_host}, "
                         f"got {pp} and {tp}")
    return hosts, per_host


def replica_slice(llm_config: LLMConfig) -> Optional[Dict[str, Any]]:
    """The TPU slice each replica of this config takes (see the module's doc), as its deployment
    carries it (Deployment._with_replica_slice): {"accelerator_type", "topology", "sub_slice"};
    None without a topology. Every host's bundle gets the replica actor's resources besides its
    chips, as the deployment's options say them when it is deployed."""
    if tpu_slice_shape(llm_config) is None:
        return None
    config = llm_config.accelerator_config or {}
    return {"accelerator_type": llm_config.accelerator_type.upper(),
            "topology": str(config["topology"]).lower(),
            "sub_slice": bool(config.get("sub_slice", False))}


def replica_actor_resources(llm_config: LLMConfig) -> Bundle:
    """The replica actor's own resources: ray_actor_options' num_cpus (1), num_gpus, memory and
    resources, zero amounts left out."""
    options = llm_config.deployment_config.get("ray_actor_options") or {}
    resources: Bundle = {"CPU": float(options.get("num_cpus", 1)),
                         "GPU": float(options.get("num_gpus", 0))}
    if options.get("memory"):
        resources["memory"] = float(options["memory"])
    resources.update({k: float(v) for k, v in (options.get("resources") or {}).items()})
    return {k: v for k, v in resources.items() if v}


def placement_bundles(llm_config: LLMConfig, engine: Optional[str] = None
                      ) -> Tuple[List[Bundle], str]:
    """(bundles, strategy) of one replica's placement group (see the module's doc), for
    `engine` ("vLLM" or "tessera"; None: llm_config.engine())."""
    engine = engine or llm_config.engine()
    if engine not in LLM_ENGINES:
        raise ValueError(f"engine must be one of {', '.join(LLM_ENGINES)}, got {engine!r}")
    replica = replica_actor_resources(llm_config)
    shape = tpu_slice_shape(llm_config)
    if engine == ENGINE_BUILTIN and shape is None:
        return [replica], "PACK"
    if shape is not None:
        _, _, hosts, per_host = shape
        host: Bundle = {"TPU": float(per_host),
                        _accelerator_key(llm_config): ACCELERATOR_RESOURCE_FRACTION}
        return [dict(host) for _ in range(hosts)], "SPREAD"
    tp, pp, dp = llm_config.parallel_sizes()
    custom = llm_config.placement_group_config
    if custom is not None:
        workers = [{k: float(v) for k, v in b.items()} for b in custom["bundles"]]
        strategy = custom.get("strategy", "PACK")
    else:
        workers = [_worker_bundle(llm_config) for _ in range(tp * pp)]
        strategy = "STRICT_PACK" if dp > 1 else "PACK"
    first = dict(workers[0])
    for key, amount in replica.items():
        first[key] = first.get(key, 0.0) + amount
    return [first] + workers[1:], strategy


def _worker_bundle(llm_config: LLMConfig) -> Bundle:
    accelerator = llm_config.accelerator_type
    device = "TPU" if accelerator and accelerator.upper().startswith("TPU-") else "GPU"
    bundle: Bundle = {device: 1.0}
    if accelerator:
        bundle[_accelerator_key(llm_config)] = ACCELERATOR_RESOURCE_FRACTION
    return bundle


def _accelerator_key(llm_config: LLMConfig) -> str:
    return f"accelerator_type:{llm_config.accelerator_type}"

"""Serve LLM, named as Ray's `ray.serve.llm`: OpenAI-compatible serving of language models.

- `LLMConfig`, `ModelLoadingConfig` (config.py): one served model, its engine and placement.
- The built-in engine (engine.py, async_engine.py): continuous batching over a paged KV cache
  on the CPU, used when vLLM is not importable or `llm_engine="tessera"`; on a TPU slice split
  into pipeline stages, one engine worker per host (pipeline.py); its demo model is made by
  `python3 -m tessera.serve.llm.make_demo_model OUT_DIR`.
- openai_protocol.py: the OpenAI request checks and response shapes.
- `LLMServer` (server.py): the deployment class serving one model; `OpenAiIngress`
  (ingress.py): the OpenAI routes over LLMServer deployments; `build_llm_deployment` and
  `build_openai_app` (builders.py) make their applications, from `LLMServingArgs`.

    app = build_openai_app({"llm_configs": [{"model_loading_config": {
        "model_id": "demo", "model_source": "tessera-demo"}}]})

Importing this package imports neither torch nor FastAPI: the other names load on first use.
"""

from typing import Any

from tessera.serve.llm.config import LLMConfig, ModelLoadingConfig, placement_bundles

# Names whose modules import torch or FastAPI, loaded when first asked for.
_LAZY = {
    "LLMEngine": "tessera.serve.llm.engine",
    "EngineConfig": "tessera.serve.llm.engine",
    "AsyncLLMEngine": "tessera.serve.llm.async_engine",
    "SamplingParams": "tessera.serve.llm.sampling",
    "RequestOutput": "tessera.serve.llm.request",
    "LLMServer": "tessera.serve.llm.server",
    "OpenAiIngress": "tessera.serve.llm.ingress",
    "make_fastapi_ingress": "tessera.serve.llm.ingress",
    "build_llm_deployment": "tessera.serve.llm.builders",
    "build_openai_app": "tessera.serve.llm.builders",
    "LLMServingArgs": "tessera.serve.llm.builders",
    "IngressClsConfig": "tessera.serve.llm.builders",
}

__all__ = ["LLMConfig", "ModelLoadingConfig", "placement_bundles", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tessera.serve.llm' has no attribute {name!r}")

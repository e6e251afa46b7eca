"""Serve LLM's defaults and the environment variables that change them, with Ray Serve LLM's
names and values (`ray/llm/_internal/serve/constants.py`).

Each is read when asked for (not at import), so a replica reads the environment it starts in.

Threading: reads os.environ; any thread. Cost: one lookup.
"""

from __future__ import annotations

import os

# The demo model's name as a model_source: LLMServer trains it once per machine (cached).
DEMO_MODEL_SOURCE = "tessera-demo"


def _number(name: str, default: float, kind: type) -> float:
    value = os.environ.get(name)
    if value is None or value == "":
        return kind(default)
    try:
        return kind(float(value)) if kind is int else kind(value)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {value!r}") from None


def default_max_ongoing_requests() -> int:
    """max_ongoing_requests of LLM and ingress replicas: no cap (the engine queues)."""
    return _number("RAY_SERVE_LLM_DEFAULT_MAX_ONGOING_REQUESTS", int(1e9), int)


def default_target_ongoing_requests() -> int:
    return _number("RAY_SERVE_LLM_DEFAULT_MAX_TARGET_ONGOING_REQUESTS", int(1e9), int)


def default_health_check_period_s() -> int:
    return _number("RAY_SERVE_LLM_DEFAULT_HEALTH_CHECK_PERIOD_S", 10, int)


def default_health_check_timeout_s() -> int:
    return _number("RAY_SERVE_LLM_DEFAULT_HEALTH_CHECK_TIMEOUT_S", 10, int)


def router_http_timeout_s() -> float:
    """How long the ingress waits for a model's first response item (408 after it)."""
    return _number("RAY_SERVE_LLM_ROUTER_HTTP_TIMEOUT", 600, float)


def model_response_batch_timeout_ms() -> float:
    """Stream batching: events gathered this long go out as one item (0: each alone)."""
    return _number("RAYLLM_MODEL_RESPONSE_BATCH_TIMEOUT_MS", 50, float)


def llm_deployment_defaults() -> dict:
    """Options every LLMServer deployment gets under the user's (Ray's
    DEFAULT_DEPLOYMENT_OPTIONS)."""
    return {"max_ongoing_requests": default_max_ongoing_requests(),
            "health_check_period_s": default_health_check_period_s(),
            "health_check_timeout_s": default_health_check_timeout_s(),
            "autoscaling_config": {"target_ongoing_requests": default_target_ongoing_requests()}}


def ingress_deployment_defaults() -> dict:
    """Options the OpenAI ingress deployment gets under the user's (Ray's
    DEFAULT_INGRESS_OPTIONS)."""
    return {"max_ongoing_requests": default_max_ongoing_requests(),
            "autoscaling_config": {"target_ongoing_requests": default_target_ongoing_requests()}}

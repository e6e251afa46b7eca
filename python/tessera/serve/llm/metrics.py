"""The built-in engine's metrics, named as vLLM names them (what Serve LLM exports): plain Python
counters, gauges and histograms with vLLM's buckets, and `render_prometheus`, which writes them
in Prometheus' text format the way Ray's exporter shows vLLM's metrics: `vllm:x` becomes
`ray_vllm_x` (every character outside [A-Za-z0-9_] becomes `_`, then the prefix), with the tag
ReplicaId beside vLLM's model_name and engine.

    metrics = EngineMetrics(model_name="tiny")
    metrics.generation_tokens.inc(labels=metrics.labels)
    text = render_prometheus(metrics.registry, prefix="ray_", replica_id="app#LLMServer#abc")

Threading: every metric has its own lock; the engine's thread updates them while another
thread renders. Cost: O(buckets) per observation and O(series x buckets) per render.
"""

from __future__ import annotations

import bisect
import math
import re
import threading
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

# vLLM's buckets (vllm/v1/metrics/loggers.py).
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
               10.0, 20.0, 40.0, 80.0)
REQUEST_LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
                           50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
FINISH_REASONS = ("stop", "length", "abort")

LabelValues = Tuple[Tuple[str, str], ...]


def _key(labels: Optional[Mapping[str, str]]) -> LabelValues:
    return tuple(sorted((labels or {}).items()))


class _Metric:
    kind = ""

    def __init__(self, name: str, documentation: str) -> None:
        self.name = name
        self.documentation = documentation
        self._lock = threading.Lock()

    def samples(self) -> List[Tuple[str, LabelValues, float]]:
        """(name suffix, labels, value) of every series, for rendering."""
        raise NotImplementedError


class Counter(_Metric):
    kind = "counter"

    def __init__(self, name: str, documentation: str) -> None:
        super().__init__(name, documentation)
        self._values: Dict[LabelValues, float] = {}  # guarded by _lock

    def inc(self, amount: float = 1.0, labels: Optional[Mapping[str, str]] = None) -> None:
        if amount < 0:
            raise ValueError(f"{self.name}: a counter only goes up, got inc({amount})")
        with self._lock:
            key = _key(labels)
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, labels: Optional[Mapping[str, str]] = None) -> float:
        with self._lock:
            return self._values.get(_key(labels), 0.0)

    def samples(self) -> List[Tuple[str, LabelValues, float]]:
        with self._lock:
            return [("", key, value) for key, value in sorted(self._values.items())]


class Gauge(Counter):
    kind = "gauge"

    def set(self, value: float, labels: Optional[Mapping[str, str]] = None) -> None:
        with self._lock:
            self._values[_key(labels)] = float(value)

    def inc(self, amount: float = 1.0, labels: Optional[Mapping[str, str]] = None) -> None:
        with self._lock:
            key = _key(labels)
            self._values[key] = self._values.get(key, 0.0) + amount


class Histogram(_Metric):
    kind = "histogram"

    def __init__(self, name: str, documentation: str, buckets: Sequence[float]) -> None:
        super().__init__(name, documentation)
        if list(buckets) != sorted(set(buckets)) or not buckets:
            raise ValueError(f"{name}: buckets must be increasing, got {list(buckets)}")
        self.buckets = tuple(float(b) for b in buckets)
        # Per series: counts per bucket (the last one +Inf, not cumulative), sum, count.
        self._series: Dict[LabelValues, Tuple[List[int], List[float]]] = {}  # guarded by _lock

    def observe(self, value: float, labels: Optional[Mapping[str, str]] = None) -> None:
        with self._lock:
            counts, total = self._series.setdefault(
                _key(labels), ([0] * (len(self.buckets) + 1), [0.0]))
            counts[bisect.bisect_left(self.buckets, value)] += 1
            total[0] += value

    def count(self, labels: Optional[Mapping[str, str]] = None) -> int:
        with self._lock:
            series = self._series.get(_key(labels))
            return sum(series[0]) if series else 0

    def sum(self, labels: Optional[Mapping[str, str]] = None) -> float:
        with self._lock:
            series = self._series.get(_key(labels))
            return series[1][0] if series else 0.0

    def samples(self) -> List[Tuple[str, LabelValues, float]]:
        out: List[Tuple[str, LabelValues, float]] = []
        with self._lock:
            for key, (counts, total) in sorted(self._series.items()):
                cumulative = 0
                for bound, count in zip(self.buckets + (math.inf,), counts):
                    cumulative += count
                    out.append(("_bucket", key + (("le", _format_value(bound)),), cumulative))
                out.append(("_sum", key, total[0]))
                out.append(("_count", key, float(cumulative)))
        return out


class EngineMetrics:
    """The metrics one engine keeps, each series labelled model_name and engine (vLLM's)."""

    def __init__(self, model_name: str, engine_index: int = 0) -> None:
        self.labels = {"model_name": model_name, "engine": str(engine_index)}
        self.time_to_first_token = Histogram(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
            TTFT_BUCKETS)
        self.inter_token_latency = Histogram(
            "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
            ITL_BUCKETS)
        self.e2e_request_latency = Histogram(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.", REQUEST_LATENCY_BUCKETS)
        self.request_queue_time = Histogram(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.", REQUEST_LATENCY_BUCKETS)
        self.num_requests_running = Gauge(
            "vllm:num_requests_running", "Number of requests in model execution batches.")
        self.num_requests_waiting = Gauge(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed.")
        self.kv_cache_usage = Gauge(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
        self.prompt_tokens = Counter(
            "vllm:prompt_tokens_total", "Number of prefill tokens processed.")
        self.generation_tokens = Counter(
            "vllm:generation_tokens_total", "Number of generation tokens processed.")
        self.request_success = Counter(
            "vllm:request_success_total", "Count of successfully processed requests.")
        self.num_preemptions = Counter(
            "vllm:num_preemptions_total", "Cumulative number of preemption from the engine.")
        # Every series exists from the start (at 0), as vLLM creates them.
        for gauge in (self.num_requests_running, self.num_requests_waiting, self.kv_cache_usage):
            gauge.set(0.0, self.labels)
        for counter in (self.prompt_tokens, self.generation_tokens, self.num_preemptions):
            counter.inc(0.0, self.labels)
        for reason in FINISH_REASONS:
            self.request_success.inc(0.0, self.finished_labels(reason))

    def finished_labels(self, reason: str) -> Dict[str, str]:
        return {**self.labels, "finished_reason": reason}

    @property
    def registry(self) -> List[_Metric]:
        return [self.time_to_first_token, self.inter_token_latency, self.e2e_request_latency,
                self.request_queue_time, self.num_requests_running, self.num_requests_waiting,
                self.kv_cache_usage, self.prompt_tokens, self.generation_tokens,
                self.request_success, self.num_preemptions]

    def by_name(self, name: str) -> _Metric:
        """The metric named `name` (vLLM's name, e.g. "vllm:prompt_tokens_total")."""
        for metric in self.registry:
            if metric.name == name:
                return metric
        raise KeyError(f"no engine metric named {name!r}")


def ray_metric_name(name: str, prefix: str = "ray_") -> str:
    """Ray's exported name of a metric: `vllm:time_to_first_token_seconds` ->
    `ray_vllm_time_to_first_token_seconds`."""
    return prefix + re.sub(r"[^A-Za-z0-9_]", "_", name)


def render_prometheus(metrics: Iterable[_Metric], prefix: str = "ray_",
                      replica_id: Optional[str] = None) -> str:
    """Prometheus text format (version 0.0.4) of `metrics`, renamed as Ray exports them, with
    ReplicaId=`replica_id` on every series when given."""
    lines: List[str] = []
    extra: LabelValues = (("ReplicaId", replica_id),) if replica_id is not None else ()
    for metric in metrics:
        name = ray_metric_name(metric.name, prefix)
        lines.append(f"# HELP {name} {_escape_help(metric.documentation)}")
        lines.append(f"# TYPE {name} {metric.kind}")
        for suffix, labels, value in metric.samples():
            lines.append(f"{name}{suffix}{_format_labels(extra + labels)} {_format_value(value)}")
    return "\n".join(lines) + "\n" if lines else ""


def _format_labels(labels: LabelValues) -> str:
    if not labels:
        return ""
    le = [pair for pair in labels if pair[0] == "le"]
    others = sorted(pair for pair in labels if pair[0] != "le")
    body = ",".join(f'{key}="{_escape_label(value)}"' for key, value in others + le)
    return "{" + body + "}"


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _format_value(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return repr(float(value))

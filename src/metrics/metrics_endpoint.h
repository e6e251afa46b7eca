// The /metrics route: a handler that collects a registry at each request and answers the
// Prometheus text format 0.0.4 (exposition.h) with its Content-Type.
//
//   TESSERA_RETURN_IF_ERROR(server->Handle("/metrics", PrometheusMetricsHandler(registry)));
//
// Threading: thread-safe; `registry` must outlive the handler (and so the server's routes).
// Cost: one MetricRegistry::Collect and one render per scrape (~4 ms of CPU and ~780 KB of
// text for 10k series; bench/metrics_bench).
#pragma once

#include "metrics/http_server.h"
#include "metrics/metric_registry.h"

namespace tessera::metrics {

HttpHandler PrometheusMetricsHandler(const MetricRegistry& registry);

}  // namespace tessera::metrics

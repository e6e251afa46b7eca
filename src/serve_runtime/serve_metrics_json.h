// The Serve page's figures as JSON (the head's route /api/v1/serve/metrics, which the dashboard's
// Serve page reads: web/dashboard/js/pages/serve.js): the families of the head's registry whose
// names start ray_serve_, ray_vllm_ or tessera_serve_ (the proxy's and the controller's, and the
// replicas' own relayed ones), in name order:
//
//   {"families": [
//     {"name": "ray_serve_num_http_requests_total", "type": "counter", "help": "...",
//      "series": [{"labels": {"route": "/", ...}, "value": 3}]},
//     {"name": "ray_vllm_time_to_first_token_seconds", "type": "histogram", "help": "...",
//      "series": [{"labels": {...}, "count": 3, "sum": 0.41,
//                  "bounds": [0.001, ...], "counts": [0, ..., 3]}]}]}
//
// A histogram's "counts" are cumulative, one per bound and then +Inf (which equals "count"). A
// value that is not finite (NaN, ±Inf) is null, which JSON has instead.
//
// Pure; thread-safe. Cost: linear in the series.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "metrics/metric_registry.h"

namespace tessera::serve {

nlohmann::ordered_json ServeMetricsJson(const std::vector<metrics::FamilySnapshot>& families);

}  // namespace tessera::serve

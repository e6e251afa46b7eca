#include "metrics/metrics_endpoint.h"

#include <string>

#include "metrics/exposition.h"

namespace tessera::metrics {

HttpHandler PrometheusMetricsHandler(const MetricRegistry& registry) {
  return [&registry](const HttpRequest&) {
    HttpResponse response;
    response.content_type = std::string(kPrometheusTextContentType);
    response.body = RenderPrometheusText(registry);
    return response;
  };
}

}  // namespace tessera::metrics

#include "serve_runtime/replica_metrics_collector.h"

#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "base/log_line.h"
#include "base/status_macros.h"
#include "metrics/exposition_parser.h"
#include "metrics/relayed_families.h"

namespace tessera::serve {

struct ReplicaMetricsCollector::Shared {
  absl::Mutex mu;
  std::set<std::string> kept ABSL_GUARDED_BY(mu);
  std::set<std::string> in_flight ABSL_GUARDED_BY(mu);
  // By replica id: the families of its last good answer, ReplicaId set.
  std::map<std::string, std::vector<metrics::FamilySnapshot>> families ABSL_GUARDED_BY(mu);
  // Replicas whose last answer was logged as bad (one line per bad spell).
  std::set<std::string> complained ABSL_GUARDED_BY(mu);
};

namespace {

using metrics::FamilySnapshot;

// A replica's answer as families (ReplicaId set); `dropped` gets what was left out.
absl::StatusOr<std::vector<FamilySnapshot>> ReadAnswer(const std::string& replica_id,
                                                       const absl::StatusOr<std::string>& text,
                                                       size_t max_bytes,
                                                       std::vector<std::string>& dropped) {
  if (!text.ok()) return text.status();
  if (text->size() > max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("its metrics text is ", text->size(), " bytes, more than ", max_bytes));
  }
  TESSERA_ASSIGN_OR_RETURN(metrics::ParsedExposition parsed, metrics::ParsePrometheusText(*text));
  metrics::RelayedFamilies read = metrics::FamiliesOfExposition(parsed);
  TESSERA_RETURN_IF_ERROR(metrics::SetLabel(read.families, kReplicaIdLabel, replica_id));
  dropped = std::move(read.dropped);
  return std::move(read.families);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ReplicaMetricsCollector>> ReplicaMetricsCollector::Create(
    ReplicaMetricsCollectorOptions options) {
  if (options.runtime == nullptr || options.registry == nullptr) {
    return absl::InvalidArgumentError(
        "the replica metrics collector needs a runtime and a registry");
  }
  auto shared = std::make_shared<Shared>();
  std::unique_ptr<ReplicaMetricsCollector> collector(new ReplicaMetricsCollector(options, shared));
  metrics::RelayCallback relay = [shared] { return Merged(*shared); };
  TESSERA_ASSIGN_OR_RETURN(collector->relay_, options.registry->AddRelay(std::move(relay)));
  return collector;
}

std::vector<FamilySnapshot> ReplicaMetricsCollector::Merged(Shared& shared) {
  std::vector<std::vector<FamilySnapshot>> sources;
  {
    absl::MutexLock lock(&shared.mu);
    sources.reserve(shared.families.size());
    for (const auto& [id, families] : shared.families) sources.push_back(families);
  }
  return metrics::MergeFamilies(sources);
}

ReplicaMetricsCollector::ReplicaMetricsCollector(ReplicaMetricsCollectorOptions options,
                                                 std::shared_ptr<Shared> shared)
    : options_(options), shared_(std::move(shared)) {}

ReplicaMetricsCollector::~ReplicaMetricsCollector() { relay_.Reset(); }

void ReplicaMetricsCollector::Keep(const std::vector<std::string>& replica_ids) {
  const std::set<std::string> kept(replica_ids.begin(), replica_ids.end());
  absl::MutexLock lock(&shared_->mu);
  shared_->kept = kept;
  std::erase_if(shared_->families,
                [&kept](const auto& entry) { return !kept.contains(entry.first); });
  std::erase_if(shared_->complained, [&kept](const std::string& id) { return !kept.contains(id); });
}

void ReplicaMetricsCollector::Collect() {
  std::vector<std::string> to_call;
  {
    absl::MutexLock lock(&shared_->mu);
    for (const std::string& id : shared_->kept) {
      if (shared_->in_flight.insert(id).second) to_call.push_back(id);
    }
  }
  const size_t max_bytes = options_.max_text_bytes;
  for (const std::string& id : to_call) {
    options_.runtime->Call(
        id, kMetricsMethod, std::nullopt, options_.call_timeout,
        [shared = shared_, id, max_bytes](absl::StatusOr<std::string> text) {
          // Read outside the lock: a replica's text may be long.
          std::vector<std::string> dropped;
          absl::StatusOr<std::vector<FamilySnapshot>> families =
              ReadAnswer(id, text, max_bytes, dropped);
          std::optional<std::string> complaint;
          {
            absl::MutexLock lock(&shared->mu);
            shared->in_flight.erase(id);
            if (!shared->kept.contains(id)) return;  // forgotten meanwhile
            const bool good = families.ok() && dropped.empty();
            if (good) {
              shared->complained.erase(id);
            } else if (shared->complained.insert(id).second) {
              complaint =
                  families.ok()
                      ? absl::StrCat("left out of its metrics: ", absl::StrJoin(dropped, "; "))
                      : absl::StrCat("its metrics are not relayed: ", families.status().message());
            }
            if (families.ok()) {
              shared->families[id] = *std::move(families);
            } else {
              shared->families.erase(id);
            }
          }
          if (complaint.has_value()) LogLine(absl::StrCat("serve: replica ", id, ": ", *complaint));
        });
  }
}

std::vector<FamilySnapshot> ReplicaMetricsCollector::Families() const { return Merged(*shared_); }

}  // namespace tessera::serve

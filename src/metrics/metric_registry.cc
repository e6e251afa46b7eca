#include "metrics/metric_registry.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <set>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/ignore_status.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "metrics/metric_names.h"

namespace tessera::metrics {
namespace {

constexpr size_t kMaxBuckets = 1000;

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

absl::Status ValidateLabelValues(const std::string& metric, size_t label_count,
                                 const std::vector<std::string>& values) {
  if (values.size() != label_count) {
    return absl::InvalidArgumentError(absl::StrCat("metric ", metric, " has ", label_count,
                                                   " label(s), got ", values.size(), " value(s)"));
  }
  for (const std::string& value : values) {
    if (!IsValidUtf8(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric ", metric, ": label value ", Quote(value), " is not UTF-8"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> ToStrings(std::initializer_list<std::string_view> values) {
  return std::vector<std::string>(values.begin(), values.end());
}

// The checks every definition passes, whatever its type (the header lists them).
absl::Status ValidateDefinition(const MetricDefinition& definition, MetricType type) {
  const std::string& name = definition.name;
  TESSERA_RETURN_IF_ERROR(ValidateMetricName(name));
  if (definition.help.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("metric ", name, " has no HELP text"));
  }
  if (!IsValidUtf8(definition.help)) {
    return absl::InvalidArgumentError(absl::StrCat("metric ", name, ": HELP is not UTF-8"));
  }
  const bool counter = type == MetricType::kCounter;
  if (counter && (!EndsWith(name, "_total") || name == "_total")) {
    return absl::InvalidArgumentError(absl::StrCat("counter ", name, " must end with \"_total\""));
  }
  if (!counter && EndsWith(name, "_total")) {
    return absl::InvalidArgumentError(absl::StrCat(
        ToAbsl(MetricTypeName(type)), " ", name, " must not end with \"_total\" (counters only)"));
  }
  if (type != MetricType::kHistogram) {
    for (std::string_view suffix : {"_bucket", "_sum", "_count"}) {
      if (EndsWith(name, suffix)) {
        return absl::InvalidArgumentError(absl::StrCat(ToAbsl(MetricTypeName(type)), " ", name,
                                                       " must not end with \"", ToAbsl(suffix),
                                                       "\" (histogram series use it)"));
      }
    }
  }
  for (size_t i = 0; i < definition.label_names.size(); ++i) {
    const std::string& label = definition.label_names[i];
    TESSERA_RETURN_IF_ERROR(ValidateLabelName(label));
    if (label == "le" || label == "quantile") {
      return absl::InvalidArgumentError(absl::StrCat("metric ", name, ": label name \"", label,
                                                     "\" is reserved for buckets and quantiles"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (definition.label_names[j] == label) {
        return absl::InvalidArgumentError(
            absl::StrCat("metric ", name, ": label name \"", label, "\" appears twice"));
      }
    }
  }
  return absl::OkStatus();
}

// Strictly increasing, not NaN, a trailing +Inf dropped; -Inf only as the first bound.
absl::StatusOr<std::vector<double>> NormalizeBounds(const std::string& name,
                                                    std::vector<double> bounds) {
  if (!bounds.empty() && bounds.back() == INFINITY) bounds.pop_back();
  if (bounds.size() > kMaxBuckets) {
    return absl::InvalidArgumentError(absl::StrCat("histogram ", name, " has ", bounds.size(),
                                                   " buckets; at most ", kMaxBuckets));
  }
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (std::isnan(bounds[i]) || bounds[i] == INFINITY) {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram ", name, ": bucket bound ", i, " is not a finite number"));
    }
    if (i > 0 && !(bounds[i - 1] < bounds[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "histogram ", name, ": bucket bounds must be strictly increasing (bound ", i, ")"));
    }
  }
  return bounds;
}

std::string Describe(const MetricDefinition& definition, MetricType type, bool callback) {
  return absl::StrCat(callback ? "callback " : "", ToAbsl(MetricTypeName(type)), " with labels (",
                      absl::StrJoin(definition.label_names, ", "), ")");
}

}  // namespace

std::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

// --- children ---------------------------------------------------------------------------------

void Counter::Add(double amount) {
  if (!(amount > 0)) return;  // negative, zero or NaN
  fraction_.fetch_add(amount, std::memory_order_relaxed);
}

double Counter::Value() const {
  return static_cast<double>(whole_.load(std::memory_order_relaxed)) +
         fraction_.load(std::memory_order_relaxed);
}

Histogram::Histogram(std::shared_ptr<const std::vector<double>> bounds)
    : bounds_(std::move(bounds)), counts_(new std::atomic<uint64_t>[bounds_->size() + 1]) {
  for (size_t i = 0; i <= bounds_->size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double value) {
  // lower_bound: the first bound >= value. NaN compares false with everything, so it would land
  // in the first bucket; it belongs to none but +Inf.
  const size_t bucket =
      std::isnan(value)
          ? bounds_->size()
          : std::lower_bound(bounds_->begin(), bounds_->end(), value) - bounds_->begin();
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

std::vector<uint64_t> Histogram::CumulativeCounts() const {
  std::vector<uint64_t> cumulative(bounds_->size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i < cumulative.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    cumulative[i] = running;
  }
  return cumulative;
}

absl::StatusOr<std::vector<double>> LinearBuckets(double start, double width, int count) {
  if (!(width > 0) || count < 1 || !std::isfinite(start)) {
    return absl::InvalidArgumentError("linear buckets need a finite start, width > 0, count >= 1");
  }
  std::vector<double> bounds;
  for (int i = 0; i < count; ++i) bounds.push_back(start + width * i);
  return bounds;
}

std::vector<double> LatencySecondsBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
          0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30};
}

absl::StatusOr<std::vector<double>> ExponentialBuckets(double start, double factor, int count) {
  if (!(start > 0) || !(factor > 1) || count < 1 || !std::isfinite(start)) {
    return absl::InvalidArgumentError("exponential buckets need start > 0, factor > 1, count >= 1");
  }
  std::vector<double> bounds;
  double bound = start;
  for (int i = 0; i < count; ++i, bound *= factor) bounds.push_back(bound);
  return bounds;
}

// --- labelled families ------------------------------------------------------------------------

template <typename Child>
LabelledFamily<Child>::LabelledFamily(MetricDefinition definition, MetricType type,
                                      std::shared_ptr<const std::vector<double>> bounds)
    : Family(std::move(definition), type), bounds_(std::move(bounds)) {}

template <typename Child>
absl::StatusOr<Child*> LabelledFamily<Child>::WithLabels(
    std::initializer_list<std::string_view> label_values) {
  return Find(ToStrings(label_values));
}

template <typename Child>
absl::StatusOr<Child*> LabelledFamily<Child>::WithLabels(
    const std::vector<std::string>& label_values) {
  return Find(label_values);
}

template <typename Child>
absl::StatusOr<Child*> LabelledFamily<Child>::Find(std::vector<std::string> label_values) {
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = children_.find(label_values);
    if (it != children_.end()) return it->second.get();
  }
  TESSERA_RETURN_IF_ERROR(
      ValidateLabelValues(definition().name, definition().label_names.size(), label_values));
  absl::MutexLock lock(&mu_);
  std::unique_ptr<Child>& child = children_[std::move(label_values)];
  if (child == nullptr) {
    if constexpr (std::is_same_v<Child, Histogram>) {
      child.reset(new Histogram(bounds_));
    } else {
      child.reset(new Child());
    }
  }
  return child.get();
}

template <typename Child>
void LabelledFamily<Child>::CollectSeries(FamilySnapshot& out) const {
  {
    absl::ReaderMutexLock lock(&mu_);
    out.series.reserve(out.series.size() + children_.size());
    for (const auto& [label_values, child] : children_) {
      SeriesSnapshot series;
      series.label_values = label_values;
      if constexpr (std::is_same_v<Child, Histogram>) {
        series.cumulative_counts = child->CumulativeCounts();
        series.sum = child->Sum();
      } else {
        series.value = child->Value();
      }
      out.series.push_back(std::move(series));  // in label order: children_ is sorted
    }
  }
}

template class LabelledFamily<Counter>;
template class LabelledFamily<Gauge>;
template class LabelledFamily<Histogram>;

// --- callback families ------------------------------------------------------------------------

void SortAndDedupeSeries(std::vector<SeriesSnapshot>& series) {
  std::stable_sort(series.begin(), series.end(),
                   [](const SeriesSnapshot& a, const SeriesSnapshot& b) {
                     return a.label_values < b.label_values;
                   });
  series.erase(std::unique(series.begin(), series.end(),
                           [](const SeriesSnapshot& a, const SeriesSnapshot& b) {
                             return a.label_values == b.label_values;
                           }),
               series.end());
}

// A family whose samples a callback emits at each collection. The slot's mutex serializes runs
// of the callback with each other and with its removal.
class CallbackFamily final : public Family, public CallbackSlot {
 public:
  CallbackFamily(MetricDefinition definition, MetricType type)
      : Family(std::move(definition), type) {}

  // False when a callback is attached already.
  bool Attach(CollectCallback callback) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (callback_ != nullptr) return false;
    callback_ = std::move(callback);
    return true;
  }
  void Detach() override ABSL_LOCKS_EXCLUDED(mu_) {
    CollectCallback dropped;
    {
      absl::MutexLock lock(&mu_);
      dropped = std::move(callback_);
      callback_ = nullptr;
    }
    // `dropped` (and what it captured) is destroyed here, outside the lock.
  }

  void CollectSeries(FamilySnapshot& out) const override ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (callback_ == nullptr) return;
      SampleSink sink(definition(), out.series);
      callback_(sink);
    }
    // Sorted, and a tuple emitted twice keeps its first value.
    SortAndDedupeSeries(out.series);
  }

 private:
  mutable absl::Mutex mu_;
  CollectCallback callback_ ABSL_GUARDED_BY(mu_);
};

absl::Status SampleSink::Emit(std::initializer_list<std::string_view> label_values, double value) {
  return Add(ToStrings(label_values), value);
}

absl::Status SampleSink::Emit(const std::vector<std::string>& label_values, double value) {
  return Add(label_values, value);
}

absl::Status SampleSink::Add(std::vector<std::string> label_values, double value) {
  TESSERA_RETURN_IF_ERROR(
      ValidateLabelValues(definition_.name, definition_.label_names.size(), label_values));
  SeriesSnapshot series;
  series.label_values = std::move(label_values);
  series.value = value;
  series_.push_back(std::move(series));
  return absl::OkStatus();
}

// --- relays -----------------------------------------------------------------------------------

// A relay's callback. Its mutex serializes runs of the callback with each other and with its
// removal, as a callback family's does.
class RelaySource final : public CallbackSlot {
 public:
  explicit RelaySource(RelayCallback callback) : callback_(std::move(callback)) {}

  void Detach() override ABSL_LOCKS_EXCLUDED(mu_) {
    RelayCallback dropped;
    {
      absl::MutexLock lock(&mu_);
      dropped = std::move(callback_);
      callback_ = nullptr;
    }
    detached_.store(true, std::memory_order_relaxed);
    // `dropped` (and what it captured) is destroyed here, outside the lock.
  }
  // Read under the registry's lock, which a running callback may want: no lock of its own.
  bool detached() const { return detached_.load(std::memory_order_relaxed); }
  std::vector<FamilySnapshot> Run() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (callback_ == nullptr) return {};
    return callback_();
  }

 private:
  mutable absl::Mutex mu_;
  RelayCallback callback_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> detached_{false};
};

absl::Status CheckFamilySnapshot(const FamilySnapshot& family) {
  TESSERA_RETURN_IF_ERROR(ValidateDefinition(
      MetricDefinition{.name = family.name, .help = family.help, .label_names = family.label_names},
      family.type));
  const bool histogram = family.type == MetricType::kHistogram;
  if (!histogram && !family.bucket_bounds.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric ", family.name, ": only a histogram has bucket bounds"));
  }
  if (histogram) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<double> bounds,
                             NormalizeBounds(family.name, family.bucket_bounds));
    if (bounds.size() != family.bucket_bounds.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram ", family.name, " lists +Inf among its bounds"));
    }
  }
  for (const SeriesSnapshot& series : family.series) {
    TESSERA_RETURN_IF_ERROR(
        ValidateLabelValues(family.name, family.label_names.size(), series.label_values));
    if (!histogram) continue;
    const std::vector<uint64_t>& counts = series.cumulative_counts;
    if (counts.size() != family.bucket_bounds.size() + 1) {
      return absl::InvalidArgumentError(absl::StrCat("histogram ", family.name, ": a series has ",
                                                     counts.size(), " bucket counts for ",
                                                     family.bucket_bounds.size() + 1, " buckets"));
    }
    if (!std::is_sorted(counts.begin(), counts.end())) {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram ", family.name, ": a series' bucket counts decrease"));
    }
  }
  return absl::OkStatus();
}

namespace {

// Appends to `snapshots` the relayed families that pass CheckFamilySnapshot and whose names
// neither `own` nor an earlier relayed family has, then puts `snapshots` in name order again.
void AppendRelayed(const std::vector<std::shared_ptr<RelaySource>>& relays,
                   const std::vector<std::shared_ptr<Family>>& own,
                   std::vector<FamilySnapshot>& snapshots) {
  std::set<std::string, std::less<>> names;
  for (const std::shared_ptr<Family>& family : own) names.insert(family->definition().name);
  bool added = false;
  for (const std::shared_ptr<RelaySource>& relay : relays) {
    for (FamilySnapshot& family : relay->Run()) {
      if (names.contains(family.name) || !CheckFamilySnapshot(family).ok()) continue;
      names.insert(family.name);
      SortAndDedupeSeries(family.series);
      if (family.series.empty()) continue;
      snapshots.push_back(std::move(family));
      added = true;
    }
  }
  if (!added) return;
  std::stable_sort(
      snapshots.begin(), snapshots.end(),
      [](const FamilySnapshot& a, const FamilySnapshot& b) { return a.name < b.name; });
}

}  // namespace

CallbackRegistration& CallbackRegistration::operator=(CallbackRegistration&& other) noexcept {
  if (this != &other) {
    Reset();
    slot_ = std::move(other.slot_);
  }
  return *this;
}

void CallbackRegistration::Reset() {
  if (slot_ == nullptr) return;
  slot_->Detach();
  slot_ = nullptr;
}

// --- the registry -----------------------------------------------------------------------------

absl::StatusOr<std::shared_ptr<Family>> MetricRegistry::FindSameLocked(
    const MetricDefinition& definition, MetricType type, bool callback,
    const std::vector<double>& bounds) const {
  TESSERA_RETURN_IF_ERROR(ValidateDefinition(definition, type));
  auto it = families_.find(definition.name);
  if (it == families_.end()) return std::shared_ptr<Family>();
  const Family& existing = *it->second;
  const bool existing_callback = dynamic_cast<const CallbackFamily*>(&existing) != nullptr;
  if (existing.type() != type || existing_callback != callback ||
      existing.definition().label_names != definition.label_names) {
    return absl::AlreadyExistsError(
        absl::StrCat("metric ", definition.name, " is registered as a ",
                     Describe(existing.definition(), existing.type(), existing_callback),
                     "; asked for a ", Describe(definition, type, callback)));
  }
  if (existing.definition().help != definition.help) {
    return absl::AlreadyExistsError(
        absl::StrCat("metric ", definition.name, " is registered with other HELP text"));
  }
  if (type == MetricType::kHistogram &&
      static_cast<const HistogramFamily&>(existing).bucket_bounds() != bounds) {
    return absl::AlreadyExistsError(
        absl::StrCat("histogram ", definition.name, " is registered with other bucket bounds"));
  }
  return it->second;
}

template <typename Child>
absl::StatusOr<LabelledFamily<Child>*> MetricRegistry::AddLabelled(MetricDefinition definition,
                                                                   MetricType type,
                                                                   std::vector<double> bounds) {
  if (type == MetricType::kHistogram) {
    TESSERA_ASSIGN_OR_RETURN(bounds, NormalizeBounds(definition.name, std::move(bounds)));
  }
  absl::MutexLock lock(&mu_);
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Family> same,
                           FindSameLocked(definition, type, /*callback=*/false, bounds));
  if (same != nullptr) return static_cast<LabelledFamily<Child>*>(same.get());
  const bool unlabelled = definition.label_names.empty();
  const std::string name = definition.name;
  auto family = std::make_shared<LabelledFamily<Child>>(
      std::move(definition), type, std::make_shared<const std::vector<double>>(std::move(bounds)));
  if (unlabelled) {
    // Renders 0 from the start.
    IgnoreStatus(family->WithLabels({}), "cannot fail: no label values are needed");
  }
  families_[name] = family;
  return family.get();
}

absl::StatusOr<CounterFamily*> MetricRegistry::AddCounter(MetricDefinition definition) {
  return AddLabelled<Counter>(std::move(definition), MetricType::kCounter, {});
}

absl::StatusOr<GaugeFamily*> MetricRegistry::AddGauge(MetricDefinition definition) {
  return AddLabelled<Gauge>(std::move(definition), MetricType::kGauge, {});
}

absl::StatusOr<HistogramFamily*> MetricRegistry::AddHistogram(MetricDefinition definition,
                                                              std::vector<double> bucket_bounds) {
  return AddLabelled<Histogram>(std::move(definition), MetricType::kHistogram,
                                std::move(bucket_bounds));
}

absl::StatusOr<CallbackRegistration> MetricRegistry::AddCallback(MetricDefinition definition,
                                                                 MetricType type,
                                                                 CollectCallback callback) {
  if (callback == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric ", definition.name, ": the callback is empty"));
  }
  std::shared_ptr<CallbackFamily> family;
  {
    absl::MutexLock lock(&mu_);
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Family> same,
                             FindSameLocked(definition, type, /*callback=*/true, {}));
    if (same != nullptr) {
      family = std::static_pointer_cast<CallbackFamily>(same);
    } else {
      const std::string name = definition.name;
      family = std::make_shared<CallbackFamily>(std::move(definition), type);
      families_[name] = family;
    }
  }
  if (!family->Attach(std::move(callback))) {
    return absl::AlreadyExistsError(
        absl::StrCat("metric ", family->definition().name, " already has a callback"));
  }
  return CallbackRegistration(std::move(family));
}

absl::StatusOr<CallbackRegistration> MetricRegistry::AddCallbackCounter(MetricDefinition definition,
                                                                        CollectCallback callback) {
  return AddCallback(std::move(definition), MetricType::kCounter, std::move(callback));
}

absl::StatusOr<CallbackRegistration> MetricRegistry::AddCallbackGauge(MetricDefinition definition,
                                                                      CollectCallback callback) {
  return AddCallback(std::move(definition), MetricType::kGauge, std::move(callback));
}

absl::StatusOr<CallbackRegistration> MetricRegistry::AddRelay(RelayCallback callback) {
  if (callback == nullptr) return absl::InvalidArgumentError("a relay's callback is empty");
  auto relay = std::make_shared<RelaySource>(std::move(callback));
  absl::MutexLock lock(&mu_);
  std::erase_if(relays_, [](const std::shared_ptr<RelaySource>& old) { return old->detached(); });
  relays_.push_back(relay);
  return CallbackRegistration(std::move(relay));
}

std::vector<FamilySnapshot> MetricRegistry::Collect() const {
  std::vector<std::shared_ptr<Family>> families;
  std::vector<std::shared_ptr<RelaySource>> relays;
  {
    absl::ReaderMutexLock lock(&mu_);
    families.reserve(families_.size());
    for (const auto& [name, family] : families_) families.push_back(family);
    relays = relays_;
  }
  std::vector<FamilySnapshot> snapshots;
  snapshots.reserve(families.size());
  for (const std::shared_ptr<Family>& family : families) {
    FamilySnapshot snapshot;
    snapshot.name = family->definition().name;
    snapshot.help = family->definition().help;
    snapshot.type = family->type();
    snapshot.label_names = family->definition().label_names;
    if (family->type() == MetricType::kHistogram) {
      snapshot.bucket_bounds = static_cast<const HistogramFamily&>(*family).bucket_bounds();
    }
    family->CollectSeries(snapshot);
    if (!snapshot.series.empty()) snapshots.push_back(std::move(snapshot));
  }
  if (!relays.empty()) AppendRelayed(relays, families, snapshots);
  return snapshots;
}

}  // namespace tessera::metrics

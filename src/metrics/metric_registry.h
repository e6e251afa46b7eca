// MetricRegistry: the metric families one process (the head, a node agent) exports to Prometheus.
// A family is a name, HELP text, label names and a type; its children are the series, one per
// tuple of label values.
//
//   MetricRegistry registry;
//   TESSERA_ASSIGN_OR_RETURN(CounterFamily * finished, registry.AddCounter({
//       .name = "tessera_tasks_finished_total", .help = "Tasks that ran to the end.",
//       .label_names = {"outcome"}}));
//   TESSERA_ASSIGN_OR_RETURN(Counter * succeeded, finished->WithLabels({"succeeded"}));
//   succeeded->Increment();  // hot path: one relaxed atomic add, no lock, no lookup
//
//   TESSERA_ASSIGN_OR_RETURN(CallbackRegistration objects, registry.AddCallbackGauge(
//       {.name = "tessera_object_store_objects", .help = "Objects in the store."},
//       [&store](SampleSink& sink) {
//         IgnoreStatus(sink.Emit({}, store.object_count()), "no labels: it cannot fail");
//       }));
//
// Types: Counter (monotonic; the name must end "_total"), Gauge (set/add), Histogram (fixed
// bucket upper bounds given at registration, in base units: seconds, bytes; observations are
// counted per bucket and summed), and counters and gauges computed at scrape time by a callback
// that its owner registers (CallbackRegistration removes it). Values are float64 as Prometheus
// has them. A relay (AddRelay) adds whole families another process rendered (relayed_families.h
// reads them from its text) at each Collect, checked as registrations are.
//
// Definitions are checked when registered (InvalidArgument, one line): the metric and label
// name rules of metric_names.h; non-empty HELP (promtool requires one); counters end "_total" and
// nothing else does; only histograms may end "_bucket", "_sum" or "_count" (so no family's
// series can collide with a histogram's); no family has an "le" or "quantile" label (Prometheus
// gives them meaning) or a label name twice; histogram bounds strictly increasing and not NaN
// (a trailing +Inf is dropped: the +Inf bucket is always there). The "tessera_" prefix is a
// convention, not checked. Registering a name again with the same definition (type, HELP,
// labels, bounds) returns the existing family; with a different one, AlreadyExists.
//
// Cost (bench/metrics_bench, 2.1 GHz x86): WithLabels takes the family's mutex and looks the
// label values up in a sorted map (~120 ns; the first call for a tuple allocates the child).
// Callers look a child up once and keep the pointer, which is stable for the registry's life:
// children are never removed, so a label set that comes and goes (nodes, devices) belongs in a
// callback family instead. Counter::Increment is one relaxed atomic fetch_add (~8 ns; threads
// hitting the same child share its cache line, and each child has a line of its own);
// Counter::Add(double) and Gauge::Add are a compare-and-swap loop (~18 ns); Gauge::Set one
// store; Histogram::Observe a binary search of the bounds, one atomic add for the bucket and one
// compare-and-swap for the sum (~22 ns with 12 buckets). Collect copies every child's values
// under its family's mutex (never blocking the atomic paths), in label order with no sorting,
// and runs callbacks, one family at a time: ~1.4 ms for 10k series.
//
// Threading: thread-safe. Families and children may be used from any thread. Callbacks run on
// the collecting thread, one at a time per family, with no registry lock held (they may call
// the registry); a callback must not take a lock its owner holds while resetting the
// registration.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace tessera::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

// "counter", "gauge", "histogram": the word the text format's TYPE line uses.
std::string_view MetricTypeName(MetricType type);

struct MetricDefinition {
  std::string name;
  std::string help;
  std::vector<std::string> label_names;

  bool operator==(const MetricDefinition&) const = default;
};

// A counter series. Thread-safe; never decreases.
class alignas(64) Counter {
 public:
  void Increment(uint64_t n = 1) { whole_.fetch_add(n, std::memory_order_relaxed); }
  // Adds a fractional amount (seconds of CPU, say). Negative amounts and NaN are ignored: a
  // counter only goes up.
  void Add(double amount);
  double Value() const;

 private:
  template <typename Child>
  friend class LabelledFamily;
  Counter() = default;

  std::atomic<uint64_t> whole_{0};
  std::atomic<double> fraction_{0};
};

// A gauge series. Thread-safe.
class alignas(64) Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double amount) { value_.fetch_add(amount, std::memory_order_relaxed); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  template <typename Child>
  friend class LabelledFamily;
  Gauge() = default;

  std::atomic<double> value_{0};
};

// A histogram series: observations counted in the family's buckets and summed. Thread-safe.
class alignas(64) Histogram {
 public:
  // Counts `value` in the first bucket whose upper bound is >= value (+Inf past the last
  // bound, and for NaN) and adds it to the sum.
  void Observe(double value);

  // Observations per bucket so far, cumulative: one per finite bound, then +Inf (= the count).
  std::vector<uint64_t> CumulativeCounts() const;
  double Sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  template <typename Child>
  friend class LabelledFamily;
  explicit Histogram(std::shared_ptr<const std::vector<double>> bounds);

  const std::shared_ptr<const std::vector<double>> bounds_;  // finite, increasing
  const std::unique_ptr<std::atomic<uint64_t>[]> counts_;    // bounds_->size() + 1, not cumulative
  std::atomic<double> sum_{0};
};

// Bucket bounds: `count` bounds start, start + width, ... (width > 0), and start, start * factor,
// ... (start > 0, factor > 1). InvalidArgument otherwise.
absl::StatusOr<std::vector<double>> LinearBuckets(double start, double width, int count);
absl::StatusOr<std::vector<double>> ExponentialBuckets(double start, double factor, int count);
// The bounds every Tessera latency histogram uses (seconds): 100 µs to 30 s in 1-2.5-5 steps, so
// that series of different families can be compared bucket for bucket.
std::vector<double> LatencySecondsBuckets();

// One series as collected.
struct SeriesSnapshot {
  std::vector<std::string> label_values;    // in the family's label_names order
  double value = 0;                         // counter, gauge
  std::vector<uint64_t> cumulative_counts;  // histogram: per finite bound, then +Inf (= count)
  double sum = 0;                           // histogram
};

// One family as collected: what the exposition renders (and a JSON view could).
struct FamilySnapshot {
  std::string name;
  std::string help;
  MetricType type = MetricType::kGauge;
  std::vector<std::string> label_names;
  std::vector<double> bucket_bounds;   // histogram: finite, increasing; +Inf is implied
  std::vector<SeriesSnapshot> series;  // sorted by label values, each tuple once
};

// A family of the registry (internal base; use the typed families below).
class Family {
 public:
  virtual ~Family() = default;
  const MetricDefinition& definition() const { return definition_; }
  MetricType type() const { return type_; }
  // Appends this family's series to `out` (which has name, help, type and labels filled in).
  virtual void CollectSeries(FamilySnapshot& out) const = 0;

 protected:
  Family(MetricDefinition definition, MetricType type)
      : definition_(std::move(definition)), type_(type) {}

 private:
  const MetricDefinition definition_;
  const MetricType type_;
};

// A family of counters, gauges or histograms, with one child per tuple of label values.
template <typename Child>
class LabelledFamily final : public Family {
 public:
  LabelledFamily(MetricDefinition definition, MetricType type,
                 std::shared_ptr<const std::vector<double>> bounds);

  // The child for these label values (one per label name, in order; any UTF-8, "" included),
  // created on first use. InvalidArgument when the count is wrong or a value is not UTF-8.
  // The pointer stays valid for the registry's life: keep it.
  absl::StatusOr<Child*> WithLabels(std::initializer_list<std::string_view> label_values)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<Child*> WithLabels(const std::vector<std::string>& label_values)
      ABSL_LOCKS_EXCLUDED(mu_);

  const std::vector<double>& bucket_bounds() const { return *bounds_; }
  void CollectSeries(FamilySnapshot& out) const override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::StatusOr<Child*> Find(std::vector<std::string> label_values) ABSL_LOCKS_EXCLUDED(mu_);

  const std::shared_ptr<const std::vector<double>> bounds_;  // empty but for histograms
  mutable absl::Mutex mu_;
  // Sorted, so that collecting needs no sort (a hash map plus sorting took ~60% of a scrape).
  absl::btree_map<std::vector<std::string>, std::unique_ptr<Child>> children_ ABSL_GUARDED_BY(mu_);
};

using CounterFamily = LabelledFamily<Counter>;
using GaugeFamily = LabelledFamily<Gauge>;
using HistogramFamily = LabelledFamily<Histogram>;

extern template class LabelledFamily<Counter>;
extern template class LabelledFamily<Gauge>;
extern template class LabelledFamily<Histogram>;

// What a scrape-time callback writes its samples into. Used on the collecting thread only.
class SampleSink {
 public:
  // Adds one sample (label values as for WithLabels). InvalidArgument, and the sample dropped,
  // when the count is wrong or a value is not UTF-8. A tuple emitted twice keeps its first value.
  absl::Status Emit(std::initializer_list<std::string_view> label_values, double value);
  absl::Status Emit(const std::vector<std::string>& label_values, double value);

 private:
  friend class CallbackFamily;
  SampleSink(const MetricDefinition& definition, std::vector<SeriesSnapshot>& series)
      : definition_(definition), series_(series) {}
  absl::Status Add(std::vector<std::string> label_values, double value);

  const MetricDefinition& definition_;
  std::vector<SeriesSnapshot>& series_;
};

using CollectCallback = std::function<void(SampleSink&)>;

// Families another process rendered, relayed whole at each Collect (MetricRegistry::AddRelay).
using RelayCallback = std::function<std::vector<FamilySnapshot>()>;

// Sorts `series` by label values and keeps the first of each tuple (the sort is stable).
void SortAndDedupeSeries(std::vector<SeriesSnapshot>& series);

// OK when `family` could be a registered family's snapshot: its definition passes the checks of
// a registration (the file comment's rules), a histogram's bounds are finite and strictly
// increasing (+Inf is implied, never listed) and only a histogram has bounds, every series has
// one UTF-8 value per label name, and a histogram series has one cumulative count per bound plus
// +Inf, never decreasing. InvalidArgument naming the family and the first problem otherwise.
absl::Status CheckFamilySnapshot(const FamilySnapshot& family);

// What a CallbackRegistration keeps registered (a callback family, a relay). Internal.
class CallbackSlot {
 public:
  virtual ~CallbackSlot() = default;
  // Removes the callback, waiting for a run in progress to end.
  virtual void Detach() = 0;
};

class CallbackFamily;
class RelaySource;

// Keeps a scrape-time callback registered; destroying or Reset()ting it removes the callback
// (waiting for a run in progress to end), after which the family renders no series until a new
// callback is registered with the same definition (a relay's families are gone with it).
// Move-only; may outlive the registry.
class CallbackRegistration {
 public:
  CallbackRegistration() = default;
  ~CallbackRegistration() { Reset(); }
  CallbackRegistration(CallbackRegistration&& other) noexcept = default;
  CallbackRegistration& operator=(CallbackRegistration&& other) noexcept;
  CallbackRegistration(const CallbackRegistration&) = delete;
  CallbackRegistration& operator=(const CallbackRegistration&) = delete;

  void Reset();
  bool active() const { return slot_ != nullptr; }

 private:
  friend class MetricRegistry;
  explicit CallbackRegistration(std::shared_ptr<CallbackSlot> slot) : slot_(std::move(slot)) {}

  std::shared_ptr<CallbackSlot> slot_;
};

class MetricRegistry {
 public:
  MetricRegistry() = default;
  MetricRegistry(const MetricRegistry&) = delete;
  MetricRegistry& operator=(const MetricRegistry&) = delete;

  // The returned family lives as long as the registry. A family without labels has its one
  // child from the start (WithLabels({})), so it renders 0 before the first update.
  absl::StatusOr<CounterFamily*> AddCounter(MetricDefinition definition) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<GaugeFamily*> AddGauge(MetricDefinition definition) ABSL_LOCKS_EXCLUDED(mu_);
  // `bucket_bounds`: the buckets' upper bounds, strictly increasing (LinearBuckets,
  // ExponentialBuckets); at most 1000.
  absl::StatusOr<HistogramFamily*> AddHistogram(MetricDefinition definition,
                                                std::vector<double> bucket_bounds)
      ABSL_LOCKS_EXCLUDED(mu_);

  // A counter or gauge family whose samples `callback` emits at each Collect. AlreadyExists also
  // when the family has a live callback already.
  absl::StatusOr<CallbackRegistration> AddCallbackCounter(MetricDefinition definition,
                                                          CollectCallback callback)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<CallbackRegistration> AddCallbackGauge(MetricDefinition definition,
                                                        CollectCallback callback)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Relays the families `callback` returns, whole (histograms too), at each Collect: the serve
  // controller relays its replicas' own metrics this way. Collect keeps a relayed family only
  // when it passes CheckFamilySnapshot and no family of this registry, nor one an earlier relay
  // gave, has its name; its series are sorted, a tuple given twice keeping its first value. The
  // callback runs on the collecting thread as a callback family's does. InvalidArgument for an
  // empty callback.
  absl::StatusOr<CallbackRegistration> AddRelay(RelayCallback callback) ABSL_LOCKS_EXCLUDED(mu_);

  // Every family with at least one series, the registry's own and the relayed ones together in
  // name order (byte order), series in label order.
  std::vector<FamilySnapshot> Collect() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The family named `definition.name` when it has exactly this definition, nullptr when there
  // is none (after checking the definition), AlreadyExists when it differs.
  absl::StatusOr<std::shared_ptr<Family>> FindSameLocked(const MetricDefinition& definition,
                                                         MetricType type, bool callback,
                                                         const std::vector<double>& bounds) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<CallbackRegistration> AddCallback(MetricDefinition definition, MetricType type,
                                                   CollectCallback callback)
      ABSL_LOCKS_EXCLUDED(mu_);
  template <typename Child>
  absl::StatusOr<LabelledFamily<Child>*> AddLabelled(MetricDefinition definition, MetricType type,
                                                     std::vector<double> bounds)
      ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Family>> families_ ABSL_GUARDED_BY(mu_);
  // In the order added; those detached are dropped at the next AddRelay.
  std::vector<std::shared_ptr<RelaySource>> relays_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::metrics

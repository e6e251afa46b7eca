// Another process's metrics, read from the text it rendered (ParsePrometheusText) back into the
// family snapshots a MetricRegistry relays (MetricRegistry::AddRelay): the serve controller
// relays its replicas' own metrics on the head's /metrics this way.
//
//   TESSERA_ASSIGN_OR_RETURN(ParsedExposition parsed, ParsePrometheusText(text));
//   RelayedFamilies read = FamiliesOfExposition(parsed);  // what holds together
//   SetLabel(read.families, "ReplicaId", replica_id);     // each source's series apart
//   std::vector<FamilySnapshot> all = MergeFamilies({read.families, other.families});
//
// FamiliesOfExposition keeps each family that has a TYPE of counter, gauge or histogram and
// whose samples hold together: a counter's or a gauge's samples are named as the family; a
// histogram has, per label set, x_bucket samples with a numeric `le` (+Inf among them), x_sum
// and x_count, the same bounds in every series, counts that are whole, not negative, cumulative,
// and x_count equal to the +Inf bucket; and the family passes CheckFamilySnapshot (the rules a
// registration follows). A family that does not, a summary, and samples of no TYPE are left out,
// each named once in `dropped` with why. A family's label names are the union of its series'
// (in byte order); a series without one of them has it empty, which Prometheus reads as absent.
// HELP is the text's, else the family's name.
//
// Pure functions; thread-safe. Cost: O(samples × log samples).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "metrics/exposition_parser.h"
#include "metrics/metric_registry.h"

namespace tessera::metrics {

struct RelayedFamilies {
  std::vector<FamilySnapshot> families;  // in name order, series in label order
  std::vector<std::string> dropped;      // "<family or sample name>: why", one per name
};

RelayedFamilies FamiliesOfExposition(const ParsedExposition& parsed);

// Sets the label `name` to `value` on every series of `families`: added to each family's label
// names (in byte order) where it is missing, replaced where a series has it. `name` must be a
// valid label name other than "le" and "quantile" (InvalidArgument, nothing changed,
// otherwise). Series that became equal keep the first.
absl::Status SetLabel(std::vector<FamilySnapshot>& families, std::string_view name,
                      std::string_view value);

// The families of several sources as one list, in name order: families of one name are merged
// when they agree on type and bucket bounds (their label names become the union, in byte
// order); a later source's family that disagrees is left out and named in `dropped` (when
// given). A series two sources both have keeps the first source's value.
std::vector<FamilySnapshot> MergeFamilies(const std::vector<std::vector<FamilySnapshot>>& sources,
                                          std::vector<std::string>* dropped = nullptr);

}  // namespace tessera::metrics
